/**
 * The JetStream source through a store outage, on the real NATS server and a real PostgreSQL store: the messages
 * must not be given back on every try (each redelivery counts against an operator's `max_deliver`, and the server
 * drops a message that used them up), but held, unacknowledged and in order, with in-progress acks, until the store
 * answers or the source stops; a stop gives them back at once. Failures that are no outage, two in a row, give the
 * batch back as before (one alone: source-poison.integration.test.ts).
 */
import { randomBytes } from 'node:crypto';
import { AckPolicy, DeliverPolicy, jetstream } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import type { BrokerIngestionPort, BrokerMessage, InboxStore } from '@queuebox/core';
import { StoreError, StoreUnavailableError } from '@queuebox/core';
import { createBrokerIngestion } from '@queuebox/inbox';
import { assertSchemaName, requireServices, usePostgresSchema } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { createNatsSource } from '../src/index.ts';
import { useNatsAndStore } from './support/services.ts';

const needs = await requireServices('nats source outage', ['postgres', 'nats']);
const run = randomBytes(4).toString('hex');
const db = needs.available ? usePostgresSchema(needs.url.postgres, 'nats_src_outage', 2) : undefined;

const services = useNatsAndStore(needs, db);

/**
 * The real PostgreSQL inbox store behind a switch: while `failWith` is set, every call throws it instead of
 * reaching the database (core's StoreUnavailableError, as the store throws when PostgreSQL is unreachable).
 */
function switchedInbox(inbox: InboxStore): {
  readonly inbox: InboxStore;
  failWith?: () => Error;
  /** How long a failing call takes before it throws (a connect timeout), per call: default at once. */
  failAfterMs?: () => number;
} {
  const state: { failWith?: () => Error; failAfterMs?: () => number } = {};
  const wrapped = new Proxy(inbox, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        const failWith = state.failWith;
        if (failWith) {
          const ms = state.failAfterMs?.() ?? 0;
          if (ms > 0) await sleep(ms);
          throw failWith();
        }
        return value.apply(target, args);
      };
    },
  });
  return Object.assign(state, { inbox: wrapped });
}

/** The real broker ingestion on the switched services.store, recording the body of every message it was given. */
function ingestion(inbox: InboxStore, source: string): BrokerIngestionPort & { readonly tried: string[] } {
  const real = createBrokerIngestion({ store: inbox, sources: { [source]: { type: 'nats' } } });
  const tried: string[] = [];
  return {
    tried,
    ingest(source: string, message: BrokerMessage) {
      tried.push(Buffer.from(message.body).toString('utf8'));
      return real.ingest(source, message);
    },
  };
}

/** A stream with its own existing durable consumer, set up the way an operator would, and `count` messages in it. */
async function existingConsumer(
  name: string,
  consumer: { maxDeliver: number; ackWaitMs: number },
  count: number,
) {
  const stream = `QB_TEST_SRCOUT_${run}_${name.toUpperCase()}`;
  const subject = `qb.test.srcout.${run}.${name}`;
  const durable = `qb-test-srcout-${run}-${name}`;
  services.streams.push(stream);
  await services.jsm.streams.add({ name: stream, subjects: [`${subject}.>`] });
  await services.jsm.consumers.add(stream, {
    durable_name: durable,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    max_deliver: consumer.maxDeliver,
    ack_wait: nanos(consumer.ackWaitMs),
    filter_subject: `${subject}.>`,
  });
  const bodies = Array.from({ length: count }, (_, i) => JSON.stringify({ name, n: i }));
  for (const body of bodies) await jetstream(services.nc).publish(`${subject}.x`, body);
  return { stream, subject: `${subject}.>`, durable, bodies };
}

async function rowsOf(source: string): Promise<{ payload: string; key: string }[]> {
  if (!db) throw new Error('no PostgreSQL');
  const { rows } = await db.pool.query<{ payload: string; key: string }>(
    `SELECT payload::text AS payload, idempotency_key AS key FROM "${assertSchemaName(db.schema.name)}".inbox
      WHERE source = $1 ORDER BY id`,
    [source],
  );
  return rows;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 15_000,
) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(25);
  }
}

