/**
 * NATS end to end, on the machine's server (plus a private nats-server for outages) and a real PostgreSQL:
 * outbox rows through the poller and the JetStream publisher; a stream through the durable pull consumer into the
 * inbox.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { getEventListeners } from 'node:events';
import { type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import type { Store } from '@queuebox/core';
import { MessageState, StoreUnavailableError } from '@queuebox/core';
import { createBrokerIngestion, type Sources } from '@queuebox/inbox';
import { createNatsSource, natsPublisherFactory } from '@queuebox/nats';
import { openPostgresStore } from '@queuebox/store-postgres';
import { messageIdsOf, requireServices } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { natsServerBinary, startPrivateNatsServer } from './support/nats-server.ts';
import { brokerPoller } from './support/poller.ts';
import { deadStoreUrl, eventually, useBrokerTestStore } from './support/store.ts';

const needs = await requireServices('nats e2e', ['postgres', 'nats']);
const url = needs.url.nats;
const binary = natsServerBinary();
if ('reason' in binary) console.info(`[nats e2e] outage test skipped: ${binary.reason}`);
const db = useBrokerTestStore('nats_e2e', needs.available ? needs.url.postgres : undefined);

const run = randomBytes(4).toString('hex');
const outStream = `QB_TEST_OUT_${run}`;
const outPrefix = `qb.test.out.${run}`;
const inStream = `QB_TEST_IN_${run}`;
const inSubject = `qb.test.in.${run}.orders`;

let nc: NatsConnection;
let jsm: JetStreamManager;

beforeAll(async () => {
  if (!needs.available) return;
  nc = await connect({ servers: url });
  jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: outStream, subjects: [`${outPrefix}.>`] });
});

afterAll(async () => {
  if (!needs.available) return;
  await jsm.streams.delete(outStream).catch(() => undefined);
  await jsm.streams.delete(inStream).catch(() => undefined);
  await nc.close();
});

const outbox = {
  batchSize: 50,
  claimTimeoutMs: 30_000,
  maxAttempts: 10,
  backoff: { baseMs: 200, maxMs: 200 },
};

function poller(store: Store, servers: string[], subject: string) {
  return brokerPoller(
    store,
    { type: 'nats', servers, subject, jetstream: true },
    natsPublisherFactory,
    outbox,
  );
}

const sources: Sources = {
  'orders-in': {
    type: 'nats',
    idempotencyKey: { header: 'message-id' },
    eventTypePath: '$.kind',
    aggregateIdPath: '$.order',
    transform: { jsonata: 'kind = "test" ? $reject("test orders are not stored") : $' },
  },
};

function source(store: Store, overrides: { retryDelayMs?: number; onError?: (e: unknown) => void } = {}) {
  return createNatsSource({
    source: 'orders-in',
    servers: [url],
    stream: inStream,
    subject: inSubject,
    batchSize: 10,
    ingestion: createBrokerIngestion({ store: store.inbox, sources }),
    ...overrides,
  });
}

async function send(body: string | object, messageId: string) {
  const hdrs = headers();
  hdrs.set('message-id', messageId);
  const data = typeof body === 'string' ? body : JSON.stringify(body);
  await jetstream(nc).publish(inSubject, data, { headers: hdrs });
}

describe.skipIf(needs.skipReason)('NATS end to end', () => {
  it('delivers outbox rows through JetStream with payload, key and headers', async () => {
    // Prepare
    const ids = await db.store.outbox.insert([
      {
        topic: 'orders.created',
        key: 'o-1',
        payload: { n: 1 },
        headers: { 'x-trace': 't1' },
        maxAttempts: 5,
      },
      { topic: 'orders.paid', key: 'o-2', payload: { n: 2 }, maxAttempts: 5 },
    ]);
    const p = poller(db.store, [url], `${outPrefix}.{{ topic }}.{{ key }}`);
    try {
      // Act
      const report = await p.drain();
      const consumer = await jetstream(nc).consumers.get(outStream);
      const received = [];
      for await (const m of await consumer.fetch({ max_messages: 2, expires: 2000 })) received.push(m);
      // Assess
      expect(report).toMatchObject({ sent: 2, retried: 0 });
      const bySubject = new Map(received.map((m) => [m.subject, m]));
      const first = bySubject.get(`${outPrefix}.orders.created.o-1`);
      expect(first?.json()).toEqual({ n: 1 });
      const messageIds = await messageIdsOf(db.store, ids);
      expect(first?.headers?.get('message-id')).toBe(messageIds[0]);
      expect(first?.headers?.get('x-trace')).toBe('t1');
      expect(bySubject.get(`${outPrefix}.orders.paid.o-2`)?.headers?.get('Nats-Msg-Id')).toBe(messageIds[1]);
    } finally {
      await p.close();
    }
  });

  it.runIf('path' in binary)(
    'gives a row back untried while the server is down and delivers it after it returns',
    async () => {
      // Prepare: a private server (the machine's is shared), its stream kept across the restart in its store dir
      const server = await startPrivateNatsServer('path' in binary ? binary.path : '');
      const admin = await connect({ servers: server.url });
      await (await jetstreamManager(admin)).streams.add({ name: 'E2E', subjects: ['e2e.>'] });
      await admin.close();
      const p = poller(db.store, [server.url], 'e2e.{{ topic }}');
      try {
        const [warm] = await db.store.outbox.insert([{ topic: 'orders.warm', payload: {}, maxAttempts: 5 }]);
        await p.drain();
        await server.stop();
        const [id] = await db.store.outbox.insert([
          { topic: 'orders.late', key: 'late', payload: { late: true }, maxAttempts: 10 },
        ]);
        // Act
        const during = await p.drain();
        const afterFailure = await db.store.outbox.get(id ?? '');
        await server.start();
        await eventually(
          'the row to be delivered',
          async () => ((await p.drain()).sent > 0 ? true : undefined),
          15_000,
        );
        // Assess
        expect((await db.store.outbox.get(warm ?? ''))?.state).toBe(MessageState.Sent);
        // Within the first 30 s of the connection going down, nothing is written and the row is given back untried,
        // without spending an attempt (b1464a8); later failures count.
        expect(during).toMatchObject({ sent: 0, retried: 0, released: 1 });
        expect(afterFailure).toMatchObject({ state: MessageState.Pending, attempt: 0 });
        expect((await db.store.outbox.get(id ?? ''))?.state).toBe(MessageState.Sent);
        const check = await connect({ servers: server.url });
        const info = await (await jetstreamManager(check)).streams.info('E2E');
        await check.close();
        expect(info.state.messages).toBe(2);
      } finally {
        await p.close();
        await server.dispose();
      }
    },
  );

  it('creates the stream and consumer, stores messages once, poison as dead rows, and acks everything', async () => {
    // Prepare: the source creates the stream on its first pull
    const s = source(db.store);
    const id = randomUUID();
    try {
      const empty = await s.pull({ deadline: Date.now() + 10_000 });
      await send({ kind: 'order.created', order: 'o-5' }, id);
      await send({ kind: 'order.created', order: 'o-5' }, id);
      await send('not json', `poison-${id}`);
      await send({ kind: 'test', order: 'o-6' }, `test-${id}`);
      // Act
      const report = await s.pull({ deadline: Date.now() + 10_000 });
      const info = await jsm.consumers.info(inStream, 'queuebox-orders-in');
      // Assess
      expect(empty).toMatchObject({ fetched: 0, stoppedFor: 'empty' });
      expect(report).toMatchObject({
        fetched: 4,
        stored: 1,
        duplicate: 1,
        dead: 2,
        nacked: 0,
        stoppedFor: 'empty',
      });
      expect(info.num_ack_pending).toBe(0);
      expect(info.num_pending).toBe(0);
      const rows = new Map((await db.inboxRows('orders-in')).map((r) => [r.idempotencyKey, r]));
      expect(rows.get(id)).toMatchObject({
        state: MessageState.Pending,
        eventType: 'order.created',
        aggregateId: 'o-5',
      });
      expect(rows.get(`poison-${id}`)).toMatchObject({ state: MessageState.Dead, payload: 'not json' });
      expect(rows.get(`test-${id}`)).toMatchObject({
        state: MessageState.Dead,
        lastError: 'The transform rejected the message: test orders are not stored',
      });
    } finally {
      await s.close();
    }
  });

  it('holds the messages while the database is down, gives them back at its deadline; stored once it is back', async () => {
    // Prepare
    const down = await openPostgresStore({ url: deadStoreUrl(), schema: db.schema });
    const failures: unknown[] = [];
    const broken = source(down, { retryDelayMs: 300, onError: (e) => failures.push(e) });
    const healthy = source(db.store);
    const id = randomUUID();
    try {
      await send({ kind: 'order.created', order: 'o-7' }, id);
      await send({ kind: 'order.created', order: 'o-8' }, `${id}-2`);
      // Act
      // The outage outlasts the pull: it holds them (in-progress acks, no delivery counted) until its deadline,
      // then naks them, so they are due at once for the healthy source.
      const during = await broken.pull({ deadline: Date.now() + 2_500 });
      const infoDuring = await jsm.consumers.info(inStream, 'queuebox-orders-in');
      const after = await eventually('the redelivery', async () => {
        const pulled = await healthy.pull({ deadline: Date.now() + 10_000 });
        return pulled.stored > 0 ? pulled : undefined;
      });
      // Assess
      expect(failures[0]).toBeInstanceOf(StoreUnavailableError);
      expect(during).toMatchObject({ fetched: 2, stored: 0, nacked: 2, stoppedFor: 'error' });
      expect(infoDuring.num_ack_pending).toBe(2);
      expect(after.stored).toBe(2);
      const keys = (await db.inboxRows('orders-in')).map((r) => r.idempotencyKey);
      expect(keys).toEqual(expect.arrayContaining([id, `${id}-2`]));
      expect((await jsm.consumers.info(inStream, 'queuebox-orders-in')).num_ack_pending).toBe(0);
    } finally {
      await broken.close();
      await healthy.close();
      await down.close();
    }
  });

  it('keeps pulling in the local runtime until aborted', async () => {
    // Prepare
    const s = source(db.store);
    const controller = new AbortController();
    const running = s.run(controller.signal, { idleMs: 50 });
    const id = randomUUID();
    try {
      // Act: idle for a while (a pause every 50 ms), then a message
      await new Promise((resolve) => setTimeout(resolve, 600));
      const idleListeners = getEventListeners(controller.signal, 'abort').length;
      await send({ kind: 'order.created', order: 'o-9' }, id);
      const row = await eventually('the row', async () =>
        (await db.inboxRows('orders-in')).find((r) => r.idempotencyKey === id),
      );
      controller.abort();
      await running;
      // Assess: the idle pauses left no listeners behind on the runtime's signal (one per pause did, for days)
      expect(row.aggregateId).toBe('o-9');
      expect(idleListeners).toBeLessThanOrEqual(2);
    } finally {
      controller.abort();
      await s.close();
    }
  });
});
