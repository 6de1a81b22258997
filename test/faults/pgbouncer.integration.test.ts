/**
 * QueueBox's PostgreSQL store behind PgBouncer, as Supabase, Neon, Heroku and many RDS set-ups run every client: a
 * private PgBouncer (the machine's binary, `support/pgbouncer.ts`) in front of the shared server. Each case was found
 * by an outside audit through PgBouncer 1.18 and 1.24:
 * - a connection the pooler dropped while the store's per-connection set-up waited in its queue crashed the process
 *   (an `error` event with no listener);
 * - the store set `default_transaction_isolation` on the session where the server's default was not read committed:
 *   in transaction mode that session then served the application's own transactions, which ran read committed;
 * - a statement past `queryTimeoutMs` was reported failed but not cancelled (the socket was destroyed before the
 *   cancel request was taken, and PgBouncer forgets a gone client's cancel key): the INSERT committed afterwards;
 * - the wake-up listener's LISTEN succeeded through a pooler in transaction mode, which then dropped every
 *   notification, while it reported itself listening (and with `database.listenUrl` it listens directly: the case
 *   of a team whose every URL goes through the pooler but one);
 * - migrators starting together on a fresh schema failed now and then with a unique violation in the catalogs
 *   (`pg_namespace_nspname_index`): 3 of 8 and 6 of 14 runs of 6 migrators.
 */
import { randomUUID } from 'node:crypto';
import { parseConfig } from '@queuebox/config';
import { type Store, StoreUnavailableError, silentLogger } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import { dropPostgresSchemaStatement, freshSchemaName, requireServices, useSchema } from '@queuebox/testing';
import { createPostgresCapture, createWakeUpCapture } from '@queuebox/wake-ups';
import pg from 'pg';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { type PrivatePgBouncer, pgBouncerBinary, startPgBouncer } from './support/pgbouncer.ts';

const needs = await requireServices('faults: PgBouncer', ['postgres']);
const binary = pgBouncerBinary();
if (!needs.skipReason && 'reason' in binary) console.info(`[faults: PgBouncer] skipped: ${binary.reason}`);

