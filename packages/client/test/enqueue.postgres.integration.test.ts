/**
 * enqueue / enqueueMany / notifyOutbox on a real PostgreSQL, inside transactions of pg clients that stand for
 * the application's.
 */
import { randomUUID } from 'node:crypto';
import { ConfigError, MessageState, StoreError } from '@queuebox/core';
import { useTestStore } from '@queuebox/testing';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { enqueue, enqueueMany, notifyOutbox } from '../src/enqueue.ts';
import { InvalidMessageError, TransactionRequiredError } from '../src/errors.ts';
import { OUTBOX_CHANNEL } from '../src/lock-names.ts';
import type { EnqueueMessage } from '../src/message.ts';

const db = useTestStore('client_enqueue', { poolSize: 4, storePoolSize: 2 });
const options = () => ({ schema: db.schema });
const aTopic = () => `orders.created.${randomUUID().slice(0, 8)}`;

/** Runs `fn` inside BEGIN … COMMIT (or ROLLBACK when `rollback`) on a pool client, like an application would. */
async function inTransaction<T>(fn: (client: pg.PoolClient) => Promise<T>, rollback = false): Promise<T> {
  const client = await db.pool.connect();
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query(rollback ? 'ROLLBACK' : 'COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

describe('enqueue on pg', () => {
  it('writes a pending row with the given fields, visible once the transaction commits', async () => {
    // Prepare
    const topic = aTopic();
    const client = await db.pool.connect();
    let id: string;
    try {
      await client.query('BEGIN');
      // Act
      id = await enqueue(
        client,
        {
          topic,
          key: 'order-1',
          payload: { order: 1, lines: [{ sku: 'a', qty: 2 }], note: null },
          headers: { 'x-tenant': 't1' },
          maxAttempts: 3,
          delayMs: 1500,
        },
        options(),
      );
      // Assess: nothing is visible outside the open transaction
      expect(await db.outboxRows(topic)).toEqual([]);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect(id).toMatch(/^\d+$/);
    expect(await db.outboxRows(topic)).toEqual([
      {
        id,
        topic,
        key: 'order-1',
        payload: { order: 1, lines: [{ sku: 'a', qty: 2 }], note: null },
        headers: { 'x-tenant': 't1' },
        state: 'pending',
        attempt: 0,
        max_attempts: 3,
        delay_ms: 1500,
      },
    ]);
    const row = await db.store.outbox.get(id);
    expect(row?.state).toBe(MessageState.Pending);
    expect(row?.claimToken).toBeNull();
  });

  it('applies the defaults: no key, headers {}, max attempts 10 (or options.maxAttempts), no delay', async () => {
    const topic = aTopic();
    const [plain, fromOptions, ownWins] = await inTransaction(async (client) => [
      await enqueue(client, { topic, payload: 'just a string' }, options()),
      await enqueue(client, { topic, payload: 42 }, { ...options(), maxAttempts: 4 }),
      await enqueue(client, { topic, payload: [], maxAttempts: 2 }, { ...options(), maxAttempts: 4 }),
    ]);
    const rows = await db.outboxRows(topic);
    expect(rows.map((r) => [r.id, r.key, r.payload, r.headers, r.max_attempts, r.delay_ms])).toEqual([
      [plain, null, 'just a string', {}, 10, 0],
      [fromOptions, null, 42, {}, 4, 0],
      [ownWins, null, [], {}, 2, 0],
    ]);
  });

  it('leaves no row when the transaction rolls back, together with the business write', async () => {
    // Prepare
    const topic = aTopic();
    await db.pool.query(`CREATE TABLE IF NOT EXISTS "${db.schema}".orders (id text PRIMARY KEY)`);
    const orderId = randomUUID();
    // Act
    await inTransaction(async (client) => {
      await client.query(`INSERT INTO "${db.schema}".orders (id) VALUES ($1)`, [orderId]);
      await enqueue(client, { topic, key: orderId, payload: { orderId } }, options());
    }, true);
    // Assess
    expect(await db.outboxRows(topic)).toEqual([]);
    const { rows } = await db.pool.query(`SELECT 1 FROM "${db.schema}".orders WHERE id = $1`, [orderId]);
    expect(rows).toEqual([]);
  });

  it('works on a plain pg.Client in BEGIN … COMMIT', async () => {
    const topic = aTopic();
    const client = await db.connect();
    await client.query('BEGIN');
    const id = await enqueue(client, { topic, payload: { ok: true } }, options());
    await client.query('COMMIT');
    expect((await db.outboxRows(topic)).map((r) => r.id)).toEqual([id]);
  });

  it('enqueueMany writes the rows in the order given and answers their ids in that order', async () => {
    const topic = aTopic();
    const ids = await inTransaction((client) =>
      enqueueMany(
        client,
        [
          { topic, key: 'b', payload: 1 },
          { topic, payload: 2 },
          { topic, key: 'a', payload: 3 },
          { topic, key: 'b', payload: 4 },
        ],
        options(),
      ),
    );
    const rows = await db.outboxRows(topic);
    expect(rows.map((r) => [r.id, r.key, r.payload])).toEqual([
      [ids[0], 'b', 1],
      [ids[1], null, 2],
      [ids[2], 'a', 3],
      [ids[3], 'b', 4],
    ]);
    expect(await inTransaction((client) => enqueueMany(client, [], options()))).toEqual([]);
  });

  it('refuses a pg.Pool: the write would not be atomic with the business write', async () => {
    const topic = aTopic();
    await expect(enqueue(db.pool as never, { topic, payload: 1 }, options())).rejects.toThrow(
      TransactionRequiredError,
    );
    await expect(enqueue(db.pool as never, { topic, payload: 1 }, options())).rejects.toThrow(/pg Pool/);
    expect(await db.outboxRows(topic)).toEqual([]);
  });

  it('refuses a client outside a transaction, and one whose transaction failed', async () => {
    const topic = aTopic();
    const client = await db.connect();
    await expect(enqueue(client, { topic, payload: 1 }, options())).rejects.toThrow(
      /not inside a transaction/,
    );
    await client.query('BEGIN');
    await expect(client.query('SELECT 1/0')).rejects.toThrow();
    // pg rejects a failed query before the server's "transaction failed" status arrives; the next query waits
    // for it. (Without that status, enqueue's first statement fails with SQLSTATE 25P02 as a StoreError.)
    await expect(client.query('SELECT 1')).rejects.toThrow(/aborted/);
    await expect(enqueue(client, { topic, payload: 1 }, options())).rejects.toThrow(/failed earlier/);
    await client.query('ROLLBACK');
    expect(await db.outboxRows(topic)).toEqual([]);
  });

  it('refuses an invalid message before sending any statement: the transaction stays usable', async () => {
    const topic = aTopic();
    const ids = await inTransaction(async (client) => {
      const error = await enqueue(
        client,
        { topic: '', key: 'k'.repeat(451), payload: { n: Number.NaN }, headers: { a: 1 as never } },
        options(),
      ).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidMessageError);
      expect((error as InvalidMessageError).issues.map((i) => i.path)).toEqual([
        'topic',
        'key',
        'payload.n',
        'headers.a',
      ]);
      // A statement that failed would have aborted the transaction (status 'E') and this would be refused.
      return [await enqueue(client, { topic, payload: 'after' }, options())];
    });
    expect((await db.outboxRows(topic)).map((r) => r.id)).toEqual(ids);
  });

  it('refuses a deeply nested payload, a throwing getter and unsendable header names as InvalidMessageError, the transaction untouched', async () => {
    const topic = aTopic();
    let deep: unknown = 1;
    for (let i = 0; i < 3_000; i += 1) deep = [deep];
    const getter = Object.defineProperty({}, 'boom', {
      enumerable: true,
      get() {
        throw new Error('getter boom');
      },
    });
    const refused: EnqueueMessage[] = [
      { topic, payload: deep },
      { topic, payload: getter },
      { topic, payload: 1, headers: { '': 'v' } },
      { topic, payload: 1, headers: { 'x-a\r\nInjected': 'v' } },
      { topic, payload: 1, headers: { 'x-a': 'v\r\nInjected: 1' } },
    ];
    const ids = await inTransaction(async (client) => {
      for (const message of refused) {
        const error = await enqueue(client, message, options()).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(InvalidMessageError);
      }
      // Nothing reached the database: the transaction is still open and not aborted.
      expect(client.getTransactionStatus?.()).toBe('T');
      return [await enqueue(client, { topic, payload: 'after' }, options())];
    });
    expect((await db.outboxRows(topic)).map((r) => r.id)).toEqual(ids);
  });

  it('refuses an invalid schema name with a ConfigError, and translates driver errors into StoreError', async () => {
    await inTransaction(async (client) => {
      await expect(enqueue(client, { topic: 't', payload: 1 }, { schema: 'no-such"schema' })).rejects.toThrow(
        ConfigError,
      );
    });
    const error = await inTransaction((client) =>
      enqueue(client, { topic: 't', payload: 1 }, { schema: 'qb_client_never_migrated' }),
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as StoreError).context.sqlState).toBe('42P01');
  });
});

describe('notifyOutbox', () => {
  it('notifies queuebox_outbox with the schema on commit, and not at all on rollback', async () => {
    // Prepare
    const listener = await db.connect();
    const received: string[] = [];
    let marker: () => void = () => {};
    const markerSeen = new Promise<void>((resolve) => {
      marker = resolve;
    });
    listener.on('notification', (n) => {
      if (n.channel !== OUTBOX_CHANNEL) return;
      if (n.payload === `marker:${db.schema}`) marker();
      else if (n.payload === db.schema) received.push(n.payload);
    });
    await listener.query(`LISTEN ${OUTBOX_CHANNEL}`);
    const topic = aTopic();
    // Act
    await inTransaction(async (client) => {
      await enqueue(client, { topic, payload: 'rolled back' }, options());
      await notifyOutbox(client, options());
    }, true);
    await inTransaction(async (client) => {
      await enqueue(client, { topic, payload: 'committed' }, options());
      await notifyOutbox(client, options());
      await notifyOutbox(client, options());
    });
    // Notifications arrive in commit order: once the marker is in, anything of the two transactions is too.
    await db.pool.query('SELECT pg_notify($1, $2)', [OUTBOX_CHANNEL, `marker:${db.schema}`]);
    await markerSeen;
    // Assess: one notification of this schema (the committed transaction's two are folded into one)
    expect(received).toEqual([db.schema]);
  });
});
