/**
 * A transform function whose result is not what a transform may answer (`headers: null`, headers that are a string):
 * that row is dead-lettered as a rejection, alone. Before, `headers: null` threw in the delivery step,
 * which failed the whole batch unsettled (and a string became one header per character): the rows of other keys that had been delivered stayed processing until
 * their lease expired and were then delivered again (a duplicate of each), and the drain failed, again at every
 * claim of the poison row until the reclaim step sent it dead.
 */
import { randomBytes } from 'node:crypto';
import type { NewOutboxMessage, RowId, Store } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import { testPool, testPostgresUrl } from '@queuebox/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createOutboxPoller } from '../src/poller.ts';
import { createPublishers, defaultPublisherFactories, type PublisherSet } from '../src/publishers.ts';
import { createTransformRegistry } from '../src/transforms.ts';
import { type HttpReceiver, startHttpReceiver } from './support/http-receiver.ts';

const schema = `t_transform_output_${randomBytes(4).toString('hex')}`;
const pool = testPool(2);
let store: Store;
let receiver: HttpReceiver;
const publisherSets: PublisherSet[] = [];

beforeAll(async () => {
  receiver = await startHttpReceiver();
  store = await openPostgresStore({ url: testPostgresUrl(), schema });
  await store.migrate();
});
afterEach(async () => {
  await Promise.all(publisherSets.splice(0).map((p) => p.close()));
  receiver.reset();
  await pool.query(`DELETE FROM "${schema}".outbox`);
});
afterAll(async () => {
  await store.close();
  await receiver.close();
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

const message = (over: Partial<NewOutboxMessage> = {}): NewOutboxMessage => ({
  topic: 'payments.captured',
  key: null,
  payload: {},
  headers: {},
  maxAttempts: 5,
  ...over,
});

/** A poller whose destination runs the transform function `shape`, which answers by the row's payload. */
function aPoller() {
  const destinations = {
    ledger: { type: 'http' as const, url: receiver.url, timeoutMs: 5000, transform: { function: 'shape' } },
  };
  const publishers = createPublishers(destinations, defaultPublisherFactories);
  publisherSets.push(publishers);
  const transforms = createTransformRegistry({
    shape: ({ payload }) => {
      const kind = (payload as { kind?: string }).kind;
      if (kind === 'null-headers') return { payload, headers: null as never };
      if (kind === 'text-headers') return { payload, headers: 'x-kind: ok' as never };
      return { payload, headers: { 'x-kind': String(kind) } };
    },
  });
  return createOutboxPoller({
    store: store.outbox,
    publishers,
    routes: [{ match: 'payments.#', destination: 'ledger' }],
    destinations,
    transforms,
    options: {
      batchSize: 10,
      claimTimeoutMs: 30_000,
      maxAttempts: 5,
      backoff: { baseMs: 100, maxMs: 10_000 },
      settleReserveMs: 200,
    },
  });
}

async function states(ids: readonly RowId[]) {
  const { rows } = await pool.query<{ state: string; attempt: number; last_error: string | null }>(
    `SELECT state, attempt, last_error FROM "${schema}".outbox WHERE id = ANY ($1::bigint[]) ORDER BY id`,
    [ids],
  );
  return rows;
}

describe('a transform function that answers what a transform may not', () => {
  it.each(['null-headers', 'text-headers'])(
    'dead-letters the row that answered %s alone; the rest of its batch is sent and settled once',
    async (kind) => {
      // Prepare: two good payments of other keys, claimed in one batch with the poison row.
      const ids = await store.outbox.insert([
        message({ key: 'acct-1', payload: { kind: 'ok' } }),
        message({ key: 'acct-2', payload: { kind } }),
        message({ key: 'acct-3', payload: { kind: 'ok' } }),
      ]);
      const poller = aPoller();

      // Act
      const report = await poller.drain({ deadline: Date.now() + 10_000 });

      // Assess: the good rows sent and settled (each received once), the poison row dead without a request.
      expect(report).toMatchObject({ claimed: 3, sent: 2, dead: 1, retried: 0 });
      const [first, poison, third] = await states(ids);
      expect(first).toMatchObject({ state: 'sent' });
      expect(third).toMatchObject({ state: 'sent' });
      expect(poison).toMatchObject({ state: 'dead', attempt: 0 });
      expect(poison?.last_error).toMatch(/function:shape/);
      expect(receiver.requests).toHaveLength(2);
      expect(receiver.requests.map((r) => r.headers['x-kind'])).toEqual(['ok', 'ok']);
      await poller.close();
    },
  );
});

describe('a batch one of whose groups fails', () => {
  it('settles the rows it delivered, and fails the drain', async () => {
    // Prepare: a publisher lookup (a program's own function) that throws for one destination; a payment of another
    // destination claimed in the same batch.
    const destinations = {
      ledger: { type: 'http' as const, url: receiver.url, timeoutMs: 5000 },
      broken: { type: 'http' as const, url: receiver.url, timeoutMs: 5000 },
    };
    const publishers = createPublishers(destinations, defaultPublisherFactories);
    publisherSets.push(publishers);
    const poller = createOutboxPoller({
      store: store.outbox,
      publishers: (name) => {
        if (name === 'broken') throw new Error('no publisher registry for broken');
        return publishers.get(name);
      },
      routes: [
        { match: 'payments.#', destination: 'ledger' },
        { match: 'audit.#', destination: 'broken' },
      ],
      destinations,
      options: {
        batchSize: 10,
        claimTimeoutMs: 30_000,
        maxAttempts: 5,
        backoff: { baseMs: 100, maxMs: 10_000 },
        settleReserveMs: 200,
      },
    });
    const [paid, audit] = (await store.outbox.insert([
      message({ key: 'acct-1' }),
      message({ topic: 'audit.logged', key: 'acct-2' }),
    ])) as [RowId, RowId];

    // Act
    const drained = poller.drain({ deadline: Date.now() + 10_000 });

    // Assess: the drain fails; the delivered payment is sent (settled once), the failed row left to its lease.
    await expect(drained).rejects.toThrow('no publisher registry for broken');
    expect(receiver.requests).toHaveLength(1);
    const [paidRow, auditRow] = await states([paid, audit]);
    expect(paidRow).toMatchObject({ state: 'sent', attempt: 0 });
    expect(auditRow).toMatchObject({ state: 'processing', attempt: 0 });
    await poller.close();
  });
});