describe.skipIf(needs.skipReason || 'reason' in binary)('behind PgBouncer', () => {
  const url = needs.url.postgres;
  const schema = useSchema('faults_pgbouncer', {
    drop: async (name) => {
      const dropper = new pg.Client({ connectionString: url });
      await dropper.connect();
      try {
        await dropper.query(dropPostgresSchemaStatement(name).text);
      } finally {
        await dropper.end();
      }
    },
  });
  const running: PrivatePgBouncer[] = [];
  const stores: Store[] = [];
  const clients: pg.Client[] = [];

  const bouncer = async (options: Omit<Parameters<typeof startPgBouncer>[1], 'target'>) => {
    if ('reason' in binary) throw new Error(binary.reason);
    const started = await startPgBouncer(binary, { target: url, ...options });
    running.push(started);
    return started;
  };
  const store = async (storeUrl: string, options: { queryTimeoutMs?: number } = {}) => {
    const opened = await openPostgresStore({ url: storeUrl, schema: schema.name, poolSize: 2, ...options });
    stores.push(opened);
    return opened;
  };
  const client = async (clientUrl: string) => {
    const opened = new pg.Client({ connectionString: clientUrl });
    opened.on('error', () => {});
    await opened.connect();
    clients.push(opened);
    return opened;
  };

  beforeAll(async () => {
    const migrator = await openPostgresStore({ url, schema: schema.name });
    try {
      await migrator.migrate();
    } finally {
      await migrator.close();
    }
  });

  afterEach(async () => {
    for (const opened of stores.splice(0)) await opened.close().catch(() => undefined);
    for (const opened of clients.splice(0)) await opened.end().catch(() => undefined);
    for (const started of running.splice(0)) await started.dispose();
  });

  it('a connection dropped during its set-up fails the statement as an outage, and the process goes on', async () => {
    // Prepare: session mode with one server connection, held by another client, so the store's first statement
    // (its per-connection set-up) waits in PgBouncer's queue
    const pooler = await bouncer({ mode: 'session', poolSize: 1 });
    const holder = await client(pooler.url);
    await holder.query('SELECT 1');
    const queueBox = await store(pooler.url, { queryTimeoutMs: 20_000 });
    const ping = queueBox.ping().then(
      () => undefined,
      (error: unknown) => error,
    );
    await new Promise((resolve) => setTimeout(resolve, 500));

    // Act: the pooler goes away (a restart, a failover of the pooler)
    await pooler.stop();

    // Assess: an outage the caller sees (no unhandled `error` event: vitest fails a test on one)
    const error = await ping;
    expect(error).toBeInstanceOf(StoreUnavailableError);
  });

  it("leaves a pooled server connection's default isolation as it found it, and claims without 40001", async () => {
    // Prepare: transaction mode, one server connection whose default is serializable (as a role or database
    // setting would make it), shared by QueueBox and the application
    const pooler = await bouncer({
      mode: 'transaction',
      poolSize: 1,
      databaseSettings: { connect_query: "'SET default_transaction_isolation = serializable'" },
    });
    const queueBox = await store(pooler.url);
    const topic = `iso.${randomUUID()}`;
    await queueBox.outbox.insert(
      Array.from({ length: 40 }, (_, i) => ({ topic, key: `k${i % 4}`, payload: { i }, maxAttempts: 3 })),
    );

    // Act: QueueBox claims and settles through the pooler, then the application asks on the same server connection
    let sent = 0;
    for (let round = 0; round < 20 && sent < 40; round++) {
      const rows = await queueBox.outbox.claim({ batchSize: 10, leaseMs: 60_000 });
      if (rows.length === 0) continue;
      await queueBox.outbox.markSent(
        rows.map((r) => ({ id: r.id, claimToken: r.claimToken as string, destination: 'd' })),
      );
      sent += rows.length;
    }
    const application = await client(pooler.url);
    const isolation = await application.query<{ default_transaction_isolation: string }>(
      'SHOW default_transaction_isolation',
    );

    // Assess
    expect(sent).toBe(40);
    expect(isolation.rows[0]?.default_transaction_isolation).toBe('serializable');
  });

  it('does not take a LISTEN through a transaction-mode pooler for a listener, and says why', async () => {
    // Prepare
    const pooler = await bouncer({ mode: 'transaction', poolSize: 2 });
    const watch = (captureUrl: string) => {
      const seen = { listening: 0, errors: [] as string[] };
      const capture = createPostgresCapture({
        url: captureUrl,
        schema: schema.name,
        probeTimeoutMs: 1500,
        reconnectDelayMs: 60_000,
        onOutbox: () => {},
        onInbox: () => {},
        onListening: () => {
          seen.listening += 1;
        },
        onError: (error) => {
          seen.errors.push(String(error));
        },
      });
      return { capture, seen };
    };
    const direct = watch(url);
    const pooled = watch(pooler.url);

    // Act
    try {
      const [directStarted, pooledStarted] = await Promise.all([
        direct.capture.start(),
        pooled.capture.start(),
      ]);

      // Assess: directly it listens; through the pooler it does not, and the reason names the pooler
      expect(directStarted).toBe(true);
      expect(direct.seen).toEqual({ listening: 1, errors: [] });
      expect(pooledStarted).toBe(false);
      expect(pooled.capture.listening).toBe(false);
      expect(pooled.seen.listening).toBe(0);
      expect(pooled.seen.errors.join('\n')).toMatch(/pooler in transaction mode/);
    } finally {
      await direct.capture.close();
      await pooled.capture.close();
    }
  });

  it('wakes through database.listenUrl when database.url goes through a transaction-mode pooler', async () => {
    // Prepare: the configuration a team behind PgBouncer writes, read by the schema
    const pooler = await bouncer({ mode: 'transaction', poolSize: 2 });
    const { database } = parseConfig({ database: { url: pooler.url, listenUrl: url, schema: schema.name } });
    const woken: string[] = [];
    const warnings: string[] = [];
    const capture = createWakeUpCapture({
      database,
      logger: { ...silentLogger, child: () => ({ ...silentLogger, warn: (m) => warnings.push(m) }) },
      onOutbox: () => woken.push('outbox'),
      onInbox: () => woken.push('inbox'),
    });
    const app = await store(pooler.url);

    // Act: the listener starts (its probe sent through the pooler), then a row is enqueued through the pooler
    try {
      const started = await capture.start();
      woken.length = 0;
      await app.outbox.insert([{ topic: 'orders.created', payload: { n: 1 }, maxAttempts: 3 }]);
      await vi.waitFor(() => expect(woken).toContain('outbox'), { timeout: 5000, interval: 20 });

      // Assess
      expect(started).toBe(true);
      expect(capture.listening).toBe(true);
      expect(warnings).toEqual([]);
    } finally {
      await capture.close();
    }
  });

  it('refuses a listenUrl that does not hear what is sent through database.url, and says so', async () => {
    // Prepare: a listener on another database than the one the probe is sent to
    const pooler = await bouncer({ mode: 'transaction', poolSize: 2 });
    const other = new URL(url);
    other.pathname = '/postgres';
    const errors: string[] = [];
    const capture = createPostgresCapture({
      url: other.toString(),
      probeUrl: pooler.url,
      schema: schema.name,
      probeTimeoutMs: 1500,
      reconnectDelayMs: 60_000,
      onOutbox: () => {},
      onInbox: () => {},
      onError: (error) => {
        errors.push(String(error));
      },
    });

    // Act
    try {
      const started = await capture.start();

      // Assess
      expect(started).toBe(false);
      expect(errors.join('\n')).toMatch(
        /sent through database\.url to reach the listener on database\.listenUrl/,
      );
    } finally {
      await capture.close();
    }
  });

  it('migrates a fresh schema with six migrators at once, round after round', async () => {
    // Prepare: transaction mode, two server connections for six migrators
    const pooler = await bouncer({ mode: 'transaction', poolSize: 2 });
    const direct = await client(url);
    const failures: string[] = [];
    const versions: number[] = [];

    // Act: 6 rounds (one failing round in two before)
    for (let round = 0; round < 6; round++) {
      const fresh = freshSchemaName('faults_pgbouncer_mig');
      try {
        const results = await Promise.allSettled(
          Array.from({ length: 6 }, async () => {
            const migrator = await openPostgresStore({ url: pooler.url, schema: fresh, poolSize: 1 });
            try {
              await migrator.migrate();
            } finally {
              await migrator.close();
            }
          }),
        );
        for (const result of results) {
          if (result.status === 'rejected') failures.push(String(result.reason));
        }
        const applied = await direct.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${fresh}".schema_migrations`,
        );
        versions.push(applied.rows[0]?.n ?? 0);
      } finally {
        await direct.query(dropPostgresSchemaStatement(fresh).text);
      }
    }

    // Assess: every migrator succeeded, and each round applied every migration once
    expect(failures).toEqual([]);
    expect(new Set(versions).size).toBe(1);
  });

  it('cancels a statement past queryTimeoutMs, so it never commits after it was reported failed', async () => {
    // Prepare: another session (directly on the server) holds the outbox table, so the insert waits on its lock
    const pooler = await bouncer({ mode: 'transaction', poolSize: 3 });
    const queueBox = await store(pooler.url, { queryTimeoutMs: 1000 });
    await queueBox.ping();
    const locker = await client(url);
    await locker.query('BEGIN');
    await locker.query(`LOCK TABLE "${schema.name}".outbox IN ACCESS EXCLUSIVE MODE`);
    const topic = `late.${randomUUID()}`;

    // Act
    const error = await queueBox.outbox.insert([{ topic, payload: { late: true }, maxAttempts: 3 }]).then(
      () => undefined,
      (failure: unknown) => failure,
    );
    await new Promise((resolve) => setTimeout(resolve, 1000));
    await locker.query('COMMIT');
    await new Promise((resolve) => setTimeout(resolve, 500));

    // Assess: reported as an outage, and nothing committed once the lock was gone
    expect(error).toBeInstanceOf(StoreUnavailableError);
    const rows = await locker.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${schema.name}".outbox WHERE topic = $1`,
      [topic],
    );
    expect(rows.rows[0]?.n, pooler.log().split('\n').slice(-20).join('\n')).toBe(0);
  });
});
