/**
 * A search_path that puts a schema with planted look-alikes of the built-ins before pg_catalog's matches (an outside
 * audit): PostgreSQL resolves an unqualified function through the session's search_path and takes a function of
 * another schema whose argument types fit better than the built-in's. Whoever can create in such a schema (`public`
 * on PostgreSQL 14 and databases upgraded from it) then ran code as QueueBox's or the application's role, put every
 * outbox key on one advisory lock, and swallowed the wake-up notifications. Here the store, the migrator and
 * @queuebox/client's enqueue run on sessions whose search_path starts with such a schema (`options=-c search_path`
 * in the connection URL), on a real PostgreSQL; each planted function writes a row into a log table when called.
 * Each test fails without the schema-qualified calls (`pg_catalog.…`, `0::bigint`) and migration 0010.
 */
import { randomBytes } from 'node:crypto';
import { enqueue } from '@queuebox/client';
import type { RowId, Store } from '@queuebox/core';
import { testPool, testPostgresUrl } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createPgExecutor, createPostgresStore } from '../src/index.ts';
import { wakeUpLockName } from '../src/wake-up-channels.ts';
import { anInboxMessage, anOutboxMessage } from './messages.ts';

const suffix = randomBytes(4).toString('hex');
const schema = `spfix_qb_${suffix}`;
const shadow = `spfix_shadow_${suffix}`;
const LEASE = { leaseMs: 60_000 };

/** The test database's URL with `settings` as the session's startup options (`-c name=value` each). */
function urlWith(settings: Record<string, string>): string {
  const url = new URL(testPostgresUrl());
  url.searchParams.set(
    'options',
    Object.entries(settings)
      .map(([name, value]) => `-c ${name}=${value}`)
      .join(' '),
  );
  return url.toString();
}

/** The shadowing schema first, then public: the session of an application whose role's search_path has it. */
const shadowedUrl = urlWith({ search_path: `${shadow},public` });
/** The same, and no lock wait longer than 2 s: a wait on another key's lock fails (55P03) instead of hanging. */
const shadowedBoundedUrl = urlWith({ search_path: `${shadow},public`, lock_timeout: '2000' });

/** Look-alikes that match the store's former unqualified calls better than pg_catalog's; each logs its call. */
const PLANTED = [
  `CREATE TABLE ${shadow}.log (fn text NOT NULL, at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp())`,
  // hashtextextended(k.name, 0): the 0 is an integer, the built-in takes (text, bigint). Every key on one lock.
  `CREATE FUNCTION ${shadow}.hashtextextended(t text, s integer) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN INSERT INTO ${shadow}.log (fn) VALUES ('hashtextextended'); RETURN 42; END $$`,
  // unnest($1::text[]): the built-in is unnest(anyarray); text[] matches this one exactly.
  `CREATE FUNCTION ${shadow}.unnest(a text[]) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN INSERT INTO ${shadow}.log (fn) VALUES ('unnest'); RETURN QUERY SELECT pg_catalog.unnest(a); END $$`,
  // pg_column_size(payload): the built-in takes "any"; jsonb matches this one exactly.
  `CREATE FUNCTION ${shadow}.pg_column_size(j jsonb) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN INSERT INTO ${shadow}.log (fn) VALUES ('pg_column_size'); RETURN pg_catalog.pg_column_size(j); END $$`,
  // pg_notify(TG_ARGV[0], TG_TABLE_SCHEMA) in the trigger: TG_TABLE_SCHEMA is a name, the built-in takes text.
  `CREATE FUNCTION ${shadow}.pg_notify(c text, p name) RETURNS void LANGUAGE plpgsql AS $$
BEGIN INSERT INTO ${shadow}.log (fn) VALUES ('pg_notify'); END $$`,
];