describe.skipIf(needs.skipReason)(`NATS source through a services.store outage on ${needs.via.nats}`, () => {
  it('holds a batch through an outage longer than max_deliver tries and ack waits: nothing lost, each stored once', async () => {
    // Prepare: an operator's durable (max_deliver 3, ack_wait 2 s) with 4 messages; the store down
    const { stream, subject, durable, bodies } = await existingConsumer(
      'hold',
      { maxDeliver: 3, ackWaitMs: 2000 },
      4,
    );
    const switched = switchedInbox(services.store.inbox);
    switched.failWith = () => new StoreUnavailableError('database down (test)');
    const port = ingestion(switched.inbox, 'orders-in');
    const errors: { error: unknown; during: string }[] = [];
    const source = createNatsSource({
      source: 'orders-in',
      servers: [needs.url.nats],
      stream,
      subject,
      durable,
      createMissing: false,
      ingestion: port,
      onError: (error, { during }) => errors.push({ error, during }),
    });
    const controller = new AbortController();
    const running = source.run(controller.signal);
    try {
      // Act: the store stays down for 5 s after the first try: beyond 3 deliveries of today's 1 s naks and beyond
      // 2 ack waits. Meanwhile a second replica fetches from the same durable.
      await until('the first try', () => (port.tried.length > 0 ? true : undefined));
      const outageStart = Date.now();
      await sleep(2500);
      const replica = await jetstream(services.nc).consumers.get(stream, durable);
      const taken: number[] = [];
      for await (const m of await replica.fetch({ max_messages: 4, expires: 1000 })) {
        taken.push(m.seq);
        m.nak();
      }
      const during = await services.jsm.consumers.info(stream, durable);
      await sleep(Math.max(0, outageStart + 5000 - Date.now()));
      const triedWhileDown = [...port.tried];
      switched.failWith = undefined;
      const rows = await until('the 4 rows', async () => {
        const found = await rowsOf('orders-in');
        return found.length >= 4 ? found : undefined;
      });
      controller.abort();
      await running;
      const after = await services.jsm.consumers.info(stream, durable);
      // Assess: held, not redelivered: the second replica got nothing, the server counts no redelivery
      expect(taken).toEqual([]);
      expect(during).toMatchObject({ num_ack_pending: 4, num_redelivered: 0, num_pending: 0 });
      expect(during.delivered.consumer_seq).toBe(4);
      // Only the first message was tried while the store was down, more than once, in process
      expect(new Set(triedWhileDown)).toEqual(new Set([bodies[0]]));
      expect(triedWhileDown.length).toBeGreaterThanOrEqual(2);
      expect(errors.length).toBe(triedWhileDown.length);
      for (const { error, during: when } of errors) {
        expect(error).toBeInstanceOf(StoreUnavailableError);
        expect(when).toBe('ingest');
      }
      // Nothing lost, each stored once, in order; the consumer has everything acked
      expect(rows.map((r) => JSON.parse(r.payload))).toEqual(bodies.map((b) => JSON.parse(b)));
      expect(new Set(rows.map((r) => r.key)).size).toBe(4);
      expect(await rowsOf('orders-in')).toHaveLength(4);
      expect(after).toMatchObject({ num_pending: 0, num_ack_pending: 0, num_redelivered: 0 });
      expect(after.ack_floor.stream_seq).toBe(4);
    } finally {
      controller.abort();
      await running;
      await source.close();
    }
  });

  it.each([
    ['its deadline comes (a tick)', 'deadline'],
    ['its signal aborts (the local runtime stops)', 'abort'],
  ] as const)('gives the held messages back at once when %s', async (_what, how) => {
    // Prepare: a long ack wait, so only a nak brings the messages back within the next pull
    const name = `stop${how}`;
    const { stream, subject, durable, bodies } = await existingConsumer(
      name,
      { maxDeliver: 5, ackWaitMs: 60_000 },
      2,
    );
    const switched = switchedInbox(services.store.inbox);
    switched.failWith = () => new StoreUnavailableError('database down (test)');
    const port = ingestion(switched.inbox, name);
    const common = {
      servers: [needs.url.nats],
      stream,
      subject,
      durable,
      createMissing: false,
      unavailableRetryMs: { first: 300, max: 300 },
    };
    const down = createNatsSource({ ...common, source: name, ingestion: port });
    const up = createNatsSource({
      ...common,
      source: name,
      ingestion: createBrokerIngestion({
        store: services.store.inbox,
        sources: { [name]: { type: 'nats' } },
      }),
    });
    const controller = new AbortController();
    try {
      // Act
      const started = Date.now();
      const pulling = down.pull({
        deadline: how === 'deadline' ? started + 3500 : Number.POSITIVE_INFINITY,
        signal: controller.signal,
      });
      if (how === 'abort') {
        await until('three tries', () => (port.tried.length >= 3 ? true : undefined));
        controller.abort();
      }
      const stopped = await pulling;
      const elapsed = Date.now() - started;
      const given = await services.jsm.consumers.info(stream, durable);
      const later = await up.pull({ deadline: Date.now() + 5000 });
      // Assess: tried in process until the stop, then both given back with a plain nak, the outage as the error
      expect(port.tried.length).toBeGreaterThanOrEqual(3);
      expect(new Set(port.tried)).toEqual(new Set([bodies[0]]));
      expect(stopped).toMatchObject({ fetched: 2, stored: 0, nacked: 2, stoppedFor: 'error' });
      expect(stopped.error).toBeInstanceOf(StoreUnavailableError);
      // No try starts after the deadline (some slack for the last try and the flush on a loaded machine)
      if (how === 'deadline') expect(elapsed).toBeLessThan(4500);
      expect(given.num_ack_pending).toBe(2);
      // The next pull gets them at once (the ack wait is a minute), stores both, in order
      expect(later).toMatchObject({ fetched: 2, stored: 2, duplicate: 0, nacked: 0 });
      expect((await rowsOf(name)).map((r) => JSON.parse(r.payload))).toEqual(
        bodies.map((b) => JSON.parse(b)),
      );
    } finally {
      controller.abort();
      await down.close();
      await up.close();
    }
  });

  it('holds through an outage whose tries fail slowly (a connect timeout), past the fetch heartbeats: nothing lost', async () => {
    // Prepare: max_deliver 3; each try waits 3 s before failing, longer than the fetch's missed-heartbeat limit,
    // so the fetch itself ends in error while the first message is held (the review's repro lost all 4).
    const { stream, subject, durable, bodies } = await existingConsumer(
      'slow',
      { maxDeliver: 3, ackWaitMs: 2000 },
      4,
    );
    const switched = switchedInbox(services.store.inbox);
    switched.failWith = () => new StoreUnavailableError('database down (test, slow)');
    switched.failAfterMs = () => 3000;
    const port = ingestion(switched.inbox, 'slow');
    const source = createNatsSource({
      source: 'slow',
      servers: [needs.url.nats],
      stream,
      subject,
      durable,
      createMissing: false,
      ingestion: port,
    });
    const controller = new AbortController();
    const running = source.run(controller.signal);
    try {
      // Act: down for about 12 s (three slow tries and their pauses), then back
      await until('the first try', () => (port.tried.length > 0 ? true : undefined));
      await sleep(12_000);
      switched.failWith = undefined;
      const rows = await until(
        'the 4 rows',
        async () => {
          const found = await rowsOf('slow');
          return found.length >= 4 ? found : undefined;
        },
        30_000,
      );
      // Assess: each stored once, in order
      expect(rows.map((r) => JSON.parse(r.payload))).toEqual(bodies.map((b) => JSON.parse(b)));
      expect(new Set(rows.map((r) => r.key)).size).toBe(4);
    } finally {
      controller.abort();
      await running;
      await source.close();
    }
  }, 60_000);

  it('ends a pull by its deadline even when a try under the hold outlasts it', async () => {
    // Prepare: the first failure comes at once, the later tries take 8 s to fail (a connect timeout)
    const { stream, subject, durable } = await existingConsumer(
      'late',
      { maxDeliver: 5, ackWaitMs: 60_000 },
      2,
    );
    const switched = switchedInbox(services.store.inbox);
    switched.failWith = () => new StoreUnavailableError('database down (test)');
    let calls = 0;
    switched.failAfterMs = () => (calls++ === 0 ? 0 : 8000);
    const port = ingestion(switched.inbox, 'late');
    const source = createNatsSource({
      source: 'late',
      servers: [needs.url.nats],
      stream,
      subject,
      durable,
      createMissing: false,
      unavailableRetryMs: { first: 300, max: 300 },
      ingestion: port,
    });
    try {
      // Act
      const started = Date.now();
      const report = await source.pull({ deadline: started + 3000 });
      const elapsed = Date.now() - started;
      // Assess: given back at the deadline (before: 5 s after it, when the 8 s try failed)
      expect(report).toMatchObject({ fetched: 2, stored: 0, nacked: 2, stoppedFor: 'error' });
      expect(elapsed).toBeLessThan(5000);
    } finally {
      await source.close();
    }
  }, 30_000);

  it('gives the batch back with retryDelayMs when two messages in a row fail for no outage (the services.store refuses all)', async () => {
    // Prepare
    const { stream, subject, durable } = await existingConsumer(
      'other',
      { maxDeliver: 5, ackWaitMs: 30_000 },
      3,
    );
    const switched = switchedInbox(services.store.inbox);
    switched.failWith = () => new StoreError('a statement the database refused (test)');
    const port = ingestion(switched.inbox, 'other');
    const source = createNatsSource({
      source: 'other',
      servers: [needs.url.nats],
      stream,
      subject,
      durable,
      createMissing: false,
      retryDelayMs: 300,
      ingestion: port,
    });
    try {
      // Act
      const started = Date.now();
      const report = await source.pull({ deadline: Date.now() + 10_000 });
      const elapsed = Date.now() - started;
      const info = await services.jsm.consumers.info(stream, durable);
      // Assess: two tries (the first failure alone may be a poison message, source-poison.integration.test.ts),
      // all three given back, the pull stops at once
      expect(report).toMatchObject({ fetched: 3, stored: 0, nacked: 3, stoppedFor: 'error' });
      expect(report.error).toBeInstanceOf(StoreError);
      expect(port.tried).toHaveLength(2);
      expect(elapsed).toBeLessThan(3000);
      expect(info.num_ack_pending).toBe(3);
    } finally {
      await source.close();
    }
  });
});
