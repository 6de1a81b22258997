/**
 * The consumer against findings of an outside RabbitMQ audit, on the machine's broker and a real PostgreSQL: a
 * stream queue as a source, a momentary database refusal (a lock_timeout) on a quorum queue with a delivery limit,
 * a delivery on its last delivery that must never be nacked, and an `x-delivery-count` header set by a publisher.
 */
import { randomUUID } from 'node:crypto';
import type { BrokerIngestionPort, BrokerMessage, InboxRow } from '@queuebox/core';
import { MessageState, StoreError } from '@queuebox/core';
import { createBrokerIngestion, type Sources } from '@queuebox/inbox';
import { openPostgresStore } from '@queuebox/store-postgres';
import { requireServices } from '@queuebox/testing';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { useAmqpAdmin } from '../../../test/brokers/support/amqp-admin.ts';
import { eventually, useBrokerTestStore } from '../../../test/brokers/support/store.ts';
import { hostPort, startTcpProxy, viaPort } from '../../../test/brokers/support/tcp-proxy.ts';
import { createRabbitMqConsumer, MAX_CONFLICT_HOLD_TRIES, RabbitMqStreamQueueError } from '../src/index.ts';

const needs = await requireServices('rabbitmq consumer (audit)', ['postgres', 'rabbitmq']);
const url = needs.url.rabbitmq;
const db = useBrokerTestStore('rfix_rabbitmq', needs.available ? needs.url.postgres : undefined);