describe('built-ins shadowed on the search_path (PostgreSQL)', () => {
  const admin = testPool(2);
  let store: Store;
  const clients: pg.Client[] = [];

  async function connect(url = shadowedUrl): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    clients.push(client);
    return client;
  }

  /** The planted functions called so far, by name. */
  async function plantedCalls(): Promise<string[]> {
    const { rows } = await admin.query<{ fn: string }>(`SELECT fn FROM ${shadow}.log ORDER BY at`);
    return rows.map((r) => r.fn);
  }

  beforeAll(async () => {
    await admin.query(`CREATE SCHEMA ${shadow}`);
    for (const statement of PLANTED) await admin.query(statement);
    // The store and its migrator on the shadowed search_path too: the migrator's lock hashes with hashtextextended.
    store = createPostgresStore({ executor: createPgExecutor(testPool(4, shadowedBoundedUrl)), schema });
    await store.migrate();
  });

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.end().catch(() => {})));
  });

  afterAll(async () => {
    await store?.close();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.query(`DROP SCHEMA IF EXISTS ${shadow} CASCADE`);
    await admin.end();
  });

  it('sees the shadowing schema first on these sessions (the set-up works)', async () => {
    const client = await connect();
    // Rolled back: the planted function's log row goes with it.
    await client.query('BEGIN');
    const { rows } = await client.query<{ path: string; h: string }>(
      `SELECT pg_catalog.current_setting('search_path') AS path, hashtextextended('x', 0)::text AS h`,
    );
    await client.query('ROLLBACK');

    expect(rows[0]?.path).toBe(`${shadow},public`);
    // The unqualified call picks the planted function (it answers 42 for everything).
    expect(rows[0]?.h).toBe('42');
  });

  it('migrates without calling a planted function, and 0010 pins the trigger function to pg_catalog, pg_temp', async () => {
    const { rows } = await admin.query<{ config: string[] | null }>(
      `SELECT p.proconfig AS config FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
       WHERE n.nspname = $1 AND p.proname = 'queuebox_notify_insert'`,
      [schema],
    );

    expect(rows[0]?.config).toEqual(['search_path=pg_catalog, pg_temp']);
    expect(await plantedCalls()).toEqual([]);
  });

  it('enqueues of two different keys, through @queuebox/client and through the store, do not wait on one lock', async () => {
    const first = await connect();
    const second = await connect();
    await first.query('BEGIN');
    await enqueue(first, { topic: 't', key: 'order-1', payload: { n: 1 } }, { schema });

    // Another key, in another application transaction, while the first holds its key lock.
    await second.query('BEGIN');
    await second.query(`SET LOCAL lock_timeout = '2s'`);
    const other = await enqueue(second, { topic: 't', key: 'order-2', payload: { n: 2 } }, { schema }).then(
      (id) => id,
      (error: Error) => error,
    );
    // And the store's own insert of a third key (its sessions have lock_timeout 2 s).
    const stored = await store.outbox.insert([anOutboxMessage({ key: 'order-3' })]).then(
      (ids) => ids,
      (error: Error) => error,
    );
    await second.query(other instanceof Error ? 'ROLLBACK' : 'COMMIT');

    // The same key still waits for the first writer: the lock is real, not skipped.
    const third = await connect();
    await third.query('BEGIN');
    await third.query(`SET LOCAL lock_timeout = '300ms'`);
    const sameKey = await enqueue(third, { topic: 't', key: 'order-1', payload: { n: 3 } }, { schema }).then(
      () => undefined,
      (error: Error) => error,
    );
    await third.query('ROLLBACK');
    await first.query('COMMIT');

    expect(other).not.toBeInstanceOf(Error);
    expect(stored).not.toBeInstanceOf(Error);
    expect(sameKey?.message).toMatch(/lock timeout/);
    expect(await plantedCalls()).toEqual([]);
  });

  it('wakes a listener with the schema as payload on an enqueue and on a store insert (the trigger)', async () => {
    const listener = await connect(testPostgresUrl());
    const payloads: string[] = [];
    listener.on('notification', (n) => {
      if (n.channel === 'queuebox_outbox' || n.channel === 'queuebox_inbox')
        payloads.push(`${n.channel}:${n.payload}`);
    });
    await listener.query('LISTEN queuebox_outbox; LISTEN queuebox_inbox');
    // The triggers notify while a listener holds the channels' wake-up locks (migration 0011), as the runtime's does.
    for (const channel of ['queuebox_outbox', 'queuebox_inbox']) {
      await listener.query('SELECT pg_catalog.pg_advisory_lock(pg_catalog.hashtextextended($1, 0))', [
        wakeUpLockName(schema, channel),
      ]);
    }
    const app = await connect();

    await app.query('BEGIN');
    await enqueue(app, { topic: 't', key: null, payload: { n: 1 } }, { schema });
    await app.query('COMMIT');
    await store.inbox.store(anInboxMessage({ source: 'wake' }));
    const deadline = Date.now() + 3_000;
    while (payloads.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));

    expect(payloads.sort()).toEqual([`queuebox_inbox:${schema}`, `queuebox_outbox:${schema}`]);
    expect(await plantedCalls()).toEqual([]);
  });

  it('claims, settles, stores, forwards and requeues without calling a planted function', async () => {
    // Outbox: keyed and unkeyed rows, a claim that measures payloads (pg_column_size), every settle.
    const ids = await store.outbox.insert([
      anOutboxMessage({ key: 'k-a', topic: 'flow' }),
      anOutboxMessage({ key: 'k-b', topic: 'flow' }),
      anOutboxMessage({ key: null, topic: 'flow' }),
      anOutboxMessage({ key: null, topic: 'flow' }),
    ]);
    const claimOptions = { batchSize: 100, ...LEASE, deferPayloadsOverBytes: 64 * 1024 };
    const claimed = (await store.outbox.claim(claimOptions)).filter((r) => ids.includes(r.id));
    expect(claimed.map((r) => r.id).sort()).toEqual([...ids].sort());
    const byId = new Map(claimed.map((r) => [r.id, r]));
    const claimOf = (id: RowId | undefined) => ({
      id: id ?? '',
      claimToken: byId.get(id ?? '')?.claimToken ?? '',
    });
    const [a, b, c, d] = ids;

    expect((await store.outbox.markSent([{ ...claimOf(a), destination: 'x' }])).settled).toHaveLength(1);
    expect(
      (await store.outbox.retry([{ ...claimOf(c), error: 'HTTP 503', delayMs: 0 }])).settled,
    ).toHaveLength(1);
    expect(
      (await store.outbox.markDead([{ ...claimOf(b), reason: 'HTTP 410', attempted: true }])).settled,
    ).toHaveLength(1);
    expect((await store.outbox.release([claimOf(d)])).settled).toHaveLength(1);

    // Admin: the dead keyed row requeued (the key's try-lock), then claimed again.
    const requeued = await store.admin.requeue('outbox', { ids: [b ?? ''] });
    expect(requeued.count).toBe(1);
    const again = (await store.outbox.claim(claimOptions)).map((r) => r.id);
    expect(again).toEqual(expect.arrayContaining([b, c, d]));

    // Inbox: stored together (group commit), a repeat, a relay claim and its forward into the outbox.
    const messages = [
      anInboxMessage({ source: 'flow', aggregateId: 'agg-1' }),
      anInboxMessage({ source: 'flow', aggregateId: 'agg-2' }),
    ];
    const results = await Promise.all(messages.map((m) => store.inbox.store(m)));
    const repeat = await store.inbox.store(messages[0] ?? anInboxMessage());
    expect(results.map((r) => r.status)).toEqual(['stored', 'stored']);
    expect(repeat).toEqual({ status: 'duplicate', id: results[0]?.id });
    const relayed = await store.inbox.claimForRelay({ sources: ['flow'], batchSize: 10, ...LEASE });
    expect(relayed).toHaveLength(2);
    const forwarded = await store.inbox.forward(
      relayed.map((r) => ({
        id: r.id,
        claimToken: r.claimToken ?? '',
        outbox: { topic: 'relayed', key: r.aggregateId, headers: { 'x-inbox-id': r.id }, maxAttempts: 3 },
      })),
    );
    expect(forwarded.outboxIds).toHaveLength(2);
    expect((await store.outbox.reclaimExpired()).returned).toBe(0);
    expect((await store.inbox.reclaimExpired(['flow'])).returned).toBe(0);

    expect(await plantedCalls()).toEqual([]);
  });
});
