/**
 * The bounds of the inbox group commit (`inbox-batch.ts`) on the real PostgreSQL, with inserts blocked by a lock on
 * the inbox table held from a second connection (overload audit: webhooks queued without limit and were answered
 * after 44 s at the median, 60 s at most). Each store is answered within `inboxMaxWaitMs`; a store still queued at
 * its deadline is never written, one already in a running statement may still commit (its retry is a duplicate);
 * past `inboxMaxQueued` waiting stores one more fails at once and is never written.
 */
import { type NewInboxMessage, type Store, StoreUnavailableError } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName, requireServices } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresStore } from '../src/index.ts';
import { anInboxMessage } from './messages.ts';

const needs = await requireServices('store-postgres: inbox queue bounds', ['postgres']);

/** What a store call came to, and when (ms after the calls began). */
type Outcome = { ok: true; status: string; ms: number } | { ok: false; error: unknown; ms: number };

const TIMED_OUT = Symbol('timed out');

function within<T>(work: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(() => resolve(TIMED_OUT), ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

function storeAll(store: Store, messages: readonly NewInboxMessage[]): Promise<Outcome>[] {
  const started = performance.now();
  return messages.map((message) =>
    store.inbox.store(message).then(
      (result): Outcome => ({ ok: true, status: result.status, ms: performance.now() - started }),
      (error: unknown): Outcome => ({ ok: false, error, ms: performance.now() - started }),
    ),
  );
}

function contextOf(outcome: Outcome): Readonly<Record<string, unknown>> {
  return !outcome.ok && outcome.error instanceof StoreUnavailableError ? outcome.error.context : {};
}

describe.skipIf(needs.skipReason)('inbox group commit bounds while inserts are blocked', () => {
  const url = needs.url.postgres;
  const schema = freshSchemaName('inbox_bounds');
  // Dropped after a passing file, kept for inspection after a failing one.
  dropSchemasAfterPass(() => [schema], url);
  const admin = new pg.Client(url);
  let locker: pg.Client | undefined;
  const stores: Store[] = [];

  beforeAll(async () => {
    await admin.connect();
    const store = await openPostgresStore({ url, schema });
    try {
      await store.migrate();
    } finally {
      await store.close();
    }
  });
  afterEach(async () => {
    await locker?.query('ROLLBACK').catch(() => undefined);
    await locker?.end().catch(() => undefined);
    locker = undefined;
    for (const store of stores.splice(0)) await store.close();
  });
  afterAll(async () => {
    await admin.end();
  });

  /** Inserts into the inbox block (SHARE conflicts with ROW EXCLUSIVE) until `release`. */
  async function blockInserts(): Promise<{ release: () => Promise<void> }> {
    const client = new pg.Client(url);
    await client.connect();
    locker = client;
    await client.query('BEGIN');
    await client.query(`LOCK TABLE "${schema}".inbox IN SHARE MODE`);
    return { release: () => client.query('COMMIT').then(() => undefined) };
  }

  async function rowsOf(keys: readonly string[]): Promise<number> {
    const { rows } = await admin.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${schema}".inbox WHERE idempotency_key = ANY($1::text[])`,
      [keys],
    );
    return rows[0]?.n ?? -1;
  }

  it('answers every store within inboxMaxWaitMs; a store timed out in the queue is never written', async () => {
    // Prepare
    const maxWaitMs = 1000;
    const store = await openPostgresStore({ url, schema, poolSize: 4, inboxMaxWaitMs: maxWaitMs });
    stores.push(store);
    await store.ping();
    const lock = await blockInserts();
    const messages = Array.from({ length: 300 }, (_, n) =>
      anInboxMessage({ source: 'bounds', payload: { n } }),
    );

    // Act
    const calls = storeAll(store, messages);
    const answered = await within(Promise.all(calls), maxWaitMs + 5000);

    // Assess: before, every call waited for its statement's timeout (30 s), queued ones for one more.
    expect(answered).not.toBe(TIMED_OUT);
    const outcomes = answered as Outcome[];
    expect(outcomes.every((o) => !o.ok && o.error instanceof StoreUnavailableError)).toBe(true);
    expect(Math.max(...outcomes.map((o) => o.ms))).toBeLessThan(maxWaitMs + 5000);
    const keysWhere = (queued: boolean) =>
      messages
        .filter((_, i) => contextOf(outcomes[i] as Outcome).queued === queued)
        .map((m) => m.idempotencyKey);
    const queued = keysWhere(true);
    const sent = keysWhere(false);
    expect(queued.length).toBeGreaterThan(0);
    expect(sent.length).toBeGreaterThan(0);
    expect(queued.length + sent.length).toBe(messages.length);

    // The lock goes; a later store waits for the running statements (both slots), so once it is answered they ended.
    await lock.release();
    expect((await store.inbox.store(anInboxMessage({ source: 'bounds' }))).status).toBe('stored');
    // Queued at their deadline: taken out of the queue, never written.
    expect(await rowsOf(queued)).toBe(0);
    // Already sent: their statement committed after the 503, so the senders' retries are duplicates.
    expect(await rowsOf(sent)).toBe(sent.length);
    const retryOf = (key: string) => messages.find((m) => m.idempotencyKey === key) as NewInboxMessage;
    expect((await store.inbox.store(retryOf(sent[0] as string))).status).toBe('duplicate');
    expect((await store.inbox.store(retryOf(queued[0] as string))).status).toBe('stored');
  }, 60_000);

  it('never writes a store that was still queued at its deadline, even when a statement takes the queue before the sweep answers it', async () => {
    // Prepare: maxWaitMs 4 s, so the sweep runs every second; the first store's statement blocks, the others queue
    // behind it (one statement at a time until 16 wait). The lock goes about 0.5 s after their deadline and before
    // the next sweep: the statement that then took the queue wrote them and answered them stored, up to a sweep late
    // (review of 18da0bb).
    const maxWaitMs = 4000;
    const store = await openPostgresStore({ url, schema, poolSize: 4, inboxMaxWaitMs: maxWaitMs });
    stores.push(store);
    await store.ping();
    const lock = await blockInserts();
    const first = anInboxMessage({ source: 'late' });
    const firstCall = store.inbox.store(first).catch((error: unknown) => error);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const queuedMessages = Array.from({ length: 3 }, (_, n) =>
      anInboxMessage({ source: 'late', payload: { n } }),
    );
    const queuedAt = Date.now();
    const calls = storeAll(store, queuedMessages);

    // Act: the lock goes between their deadline and the next sweep
    await new Promise((resolve) => setTimeout(resolve, queuedAt + maxWaitMs + 450 - Date.now()));
    await lock.release();
    const outcomes = await Promise.all(calls);
    await firstCall;

    // Assess: answered 503 as queued, and never written
    for (const outcome of outcomes) {
      expect(outcome.ok).toBe(false);
      expect(contextOf(outcome).queued).toBe(true);
    }
    expect(await rowsOf(queuedMessages.map((m) => m.idempotencyKey))).toBe(0);
  }, 30_000);

  it('refuses a store at once when inboxMaxQueued stores already wait, and never writes it', async () => {
    // Prepare: a deadline far away, so that only the cap answers early.
    const store = await openPostgresStore({
      url,
      schema,
      poolSize: 4,
      inboxMaxQueued: 50,
      inboxMaxWaitMs: 120_000,
    });
    stores.push(store);
    await store.ping();
    const lock = await blockInserts();
    const messages = Array.from({ length: 300 }, (_, n) => anInboxMessage({ source: 'cap', payload: { n } }));

    // Act: 300 calls in one turn: 50 wait, the others find the queue full.
    const calls = storeAll(store, messages);
    const firstAnswers = await within(Promise.all(calls.slice(50)), 5000);

    // Assess: before, no call was answered while the lock held.
    expect(firstAnswers).not.toBe(TIMED_OUT);
    const refused = firstAnswers as Outcome[];
    expect(refused.every((o) => !o.ok && contextOf(o).queueFull === true)).toBe(true);
    expect(await within(Promise.race(calls.slice(0, 50)), 500)).toBe(TIMED_OUT);

    await lock.release();
    const waited = await Promise.all(calls.slice(0, 50));
    expect(waited.every((o) => o.ok && o.status === 'stored')).toBe(true);
    expect(await rowsOf(messages.slice(0, 50).map((m) => m.idempotencyKey))).toBe(50);
    expect(await rowsOf(messages.slice(50).map((m) => m.idempotencyKey))).toBe(0);
  }, 60_000);
});