const rabbit = useAmqpAdmin(needs.available ? url : undefined, 'rfix');
const queueName = rabbit.queue;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * An ingestion into `source` (the real one, on the test's PostgreSQL) that refuses every message whose body holds
 * "conflict" for the moment, as a statement timeout its own payload causes would: `tries()` counts those tries.
 */
function refusedOnEveryTry(source: string): { ingestion: BrokerIngestionPort; tries: () => number } {
  const real = createBrokerIngestion({ store: db.store.inbox, sources: { [source]: { type: 'amqp' } } });
  let tries = 0;
  const ingestion: BrokerIngestionPort = {
    ingest: (into, message) => {
      if (String(message.body).includes('conflict')) {
        tries += 1;
        return Promise.reject(
          new StoreError('statement timeout', { context: { sqlState: '57014', transientConflict: true } }),
        );
      }
      return real.ingest(into, message);
    },
  };
  return { ingestion, tries: () => tries };
}

function send(queue: string, body: object, messageId: string, headers?: Record<string, unknown>) {
  rabbit.channel.sendToQueue(queue, Buffer.from(JSON.stringify(body)), {
    messageId,
    persistent: true,
    headers,
  });
}

async function rowsOf(source: string, count: number, timeoutMs = 8_000): Promise<InboxRow[]> {
  return eventually(
    `${count} inbox rows of ${source}`,
    async () => {
      const rows = await db.inboxRows(source);
      return rows.length >= count ? rows : undefined;
    },
    timeoutMs,
  );
}

/** The ingestion, recording every message handed to it. */
function recording(ingestion: BrokerIngestionPort): {
  ingestion: BrokerIngestionPort;
  seen: BrokerMessage[];
} {
  const seen: BrokerMessage[] = [];
  return {
    seen,
    ingestion: {
      ingest: (source, message) => {
        seen.push(message);
        return ingestion.ingest(source, message);
      },
    },
  };
}

describe.skipIf(needs.skipReason)('RabbitMQ consumer (audit findings)', () => {
  it('refuses a stream queue at its first delivery: no ack, no nack, consumer stopped, one clear error, no reconnect loop', async () => {
    // Prepare
    const queue = queueName('stream');
    await rabbit.channel.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'stream' } });
    const errors: { error: unknown; during: string }[] = [];
    const sources: Sources = { 'rfix-stream': { type: 'amqp' } };
    const { ingestion, seen } = recording(createBrokerIngestion({ store: db.store.inbox, sources }));
    const consumer = createRabbitMqConsumer({
      source: 'rfix-stream',
      url,
      queue,
      reconnectDelayMs: 20,
      ingestion,
      onError: (error, { during }) => errors.push({ error, during }),
    });
    try {
      await consumer.start();
      // Act
      send(queue, { n: 1 }, randomUUID());
      send(queue, { n: 2 }, randomUUID());
      const refused = await eventually('the stream to be refused', () =>
        errors.find((e) => e.error instanceof RabbitMqStreamQueueError),
      );
      await sleep(1_000); // a reconnect loop would consume (and report) again meanwhile
      // Assess
      expect(refused.during).toBe('consume');
      expect((refused.error as Error).message).toMatch(
        new RegExp(
          `^queue "${queue.replaceAll('.', '\\.')}" is a stream queue, which QueueBox does not consume as a source: `,
        ),
      );
      expect(errors.filter((e) => e.error instanceof RabbitMqStreamQueueError)).toHaveLength(1);
      expect(errors.filter((e) => e.during === 'connect')).toEqual([]);
      expect(seen).toEqual([]);
      expect(await db.inboxRows('rfix-stream')).toEqual([]);
      expect(consumer.consuming).toBe(false);
      // Nothing consumes the queue any more (the 540 NOT_IMPLEMENTED of a nack would have closed the connection).
      expect((await rabbit.channel.checkQueue(queue)).consumerCount).toBe(0);
    } finally {
      await consumer.close();
      await rabbit.channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('stores a message of a classic queue that carries x-stream-offset (a shovel from a stream copies it) and goes on consuming', async () => {
    // Prepare
    const queue = queueName('shovelled');
    await rabbit.channel.assertQueue(queue, { durable: true });
    const errors: unknown[] = [];
    const sources: Sources = { 'rfix-shovelled': { type: 'amqp' } };
    const consumer = createRabbitMqConsumer({
      source: 'rfix-shovelled',
      url,
      queue,
      ingestion: createBrokerIngestion({ store: db.store.inbox, sources }),
      onError: (error) => errors.push(error),
    });
    try {
      await consumer.start();
      // Act: the header alone stopped the source for good before
      send(queue, { n: 1 }, randomUUID(), { 'x-stream-offset': 41 });
      send(queue, { n: 2 }, randomUUID(), { 'x-stream-offset': 42 });
      send(queue, { n: 3 }, randomUUID());
      const rows = await rowsOf('rfix-shovelled', 3);
      // Assess
      expect(rows).toHaveLength(3);
      expect(errors.filter((e) => e instanceof RabbitMqStreamQueueError)).toEqual([]);
      expect(consumer.consuming).toBe(true);
    } finally {
      await consumer.close();
      await rabbit.channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('asks whether the queue is a stream without taking a message: none is pushed past the delivery limit of a quorum queue', async () => {
    // Prepare: a quorum queue that drops a message at its second delivery; m1 carries a shovelled x-stream-offset,
    // m2 not; a consumer that crashed held both once, so the next delivery of each is its last (the review's case:
    // the check's basic.get took m2 and gave it back, which the broker counted and dropped it)
    const queue = queueName('probe');
    await rabbit.channel.assertQueue(queue, {
      durable: true,
      arguments: { 'x-queue-type': 'quorum', 'x-delivery-limit': 1 },
    });
    send(queue, { m: 1 }, randomUUID(), { 'x-stream-offset': 7 });
    send(queue, { m: 2 }, randomUUID());
    const crashed = await rabbit.connection.createChannel();
    await crashed.prefetch(10);
    let held = 0;
    await crashed.consume(queue, () => {
      held += 1;
    });
    await eventually('the crashed consumer to hold both', () => (held === 2 ? true : undefined));
    await crashed.close();
    const consumer = createRabbitMqConsumer({
      source: 'rfix-probe',
      url,
      queue,
      prefetch: 1,
      ingestion: createBrokerIngestion({
        store: db.store.inbox,
        sources: { 'rfix-probe': { type: 'amqp' } },
      }),
      onError: () => undefined,
    });
    try {
      // Act
      await consumer.start();
      const rows = await rowsOf('rfix-probe', 2, 10_000);
      // Assess
      expect(rows.map((r) => r.payload)).toEqual([{ m: 1 }, { m: 2 }]);
    } finally {
      await consumer.close();
      await rabbit.channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('holds deliveries through a momentary database refusal (lock_timeout): no requeue, no delivery used up, nothing lost', async () => {
    // Prepare: a quorum queue that drops a message past 3 failed deliveries, and a store whose role has a
    // lock_timeout (here in the URL) while another session holds the inbox table, as an ALTER TABLE does.
    const queue = queueName('momentary');
    await rabbit.channel.assertQueue(queue, {
      durable: true,
      arguments: { 'x-queue-type': 'quorum', 'x-delivery-limit': 3 },
    });
    const store = await openPostgresStore({
      url: `${db.url}${db.url.includes('?') ? '&' : '?'}options=-c%20lock_timeout%3D100`,
      schema: db.schema,
      poolSize: 2,
    });
    const sources: Sources = { 'rfix-moment': { type: 'amqp' } };
    const { ingestion, seen } = recording(createBrokerIngestion({ store: store.inbox, sources }));
    const failures: unknown[] = [];
    const consumer = createRabbitMqConsumer({
      source: 'rfix-moment',
      url,
      queue,
      prefetch: 2,
      deliveryLimit: 3,
      retryDelayMs: 50,
      maxRetryDelayMs: 400,
      ingestion,
      onError: (error) => failures.push(error),
    });
    const locker = new pg.Client({ connectionString: db.url });
    await locker.connect();
    const ids = Array.from({ length: 5 }, () => randomUUID());
    try {
      await consumer.start();
      await locker.query('BEGIN');
      await locker.query(`LOCK TABLE "${db.schema}".inbox IN ACCESS EXCLUSIVE MODE`);
      // Act
      ids.forEach((id, n) => {
        send(queue, { n }, id);
      });
      // Four refused tries and half a second more: fewer than MAX_CONFLICT_HOLD_TRIES, past which the first
      // message would be taken for one with a problem of its own and tried beside the others (next test).
      await eventually('four refused tries', () => (failures.length >= 4 ? true : undefined));
      await sleep(500);
      await locker.query('ROLLBACK');
      const rows = await rowsOf('rfix-moment', 5);
      await eventually('the queue to be empty and acknowledged', async () =>
        (await rabbit.channel.checkQueue(queue)).messageCount === 0 ? true : undefined,
      );
      // Assess: every message stored pending, in delivery order, none returned to the queue.
      expect(rows.map((r) => r.idempotencyKey)).toEqual(ids);
      for (const row of rows) expect(row.state).toBe(MessageState.Pending);
      expect(seen.every((m) => m.headers['x-delivery-count'] === undefined)).toBe(true);
      expect(seen.some((m) => m.lastDelivery === true)).toBe(false);
      expect(failures.length).toBeLessThan(MAX_CONFLICT_HOLD_TRIES);
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      await locker.end();
      await consumer.close();
      await store.close();
      await rabbit.channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('does not hold the queue behind a store error of the message itself, and holds one behind a momentary refusal only so many tries', async () => {
    // Prepare: message "own" fails with a store error that is neither an outage nor a momentary refusal (as SQL
    // Server's 1946, an index entry too long), message "conflict" with a momentary refusal every time; "fine" after
    // them. Before (review), both held every delivery behind them without end.
    const queue = queueName('own');
    await rabbit.channel.assertQueue(queue, { durable: true });
    const real = createBrokerIngestion({ store: db.store.inbox, sources: { 'rfix-own': { type: 'amqp' } } });
    const tries = new Map<string, number>();
    const ingestion: BrokerIngestionPort = {
      ingest: (source, message) => {
        const body = String(message.body);
        tries.set(body, (tries.get(body) ?? 0) + 1);
        if (body.includes('own'))
          return Promise.reject(new StoreError('index entry too long', { context: { number: 1946 } }));
        if (body.includes('conflict'))
          return Promise.reject(
            new StoreError('lock timeout', { context: { sqlState: '55P03', transientConflict: true } }),
          );
        return real.ingest(source, message);
      },
    };
    const consumer = createRabbitMqConsumer({
      source: 'rfix-own',
      url,
      queue,
      prefetch: 10,
      retryDelayMs: 10,
      maxRetryDelayMs: 20,
      ingestion,
      onError: () => undefined,
    });
    try {
      await consumer.start();
      // Act
      send(queue, { kind: 'conflict' }, randomUUID());
      send(queue, { kind: 'own' }, randomUUID());
      send(queue, { kind: 'fine' }, randomUUID());
      const rows = await rowsOf('rfix-own', 1, 10_000);
      // Assess: the fine one is stored while the other two are still failing; the conflict was held at most
      // MAX_CONFLICT_HOLD_TRIES tries in a row before it was tried on its own
      expect(rows.map((r) => r.payload)).toEqual([{ kind: 'fine' }]);
      expect(tries.get(JSON.stringify({ kind: 'conflict' }))).toBeGreaterThanOrEqual(MAX_CONFLICT_HOLD_TRIES);
    } finally {
      await consumer.close();
      await rabbit.channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('a delivery refused for the moment on every try holds the queue only once: past its tries, later deliveries are stored at once', async () => {
    // Prepare: "conflict" fails with a momentary refusal on every try (a statement timeout its own payload causes).
    // Before (review of 18ec9b0), its own retry put it back in a fresh hold each time: the queue was held about 8 of
    // every 9 tries, without end, and each later message waited for the hold to run out.
    const queue = queueName('conflict-again');
    await rabbit.channel.assertQueue(queue, { durable: true });
    const { ingestion, tries } = refusedOnEveryTry('rfix-conflict');
    const consumer = createRabbitMqConsumer({
      source: 'rfix-conflict',
      url,
      queue,
      prefetch: 10,
      retryDelayMs: 100,
      maxRetryDelayMs: 100,
      ingestion,
      onError: () => undefined,
    });
    try {
      await consumer.start();
      send(queue, { kind: 'conflict' }, randomUUID());
      await eventually('the conflict to use its hold tries', () =>
        tries() > MAX_CONFLICT_HOLD_TRIES ? true : undefined,
      );
      // Act: fine messages one after another, each once the one before is stored
      const triesDuringWait: number[] = [];
      for (let i = 0; i < 12; i++) {
        const before = tries();
        send(queue, { kind: 'fine', i }, randomUUID());
        await rowsOf('rfix-conflict', i + 1, 10_000);
        triesDuringWait.push(tries() - before);
      }
      // Assess: the conflict kept failing on its own (never settled), and no fine message waited for a hold of it,
      // which ran MAX_CONFLICT_HOLD_TRIES tries (100 ms apart) before the queue moved: one of its own tries may fall
      // within a store, half as many would need a store of 400 ms.
      expect(
        triesDuringWait.every((n) => n < MAX_CONFLICT_HOLD_TRIES / 2),
        `conflict tries while each fine message waited: ${triesDuringWait}`,
      ).toBe(true);
      expect(tries()).toBeGreaterThan(MAX_CONFLICT_HOLD_TRIES);
    } finally {
      await consumer.close();
      await rabbit.channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('a message refused for the moment that comes back in a new delivery does not hold the queue again', async () => {
    // Prepare: as above, through a proxy; once "conflict" has used its hold tries, the connection is cut and the
    // broker delivers it again. Counted per delivery, its new delivery held the queue for its tries again (review
    // of b6bf29f: about 2 minutes after every requeue of a poison message).
    const queue = queueName('conflict-redelivered');
    await rabbit.channel.assertQueue(queue, { durable: true });
    const { ingestion, tries } = refusedOnEveryTry('rfix-conflict2');
    const proxy = await startTcpProxy(hostPort(url, 5672));
    const consumer = createRabbitMqConsumer({
      source: 'rfix-conflict2',
      url: viaPort(url, proxy.port),
      queue,
      prefetch: 10,
      retryDelayMs: 100,
      maxRetryDelayMs: 100,
      ingestion,
      onError: () => undefined,
    });
    try {
      await consumer.start();
      send(queue, { kind: 'conflict' }, randomUUID());
      await eventually('the conflict to use its hold tries', () =>
        tries() > MAX_CONFLICT_HOLD_TRIES ? true : undefined,
      );
      // Act: the connection is cut; the consumer reconnects and the broker delivers "conflict" again
      await proxy.stop();
      const beforeRedelivery = tries();
      await proxy.start();
      await eventually(
        'the redelivery to be tried',
        () => (tries() > beforeRedelivery ? true : undefined),
        15_000,
      );
      const triesDuringWait: number[] = [];
      for (let i = 0; i < 6; i++) {
        const before = tries();
        send(queue, { kind: 'fine', i }, randomUUID());
        await rowsOf('rfix-conflict2', i + 1, 10_000);
        triesDuringWait.push(tries() - before);
      }
      // Assess: no fine message waited for a hold of the redelivered "conflict"
      expect(
        triesDuringWait.every((n) => n < MAX_CONFLICT_HOLD_TRIES / 2),
        `conflict tries while each fine message waited: ${triesDuringWait}`,
      ).toBe(true);
    } finally {
      await consumer.close();
      await proxy.stop();
      await rabbit.channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('never nacks a delivery on its last delivery: it is kept and tried again until it can be stored', async () => {
    // Prepare: an ingestion that cannot store the message for a while with an error that is no store error and
    // no outage (here: the source is unknown to it), prefetch 1 so it is requeued, and deliveryLimit 1 so its
    // first redelivery is its last; the queue drops a message past 3 failed deliveries.
    const queue = queueName('last');
    await rabbit.channel.assertQueue(queue, {
      durable: true,
      arguments: { 'x-queue-type': 'quorum', 'x-delivery-limit': 3 },
    });
    const real = createBrokerIngestion({ store: db.store.inbox, sources: { 'rfix-last': { type: 'amqp' } } });
    const state = { failing: true };
    const seen: BrokerMessage[] = [];
    const ingestion: BrokerIngestionPort = {
      ingest: (source, message) => {
        seen.push(message);
        return state.failing ? Promise.reject(new Error('not ready yet')) : real.ingest(source, message);
      },
    };
    const consumer = createRabbitMqConsumer({
      source: 'rfix-last',
      url,
      queue,
      prefetch: 1,
      deliveryLimit: 1,
      retryDelayMs: 20,
      maxRetryDelayMs: 50,
      ingestion,
      onError: () => undefined,
    });
    const id = randomUUID();
    try {
      await consumer.start();
      // Act
      send(queue, { last: true }, id);
      await eventually('the last delivery to be tried', () =>
        seen.some((m) => m.lastDelivery === true) ? true : undefined,
      );
      await sleep(1_000);
      state.failing = false;
      const rows = await rowsOf('rfix-last', 1);
      // Assess: redelivered once (x-delivery-count 1, the last), then kept, never returned to the queue again.
      const counts = seen.map((m) => m.lastDelivery === true);
      expect(counts[0]).toBe(false);
      expect(counts.slice(1).every(Boolean)).toBe(true);
      expect(seen.length).toBeGreaterThan(5);
      expect(rows[0]).toMatchObject({
        idempotencyKey: id,
        state: MessageState.Pending,
        payload: { last: true },
      });
      await eventually('the queue to be empty and acknowledged', async () =>
        (await rabbit.channel.checkQueue(queue)).messageCount === 0 ? true : undefined,
      );
    } finally {
      await consumer.close();
      await rabbit.channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('trusts x-delivery-count only on a redelivery, and stores no x-delivery-count header', async () => {
    // Prepare: a classic queue and a publisher that sets x-delivery-count itself (as a relaying QueueBox did);
    // a transform function that fails its first call only.
    const queue = queueName('forged');
    await rabbit.channel.assertQueue(queue, { durable: false });
    let calls = 0;
    const consumer = createRabbitMqConsumer({
      source: 'rfix-forged',
      url,
      queue,
      deliveryLimit: 20,
      retryDelayMs: 20,
      ingestion: createBrokerIngestion({
        store: db.store.inbox,
        sources: { 'rfix-forged': { type: 'amqp', transform: { function: 'flaky' } } },
        transforms: {
          flaky: ({ payload }) => {
            calls += 1;
            if (calls === 1) throw new Error('first call only');
            return { payload };
          },
        },
      }),
      onError: () => undefined,
    });
    const id = randomUUID();
    try {
      await consumer.start();
      // Act
      send(queue, { forged: true }, id, { 'x-delivery-count': 25, 'X-Delivery-Count': 30, kept: 'yes' });
      const rows = await rowsOf('rfix-forged', 1);
      // Assess: tried again and stored pending (not dead at once as if on its last delivery), without the header.
      expect(rows[0]).toMatchObject({ idempotencyKey: id, state: MessageState.Pending });
      expect(calls).toBe(2);
      expect(rows[0]?.headers).not.toHaveProperty('x-delivery-count');
      expect(rows[0]?.headers).toMatchObject({ kept: 'yes' });
    } finally {
      await consumer.close();
      await rabbit.channel.deleteQueue(queue).catch(() => undefined);
    }
  });
});
