/**
 * The PostgreSQL capture on a real server: migration 0002's triggers notify once per statement, only the own
 * schema's notifications wake, a terminated listening connection is reconnected, and an unreachable server is
 * retried in the background without ever rejecting.
 */
import { randomBytes } from 'node:crypto';
import type { Store } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import { dropPostgresSchemaStatement, requireServices, useSchema } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type Capture,
  createPostgresCapture,
  INBOX_CHANNEL,
  OUTBOX_CHANNEL,
  type PostgresCaptureOptions,
  wakeUpLockName,
} from '../src/index.ts';
import { aWakeCounter, type WakeCounter } from './wake-counter.ts';

const needs = await requireServices('capture tests', ['postgres']);

describe.skipIf(needs.skipReason)('createPostgresCapture on a real PostgreSQL', () => {
  const pool = new pg.Pool({ connectionString: needs.url.postgres, max: 3 });
  afterAll(async () => {
    await pool.end();
  });
  const schema = useSchema('capture', {
    drop: async (name) => {
      const client = new pg.Client(needs.url.postgres);
      await client.connect();
      try {
        await client.query(dropPostgresSchemaStatement(name).text);
      } finally {
        await client.end();
      }
    },
  });
  let store: Store;
  const captures: Capture[] = [];

  beforeAll(async () => {
    store = await openPostgresStore({ url: needs.url.postgres, schema: schema.name, poolSize: 2 });
    await store.migrate();
  });
  afterAll(async () => {
    await store?.close();
  });
  afterEach(async () => {
    await Promise.all(captures.splice(0).map((c) => c.close()));
  });

  /** A started capture whose connection carries its own application_name, so a test can find its backend. */
  async function listening(
    counter: WakeCounter,
    options: Partial<PostgresCaptureOptions> = {},
  ): Promise<{ capture: Capture; applicationName: string }> {
    const applicationName = `qb capture test ${randomBytes(4).toString('hex')}`;
    const capture = createPostgresCapture({
      url: needs.url.postgres,
      schema: schema.name,
      onOutbox: counter.onOutbox,
      onInbox: counter.onInbox,
      reconnectDelayMs: 50,
      createClient: (url) => new pg.Client({ connectionString: url, application_name: applicationName }),
      ...options,
    });
    captures.push(capture);
    expect(await capture.start()).toBe(true);
    // Listening wakes both once (rows inserted before LISTEN); the tests count what comes after.
    await counter.waitFor('outbox', 1);
    await counter.waitFor('inbox', 1);
    counter.reset();
    return { capture, applicationName };
  }

  /** How many backends carry `applicationName`, once that count is `expected` (a backend exits a moment after its socket closed). */
  async function backendsSettleAt(applicationName: string, expected: number): Promise<number> {
    let n = -1;
    for (let tries = 0; tries < 100; tries++) {
      const { rows } = await pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1',
        [applicationName],
      );
      n = rows[0]?.n ?? -1;
      if (n === expected) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return n;
  }

  const insertOutbox = (rows: number) =>
    pool.query(
      `INSERT INTO "${schema.name}".outbox (topic, payload, max_attempts)
       SELECT 'capture.test', '{}'::jsonb, 3 FROM generate_series(1, $1::int)`,
      [rows],
    );
  const insertInbox = () =>
    pool.query(
      `INSERT INTO "${schema.name}".inbox (source, idempotency_key, payload, max_attempts)
       VALUES ('capture', $1, '{}'::jsonb, 3)`,
      [randomBytes(8).toString('hex')],
    );

  it('wakes onOutbox once for a statement inserting many rows, and onInbox for an inbox insert', async () => {
    const counter = aWakeCounter();
    await listening(counter);

    await insertOutbox(25);
    await insertInbox();
    // Notifications arrive in commit order: once the inbox one is here, every outbox one has arrived too.
    await counter.waitFor('inbox', 1);

    expect(counter.outbox).toBe(1);
    expect(counter.inbox).toBe(1);
  });

  it('has one statement-level AFTER INSERT trigger per table (migration 0002)', async () => {
    // tgtype bits: 1 ROW, 2 BEFORE, 4 INSERT (pg_trigger.h).
    const { rows } = await pool.query<{
      table: string;
      name: string;
      row: boolean;
      before: boolean;
      insert: boolean;
    }>(
      `SELECT c.relname AS table, t.tgname AS name, (t.tgtype & 1) <> 0 AS row, (t.tgtype & 2) <> 0 AS before,
              (t.tgtype & 4) <> 0 AS insert
         FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = $1 AND NOT t.tgisinternal ORDER BY c.relname`,
      [schema.name],
    );

    expect(rows).toEqual([
      { table: 'inbox', name: 'inbox_notify_insert', row: false, before: false, insert: true },
      { table: 'outbox', name: 'outbox_notify_insert', row: false, before: false, insert: true },
    ]);
  });

  it('ignores notifications for another schema, and a rolled-back insert notifies nobody', async () => {
    const counter = aWakeCounter();
    await listening(counter);

    await pool.query(`SELECT pg_notify('queuebox_outbox', $1)`, [`${schema.name}_other`]);
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(
        `INSERT INTO "${schema.name}".outbox (topic, payload, max_attempts) VALUES ('x', '{}', 1)`,
      );
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    await insertInbox();
    await counter.waitFor('inbox', 1);

    expect(counter.outbox).toBe(0);
  });

  it('reconnects after pg_terminate_backend, wakes both drains, and hears inserts again', async () => {
    const counter = aWakeCounter();
    const errors: string[] = [];
    const listened: { reconnects: number; backendPid: number }[] = [];
    const { capture, applicationName } = await listening(counter, {
      onError: (_error, { during }) => errors.push(during),
      onListening: (info) => listened.push(info),
    });

    // The probe's own connection (same application name) may still be exiting: only the listener is left after it
    // (a clean-clone CI run once terminated both).
    expect(await backendsSettleAt(applicationName, 1)).toBe(1);
    const { rows } = await pool.query<{ pid: number; terminated: boolean }>(
      `SELECT pid, pg_terminate_backend(pid) AS terminated FROM pg_stat_activity WHERE application_name = $1`,
      [applicationName],
    );
    expect(rows).toEqual([{ pid: listened[0]?.backendPid, terminated: true }]);
    // Back: LISTEN in place again, and both drains woken for what the gap may have hidden.
    await counter.waitFor('outbox', 1);
    await counter.waitFor('inbox', 1);
    counter.reset();
    await insertOutbox(1);
    await counter.waitFor('outbox', 1);

    expect(errors).toContain('connection');
    expect(listened.map((l) => l.reconnects)).toEqual([0, 1]);
    expect(listened[1]?.backendPid).not.toBe(listened[0]?.backendPid);
    expect(capture.listening).toBe(true);
    expect(await backendsSettleAt(applicationName, 1)).toBe(1);
  });

  it('keeps trying an unreachable server in the background without rejecting, and stops on close', async () => {
    const counter = aWakeCounter();
    const errors: string[] = [];
    // Port 1 on the loopback refuses at once.
    const capture = createPostgresCapture({
      url: 'postgres://postgres@127.0.0.1:1/test',
      schema: schema.name,
      onOutbox: counter.onOutbox,
      reconnectDelayMs: 20,
      maxReconnectDelayMs: 40,
      onError: (_error, { during }) => errors.push(during),
    });
    captures.push(capture);

    expect(await capture.start()).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await capture.close();
    const afterClose = errors.length;
    await new Promise((resolve) => setTimeout(resolve, 200));

    expect(errors.length).toBeGreaterThanOrEqual(3);
    expect(new Set(errors)).toEqual(new Set(['connect']));
    expect(errors.length).toBe(afterClose);
    expect(capture.listening).toBe(false);
    expect(counter.outbox).toBe(0);
  });

  /** A connection that LISTENs on both channels itself and records what it hears for `schema`. */
  async function rawListener(): Promise<{ client: pg.Client; heard: string[] }> {
    const client = new pg.Client(needs.url.postgres);
    const heard: string[] = [];
    client.on('notification', (message) => {
      if (message.payload === schema.name) heard.push(message.channel);
    });
    await client.connect();
    await client.query('LISTEN queuebox_outbox; LISTEN queuebox_inbox');
    return { client, heard };
  }

  /** Whether some session holds the wake-up lock of `channel` for the test's schema (a shared try fails then). */
  async function lockHeld(channel: string): Promise<boolean> {
    const client = await pool.connect();
    try {
      const name = wakeUpLockName(schema.name, channel);
      const { rows } = await client.query<{ free: boolean }>(
        'SELECT pg_try_advisory_lock_shared(hashtextextended($1, 0)) AS free',
        [name],
      );
      if (rows[0]?.free)
        await client.query('SELECT pg_advisory_unlock_shared(hashtextextended($1, 0))', [name]);
      return rows[0]?.free === false;
    } finally {
      client.release();
    }
  }

  const settle = () => new Promise((resolve) => setTimeout(resolve, 300));

  it('notifies only while a session holds the wake-up lock, or the inserting session sets queuebox.wake_ups (migration 0011)', async () => {
    // No capture here: an insert that nobody asked to hear sends nothing, so it does not serialise its commit.
    const { client, heard } = await rawListener();
    try {
      await insertOutbox(1);
      await insertInbox();
      await settle();
      expect(heard).toEqual([]);

      await client.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [
        wakeUpLockName(schema.name, OUTBOX_CHANNEL),
      ]);
      await insertOutbox(1);
      await insertInbox();
      await settle();
      expect(heard).toEqual(['queuebox_outbox']);

      // A session that asks for every notification (the embedded PGlite's one session) gets them without a lock.
      const inserter = await pool.connect();
      try {
        await inserter.query('BEGIN');
        await inserter.query(`SELECT set_config('queuebox.wake_ups', 'always', true)`);
        await inserter.query(
          `INSERT INTO "${schema.name}".inbox (source, idempotency_key, payload, max_attempts) VALUES ('capture', 'always', '{}', 3)`,
        );
        await inserter.query('COMMIT');
      } finally {
        inserter.release();
      }
      await settle();
      expect(heard).toEqual(['queuebox_outbox', 'queuebox_inbox']);
    } finally {
      await client.end();
    }
  });

  it('leaves no wake-up lock behind when a statement timeout cancels inserts inside the trigger', async () => {
    // A session lock outlives its transaction: one left by a cancel between the trigger's take and give-back kept
    // every listener from taking the lock (an outside review saw it after 4-62 timed-out statements).
    const app = new pg.Client(needs.url.postgres);
    await app.connect();
    try {
      const pid = (await app.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
      let held = 0;
      let cancelled = 0;
      for (let i = 0; i < 300 && held === 0; i++) {
        await app.query(`SET statement_timeout = ${1 + (i % 7)}`);
        await app
          .query(
            `DO $$BEGIN FOR i IN 1..1000000 LOOP
               INSERT INTO "${schema.name}".outbox (topic, payload, max_attempts) VALUES ('t', '{}', 3);
             END LOOP; END$$`,
          )
          .catch(() => {
            cancelled += 1;
          });
        // The RESET itself runs under the 1-7 ms timeout, and a busy machine cancels it now and then: again until it
        // goes through.
        for (let reset = 0; ; reset++) {
          const ok = await app.query('RESET statement_timeout').then(
            () => true,
            (error: unknown) => {
              if (reset >= 500) throw error;
              return false;
            },
          );
          if (ok) break;
        }
        const { rows } = await pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = $1`,
          [pid],
        );
        held = rows[0]?.n ?? -1;
      }
      expect(cancelled).toBeGreaterThan(250);
      expect(held).toBe(0);
    } finally {
      await app.end();
    }
  });

  it('holds both wake-up locks while it listens; a second capture takes them once the first is gone', async () => {
    expect(await lockHeld(OUTBOX_CHANNEL)).toBe(false);
    const first = await listening(aWakeCounter());
    expect(await lockHeld(OUTBOX_CHANNEL)).toBe(true);
    expect(await lockHeld(INBOX_CHANNEL)).toBe(true);

    // The second listens (the first's lock makes the triggers notify every listener) and tries the locks again.
    const counter = aWakeCounter();
    await listening(counter, { lockRetryMs: 50 });
    await first.capture.close();
    expect(await backendsSettleAt(first.applicationName, 0)).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await lockHeld(OUTBOX_CHANNEL)).toBe(true);
    expect(await lockHeld(INBOX_CHANNEL)).toBe(true);
    // Taking them over wakes both drains (inserts between the first's end and the takeover notified nobody): the
    // inbox callback ran without any inbox insert.
    await counter.waitFor('inbox', 1);
    await insertOutbox(1);
    await counter.waitFor('outbox', 2);
  });

  it('lets go of the outbox lock on want(false), and takes it back only once every insert that notified nobody has ended (migration 0012)', async () => {
    const counter = aWakeCounter();
    const { capture, applicationName } = await listening(counter, { lockRetryMs: 50 });
    /** The wake-up locks the capture's session holds (granted, not waited for). */
    const grantedToCapture = async () =>
      (
        await pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE a.application_name = $1 AND l.locktype = 'advisory' AND l.mode = 'ExclusiveLock' AND l.granted`,
          [applicationName],
        )
      ).rows[0]?.n;

    // Aside: the outbox lock is free (the inbox one still held), and an outbox insert notifies nobody.
    expect(await capture.want?.('outbox', false)).toBe(false);
    expect(await lockHeld(OUTBOX_CHANNEL)).toBe(false);
    expect(await lockHeld(INBOX_CHANNEL)).toBe(true);
    expect(await grantedToCapture()).toBe(1);
    await insertOutbox(1);
    await insertInbox();
    await counter.waitFor('inbox', 1);
    expect(counter.outbox).toBe(0);

    // An open transaction that inserted while the lock was free keeps it shared until it ends: the lock cannot be
    // taken back before, and then a claim woken by the take could miss its row. The take waits for it (lockWaitMs),
    // and gives up while it stays open.
    const app = await pool.connect();
    let open = false;
    try {
      await app.query('BEGIN');
      open = true;
      await app.query(
        `INSERT INTO "${schema.name}".outbox (topic, payload, max_attempts) VALUES ('aside', '{}', 3)`,
      );
      expect(await capture.want?.('outbox', true)).toBe(false);
      expect(await grantedToCapture()).toBe(1);
      expect(counter.outbox).toBe(0);
      await app.query('COMMIT');
      open = false;
    } finally {
      if (open) await app.query('ROLLBACK').catch(() => undefined);
      app.release();
    }
    // Taken on a later try once it committed, which wakes the drains (that row notified nobody).
    await counter.waitFor('outbox', 1);
    expect(await lockHeld(OUTBOX_CHANNEL)).toBe(true);
    expect(await capture.want?.('outbox', true)).toBe(true);
    counter.reset();
    await insertOutbox(1);
    await counter.waitFor('outbox', 1);
  });

  it('takes a lock once when asked twice while the first take is on its way (one give-back frees it)', async () => {
    class SlowTakeClient extends pg.Client {
      // biome-ignore lint/suspicious/noExplicitAny: pg's query overloads
      override query(config: any, values?: any, callback?: any): any {
        if (typeof config === 'string' && config.includes('pg_advisory_lock(')) {
          return new Promise((resolve) => setTimeout(resolve, 150)).then(() =>
            super.query(config, values, callback),
          );
        }
        return super.query(config, values, callback);
      }
    }
    const counter = aWakeCounter();
    const { capture } = await listening(counter, { createClient: (url) => new SlowTakeClient(url) });
    await capture.want?.('outbox', false);
    expect(await lockHeld(OUTBOX_CHANNEL)).toBe(false);

    const answers = await Promise.all([capture.want?.('outbox', true), capture.want?.('outbox', true)]);
    expect(answers).toContain(true);
    expect(await lockHeld(OUTBOX_CHANNEL)).toBe(true);
    await capture.want?.('outbox', false);
    expect(await lockHeld(OUTBOX_CHANNEL)).toBe(false);
  });

  it('takes the outbox lock under a steady load of overlapping transactions that enqueue (migration 0012 holds it shared)', async () => {
    // Prepare: four connections, each BEGIN; INSERT; 30 ms of other work; COMMIT, about 125 a second in all: at any
    // moment some transaction holds the lock shared, so a try of the exclusive lock found no gap (an outside review).
    let loading = true;
    const load = Promise.all(
      [0, 1, 2, 3].map(async () => {
        // Clients of their own: the test's pool (3) stays free for its checks.
        const client = new pg.Client(needs.url.postgres);
        await client.connect();
        try {
          while (loading) {
            await client.query('BEGIN');
            await client.query(
              `INSERT INTO "${schema.name}".outbox (topic, payload, max_attempts) VALUES ('steady', '{}', 3)`,
            );
            await new Promise((resolve) => setTimeout(resolve, 30));
            await client.query('COMMIT');
          }
        } finally {
          await client.end();
        }
      }),
    );
    try {
      await new Promise((resolve) => setTimeout(resolve, 200));
      // Act
      const counter = aWakeCounter();
      const capture = createPostgresCapture({
        url: needs.url.postgres,
        schema: schema.name,
        onOutbox: counter.onOutbox,
      });
      captures.push(capture);
      expect(await capture.start()).toBe(true);
      // Assess: the lock is taken, and the inserts notify: many wake-ups within a second or two, not none.
      await counter.waitFor('outbox', 50, 5_000);
      expect(await lockHeld(OUTBOX_CHANNEL)).toBe(true);
    } finally {
      loading = false;
      await load;
    }
  });

  it('stays aside across a reconnect: a new connection takes only the locks still wanted', async () => {
    const counter = aWakeCounter();
    const listened: number[] = [];
    const { capture, applicationName } = await listening(counter, {
      onListening: ({ backendPid }) => listened.push(backendPid),
    });
    await capture.want?.('outbox', false);
    expect(await backendsSettleAt(applicationName, 1)).toBe(1);
    await pool.query('SELECT pg_terminate_backend($1)', [listened[0]]);
    for (let tries = 0; tries < 100 && listened.length < 2; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(listened).toHaveLength(2);

    expect(await lockHeld(OUTBOX_CHANNEL)).toBe(false);
    expect(await lockHeld(INBOX_CHANNEL)).toBe(true);
  });

  it('reports a failed lock statement as during "lock", keeps listening, and takes the lock on a later try', async () => {
    // Prepare: the listener's first two tries of the lock statement fail.
    let failures = 2;
    const errors: string[] = [];
    class FailingLockClient extends pg.Client {
      // biome-ignore lint/suspicious/noExplicitAny: pg's query overloads
      override query(config: any, values?: any, callback?: any): any {
        if (typeof config === 'string' && config.includes('pg_advisory_lock(') && failures > 0) {
          failures -= 1;
          return Promise.reject(new Error('lock statement refused'));
        }
        return super.query(config, values, callback);
      }
    }
    const counter = aWakeCounter();
    // Act
    const { capture } = await listening(counter, {
      lockRetryMs: 50,
      onError: (_error, { during }) => errors.push(during),
      createClient: (url) => new FailingLockClient(url),
    });
    // Assess: listening all along, the failures reported as lock failures, and the lock taken in the end.
    expect(capture.listening).toBe(true);
    for (let tries = 0; tries < 40 && !(await lockHeld(INBOX_CHANNEL)); tries++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(errors).toEqual(['lock', 'lock']);
    expect(await lockHeld(OUTBOX_CHANNEL)).toBe(true);
    expect(await lockHeld(INBOX_CHANNEL)).toBe(true);
    expect(capture.listening).toBe(true);
  });

  it("keeps its connection under a DBA's idle_session_timeout shorter than its checks", async () => {
    // Prepare: every session of this URL ends after 300 ms idle unless it says otherwise.
    const url = new URL(needs.url.postgres);
    url.searchParams.set('options', '-c idle_session_timeout=300');
    const counter = aWakeCounter();
    const errors: string[] = [];
    const { capture } = await listening(counter, {
      url: url.toString(),
      onError: (_error, { during }) => errors.push(during),
      createClient: (u) => new pg.Client(u),
    });
    // Act
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await insertOutbox(1);
    await counter.waitFor('outbox', 1);
    // Assess: never lost, so never woken by a reconnect.
    expect(errors).toEqual([]);
    expect(capture.listening).toBe(true);
  });

  it('closes its connection on close()', async () => {
    const counter = aWakeCounter();
    const { capture, applicationName } = await listening(counter);

    await capture.close();

    expect(await backendsSettleAt(applicationName, 0)).toBe(0);
    expect(capture.listening).toBe(false);
  });
});
