/**
 * A Lambda container is frozen between invocations while its `pg` pool keeps connections the server closes behind
 * it (`idle_session_timeout`, 57P05 "terminating connection due to idle-session timeout"). The next invocation must
 * not fail. The freeze is reproduced by blocking the event loop (Atomics.wait) while the server closes the sessions
 * — set per connection here (`options=-c idle_session_timeout=…`), no server restart — so the socket events wait
 * unread, as in a frozen container, and the handler runs right after the thaw.
 */
import { execFileSync } from 'node:child_process';
import { createPgExecutor, openPostgresStore } from '@queuebox/store-postgres';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler as createMaintenanceTick } from '../../functions/maintenance-tick.ts';
import { createHandler as createMigrate } from '../../functions/migrate.ts';
import { cleanup } from '../local/support.ts';
import { aLambdaContext, aScheduledEvent, type TestShell, testShell, writeConfigFile } from './support.ts';

const needs = await requireServices('function tests: stale-connections', ['postgres']);

const IDLE_SESSION_TIMEOUT_MS = 200;
const APPLICATION = `queuebox-stale-${process.pid}`;

/** Blocks the event loop like a frozen container: nothing runs, sockets are not read, timers do not fire. */
function freeze(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** A URL whose sessions the server closes after `ms` idle (PostgreSQL 14+). */
function withIdleSessionTimeout(url: string, ms: number): string {
  const parsed = new URL(url);
  parsed.searchParams.set('options', `-c idle_session_timeout=${ms}`);
  parsed.searchParams.set('application_name', APPLICATION);
  return parsed.toString();
}

describe.skipIf(needs.skipReason)('a frozen container whose pooled connections the server closed', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'functions_stale', 1);
  const shells: TestShell[] = [];
  let configFile: string;
  const url = withIdleSessionTimeout(needs.url.postgres, IDLE_SESSION_TIMEOUT_MS);

  beforeAll(async () => {
    configFile = await writeConfigFile(`database:
  url: ${JSON.stringify(url)}
  schema: ${schema.name}
  poolSize: 2
`);
    await createMigrate(testShell(configFile))(undefined, aLambdaContext());
  });

  afterAll(async () => {
    for (const shell of shells) for (const cache of shell.caches) await cache.close();
    await cleanup();
  });

  /** A maintenance-tick whose store checks connections idle longer than `maxIdleMs` (default 30 s). */
  function aTick(maxIdleMs?: number) {
    const shell = testShell(configFile, {
      openStore: (database) =>
        openPostgresStore({
          url: database.url ?? '',
          schema: database.schema,
          poolSize: 2,
          ...(maxIdleMs === undefined ? {} : { maxIdleMs }),
        }),
    });
    shells.push(shell);
    return createMaintenanceTick(shell);
  }

  /** Sessions of the handler's pool the server still has (the test's own pool uses another application name). */
  async function handlerSessions(): Promise<number> {
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1`,
      [APPLICATION],
    );
    return rows[0]?.n ?? 0;
  }

  it('retries a statement once on a new connection when the server had closed the idle session (57P05)', async () => {
    // Prepare: a warm container whose age check would not fire (30 s), so only the 57P05 retry can save it.
    const tick = aTick();
    await tick(aScheduledEvent(), aLambdaContext());
    expect(await handlerSessions()).toBeGreaterThan(0);

    // Act: frozen past the server's idle_session_timeout, then invoked at once.
    freeze(IDLE_SESSION_TIMEOUT_MS * 4);
    const answer = await tick(aScheduledEvent(), aLambdaContext());

    // Assess
    expect(answer.outbox?.dead).toEqual(expect.any(Number));
  });

  it('replaces a connection the server ended while the container was frozen (57P01: a failover, a restart) before using it', async () => {
    // Prepare: sessions without an idle timeout, under an application name of their own; a warm container.
    const application = `${APPLICATION}-ended`;
    const parsed = new URL(needs.url.postgres);
    parsed.searchParams.set('application_name', application);
    const file = await writeConfigFile(`database:
  url: ${JSON.stringify(parsed.toString())}
  schema: ${schema.name}
  poolSize: 2
`);
    const shell = testShell(file);
    shells.push(shell);
    const tick = createMaintenanceTick(shell);
    await tick(aScheduledEvent(), aLambdaContext());

    // Act: while the event loop is blocked (frozen), the server ends the sessions (pg_terminate_backend sends what a
    // failover or a restart sends, 57P01); the container thaws more than a second later and is invoked at once.
    execFileSync('psql', [
      needs.url.postgres,
      '-Atc',
      `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '${application}'`,
    ]);
    freeze(1_200);
    const answers = [];
    for (let i = 0; i < 2; i++) answers.push(await tick(aScheduledEvent(), aLambdaContext()));

    // Assess: both invocations answered (the first did not meet the ended sessions).
    expect(answers.map((a) => typeof a.outbox?.dead)).toEqual(['number', 'number']);
  });

  it('closes connections idle longer than maxIdleMs at checkout, before using them', async () => {
    // Prepare
    const tick = aTick(IDLE_SESSION_TIMEOUT_MS / 2);
    await tick(aScheduledEvent(), aLambdaContext());

    // Act
    freeze(IDLE_SESSION_TIMEOUT_MS * 4);
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await tick(aScheduledEvent(), aLambdaContext()));

    // Assess
    expect(answers).toHaveLength(3);
  });

  it('retries BEGIN once on a new connection: nothing has run on a session that was already closed', async () => {
    // Prepare
    const executor = createPgExecutor(new pg.Pool({ connectionString: url, max: 1 }));
    try {
      await executor.transaction((tx) => tx.query('SELECT 1'));

      // Act
      freeze(IDLE_SESSION_TIMEOUT_MS * 4);
      const result = await executor.transaction((tx) => tx.query<{ one: number }>('SELECT 1 AS one'));

      // Assess
      expect(result.rows).toEqual([{ one: 1 }]);
    } finally {
      await executor.close();
    }
  });

  it('reuses a connection idle for less than maxIdleMs and replaces one idle for longer (by the wall clock)', async () => {
    // Prepare: the sessions here do not time out; only the executor's clock moves.
    let now = 0;
    const executor = createPgExecutor(new pg.Pool({ connectionString: needs.url.postgres, max: 1 }), {
      maxIdleMs: 1000,
      now: () => now,
    });
    const pid = async () =>
      (await executor.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
    try {
      // Act
      const first = await pid();
      now += 1000;
      const reused = await pid();
      now += 1001;
      const replaced = await pid();

      // Assess
      expect(reused).toBe(first);
      expect(replaced).not.toBe(first);
    } finally {
      await executor.close();
    }
  });
});
