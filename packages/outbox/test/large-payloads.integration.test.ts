/**
 * Large payloads on real PostgreSQL: a claim used to answer every claimed row whole, so a backlog of large rows
 * was held `batchSize` at a time (60 rows of 1–10 MiB: 966 MB RSS, and a process with a 450 MB heap, a 512 MB
 * Lambda's, died of OOM with all 60 rows left processing, each crash counting an attempt on every row claimed
 * beside them). Now the claim leaves payloads over 64 KiB out, the poller reads each just before its delivery
 * within `largePayloadBudgetBytes`, and never reads one over `maxPayloadBytes`.
 */
import { randomBytes } from 'node:crypto';
import type {
  ClaimOptions,
  JsonValue,
  NewOutboxMessage,
  OutboxStore,
  Publisher,
  PublishOutcome,
  Store,
} from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import { testPool, testPostgresUrl } from '@queuebox/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createOutboxPoller, type OutboxPollerOptions } from '../src/poller.ts';

const schema = `t_large_payloads_${randomBytes(4).toString('hex')}`;
const pool = testPool(2);
let store: Store;

beforeAll(async () => {
  store = await openPostgresStore({ url: testPostgresUrl(), schema });
  await store.migrate();
});
afterEach(async () => {
  await pool.query(`DELETE FROM "${schema}".outbox`);
});
afterAll(async () => {
  await store.close();
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

/** A payload of about `bytes` bytes of JSON that PostgreSQL cannot compress (random hex). */
const payloadOf = (bytes: number, n: number): JsonValue => ({
  n,
  blob: randomBytes(Math.floor(bytes / 2)).toString('hex'),
});

const message = (payload: JsonValue, key: string | null = null): NewOutboxMessage => ({
  topic: 'orders.big',
  key,
  payload,
  headers: {},
  maxAttempts: 5,
});

/** A publisher that records every payload and how many large ones were being published at once. */
function recordingPublisher() {
  const received = new Map<string, JsonValue>();
  let largeNow = 0;
  let largeMost = 0;
  const publisher: Publisher = {
    async publish(message): Promise<PublishOutcome> {
      const large = JSON.stringify(message.payload).length > 64 * 1024;
      if (large) largeMost = Math.max(largeMost, ++largeNow);
      // Let every other delivery of the batch start meanwhile.
      for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
      if (large) largeNow--;
      received.set(String((message.payload as { n: number }).n), message.payload);
      return { kind: 'sent' };
    },
    async close() {},
  };
  return { publisher, received, largeMost: () => largeMost };
}

/** The outbox store, with the largest payload any claim answered recorded (what a claim holds in memory). */
function measuredClaims(outbox: OutboxStore) {
  let largestClaimed = 0;
  let claimedBytes = 0;
  const measured: OutboxStore = {
    ...outbox,
    async claim(options: ClaimOptions) {
      const rows = await outbox.claim(options);
      let bytes = 0;
      for (const row of rows) {
        const size = JSON.stringify(row.payload).length;
        largestClaimed = Math.max(largestClaimed, size);
        bytes += size;
      }
      claimedBytes = Math.max(claimedBytes, bytes);
      return rows;
    },
  };
  return { measured, largestClaimed: () => largestClaimed, claimedBytes: () => claimedBytes };
}

function aPoller(outbox: OutboxStore, publisher: Publisher, options: Partial<OutboxPollerOptions> = {}) {
  return createOutboxPoller({
    store: outbox,
    publishers: () => publisher,
    routes: [{ match: 'orders.#', destination: 'hooks' }],
    destinations: { hooks: { type: 'hooks' } },
    options: {
      batchSize: 200,
      claimTimeoutMs: 60_000,
      maxAttempts: 5,
      backoff: { baseMs: 1000, maxMs: 10_000 },
      ...options,
    },
  });
}

describe('large payloads', () => {
  it('claims hold no large payload; each is read before its delivery, within the byte budget, and arrives whole', async () => {
    const payloads = new Map<string, JsonValue>();
    const messages: NewOutboxMessage[] = [];
    for (let n = 0; n < 16; n++) {
      // Rows of 200 KiB and small ones, keyed and unkeyed.
      const payload = n % 4 === 3 ? { n, small: true } : payloadOf(200 * 1024, n);
      payloads.set(String(n), payload);
      messages.push(message(payload, n % 2 === 0 ? `k${n % 3}` : null));
    }
    await store.outbox.insert(messages);
    const { measured, largestClaimed, claimedBytes } = measuredClaims(store.outbox);
    const recording = recordingPublisher();
    // Room for one 200 KiB payload at a time.
    const poller = aPoller(measured, recording.publisher, { largePayloadBudgetBytes: 300 * 1024 });
    const report = await poller.drain({ deadline: Date.now() + 30_000 });
    await poller.close();

    expect(report.sent).toBe(16);
    expect(recording.received.size).toBe(16);
    for (const [n, payload] of payloads) expect(recording.received.get(n)).toEqual(payload);
    // No claim answered a payload over 64 KiB: before, every claimed row came whole (16 × 200 KiB in one claim).
    expect(largestClaimed()).toBeLessThanOrEqual(64 * 1024);
    expect(claimedBytes()).toBeLessThan(200 * 1024);
    // And the large payloads were read and published one at a time, the budget holding one of them.
    expect(recording.largeMost()).toBe(1);
    const { rows } = await pool.query(
      `SELECT state, count(*)::int AS n FROM "${schema}".outbox GROUP BY state`,
    );
    expect(rows).toEqual([{ state: 'sent', n: 16 }]);
  });

  it('a deferred row whose read fails is given back unattempted, and the drain goes on to send it', async () => {
    // Prepare: a key's large row, whose first read (store.get) fails as a connection that dropped would
    const [big] = await store.outbox.insert([message(payloadOf(100 * 1024, 1), 'k')]);
    const recording = recordingPublisher();
    let reads = 0;
    const flaky: OutboxStore = {
      ...store.outbox,
      async get(id) {
        reads += 1;
        if (reads === 1) throw new Error('Connection terminated unexpectedly');
        return store.outbox.get(id);
      },
    };
    const poller = aPoller(flaky, recording.publisher);
    // Act
    const first = await poller.drain({ deadline: Date.now() + 10_000 });
    await poller.close();
    // Assess: no failed drain; the row was given back without an attempt counted (not left processing for its
    // lease) and the same drain claimed it again and sent it
    expect(first).toMatchObject({ released: 1, sent: 1, retried: 0 });
    expect([...recording.received.keys()]).toEqual(['1']);
    const { rows } = await pool.query(`SELECT id::text, state, attempt FROM "${schema}".outbox`);
    expect(rows).toEqual([{ id: String(big), state: 'sent', attempt: 0 }]);
  });

  it('a payload over maxPayloadBytes is never read nor sent: its delivery fails with its size and the limit', async () => {
    const [big] = await store.outbox.insert([message(payloadOf(400 * 1024, 1))]);
    const [small] = await store.outbox.insert([message({ n: 2 })]);
    const recording = recordingPublisher();
    const poller = aPoller(store.outbox, recording.publisher, { maxPayloadBytes: 300 * 1024 });
    const report = await poller.drain({ deadline: Date.now() + 30_000 });
    await poller.close();

    expect(report).toMatchObject({ sent: 1, retried: 1, dead: 0 });
    expect([...recording.received.keys()]).toEqual(['2']);
    const { rows } = await pool.query(
      `SELECT id::text, state, attempt, last_error FROM "${schema}".outbox ORDER BY id`,
    );
    expect(rows).toEqual([
      {
        id: String(big),
        state: 'pending',
        attempt: 1,
        last_error: expect.stringMatching(
          /^payload of \d{6} bytes is over the largest this poller delivers \(307200 bytes\)$/,
        ),
      },
      { id: String(small), state: 'sent', attempt: 0, last_error: null },
    ]);
  });
});
