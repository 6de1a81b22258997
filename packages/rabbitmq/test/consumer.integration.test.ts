/**
 * The long-lived RabbitMQ consumer on the machine's broker and a real PostgreSQL: what it does when the broker
 * cancels it (the queue deleted, declared again or not), and during a database outage on a quorum queue with a
 * delivery limit (the outage is the real PostgreSQL store behind a wrapper that throws core's
 * StoreUnavailableError while it is "down").
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { InboxRow } from '@queuebox/core';
import { StoreUnavailableError } from '@queuebox/core';
import { createBrokerIngestion, type Sources } from '@queuebox/inbox';
import { requireServices } from '@queuebox/testing';
import type { Channel, ChannelModel } from 'amqplib';
import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, outageableInbox, useBrokerTestStore } from '../../../test/brokers/support/store.ts';
import { hostPort, startTcpProxy, viaPort } from '../../../test/brokers/support/tcp-proxy.ts';
import { createRabbitMqConsumer } from '../src/index.ts';

const needs = await requireServices('rabbitmq consumer', ['postgres', 'rabbitmq']);
const url = needs.url.rabbitmq;
const db = useBrokerTestStore('rabbitmq_consumer', needs.available ? needs.url.postgres : undefined);

// Unique names per run; every queue is deleted after its test (and again after the file).
const run = randomBytes(4).toString('hex');
const queues: string[] = [];
const queueName = (what: string) => {
  const name = `qb.test.consumer.${run}.${what}`;
  queues.push(name);
  return name;
};

let admin: ChannelModel;
let channel: Channel;

beforeAll(async () => {
  if (!needs.available) return;
  admin = await amqp.connect(url);
  channel = await admin.createChannel();
});

afterAll(async () => {
  if (!needs.available) return;
  for (const queue of queues) await channel.deleteQueue(queue).catch(() => undefined);
  await admin.close();
});

const sources: Sources = {
  cancelled: { type: 'amqp' },
  gone: { type: 'amqp' },
  outage: { type: 'amqp' },
  'outage-broken': { type: 'amqp' },
  'outage-close': { type: 'amqp' },
  bug: { type: 'amqp' },
};

/** A quorum queue whose broker drops a message at its 4th delivery (RabbitMQ 4.x defaults to a limit of 20). */
async function quorumQueue(what: string): Promise<string> {
  const queue = queueName(what);
  await channel.assertQueue(queue, {
    durable: true,
    arguments: { 'x-queue-type': 'quorum', 'x-delivery-limit': 3 },
  });
  return queue;
}

function send(queue: string, body: object, messageId: string) {
  channel.sendToQueue(queue, Buffer.from(JSON.stringify(body)), { messageId, persistent: true });
}

/** The report of the broker's cancel (a RabbitMqConsumerCancelledError). */
const isCancel = (error: unknown) =>
  error instanceof Error && error.name === 'RabbitMqConsumerCancelledError';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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

describe.skipIf(needs.skipReason)('RabbitMQ consumer', () => {
  it('says so and consumes again when the broker cancels it (queue deleted and declared again)', async () => {
    // Prepare
    const queue = queueName('cancel');
    await channel.assertQueue(queue, { durable: false });
    const errors: { error: unknown; during: string }[] = [];
    const consumer = createRabbitMqConsumer({
      source: 'cancelled',
      url,
      queue,
      reconnectDelayMs: 50,
      ingestion: createBrokerIngestion({ store: db.store.inbox, sources }),
      onError: (error, { during }) => errors.push({ error, during }),
    });
    try {
      await consumer.start();
      send(queue, { n: 0 }, randomUUID());
      await rowsOf('cancelled', 1);
      // Act
      await channel.deleteQueue(queue); // the broker sends basic.cancel
      const cancel = await eventually('the cancel to be reported', () =>
        errors.find((e) => isCancel(e.error)),
      );
      await channel.assertQueue(queue, { durable: false });
      for (let n = 1; n <= 3; n++) send(queue, { n }, randomUUID());
      const rows = await rowsOf('cancelled', 4);
      // Assess
      expect(cancel.during).toBe('consume');
      expect((cancel.error as Error).message).toContain(`queue "${queue}"`);
      // Deliveries in hand are ingested side by side, so rows of one prefetch window commit in any order.
      expect(rows.map((r) => (r.payload as { n: number }).n).sort()).toEqual([0, 1, 2, 3]);
      expect(consumer.consuming).toBe(true);
      await eventually('the queue to drain', async () =>
        (await channel.checkQueue(queue)).messageCount === 0 ? true : undefined,
      );
    } finally {
      await consumer.close();
      await channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('keeps trying with a growing delay while the cancelled queue is gone, not consuming meanwhile', async () => {
    // Prepare
    const queue = queueName('gone');
    await channel.assertQueue(queue, { durable: false });
    const errors: { error: unknown; during: string; at: number }[] = [];
    const consumer = createRabbitMqConsumer({
      source: 'gone',
      url,
      queue,
      reconnectDelayMs: 50,
      ingestion: createBrokerIngestion({ store: db.store.inbox, sources }),
      onError: (error, { during }) => errors.push({ error, during, at: Date.now() }),
    });
    try {
      await consumer.start();
      // Act
      await channel.deleteQueue(queue);
      const tries = await eventually('three failed tries to consume again', () => {
        const found = errors.filter((e) => e.during === 'connect');
        return found.length >= 3 ? found : undefined;
      });
      const consumingMeanwhile = consumer.consuming;
      await channel.assertQueue(queue, { durable: false });
      const id = randomUUID();
      send(queue, { back: true }, id);
      const rows = await rowsOf('gone', 1);
      // Assess
      expect(errors.some((e) => isCancel(e.error))).toBe(true);
      expect(consumingMeanwhile).toBe(false);
      for (const t of tries) expect(String((t.error as Error).message)).toMatch(/NOT_FOUND/);
      // The delay doubles (50, 100, 200 ms, …): the third try came at least 100 ms after the second.
      expect((tries[2]?.at ?? 0) - (tries[1]?.at ?? 0)).toBeGreaterThanOrEqual(90);
      expect(rows[0]).toMatchObject({ idempotencyKey: id, payload: { back: true } });
      expect(consumer.consuming).toBe(true);
    } finally {
      await consumer.close();
      await channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('uses up no delivery of a quorum queue with a delivery limit during a database outage: nothing lost, in order', async () => {
    // Prepare
    const queue = await quorumQueue('outage');
    const { store, state } = outageableInbox(db.store.inbox);
    const failures: unknown[] = [];
    const consumer = createRabbitMqConsumer({
      source: 'outage',
      url,
      queue,
      retryDelayMs: 50,
      maxRetryDelayMs: 200,
      ingestion: createBrokerIngestion({ store, sources }),
      onError: (error) => failures.push(error),
    });
    const ids = Array.from({ length: 5 }, () => randomUUID());
    try {
      state.down = true;
      await consumer.start();
      // Act: a requeue per failed try would have used up the 3 deliveries within a few hundred milliseconds.
      ids.forEach((id, n) => {
        send(queue, { n }, id);
      });
      await eventually('five deliveries in hand', async () =>
        (await channel.checkQueue(queue)).messageCount === 0 && state.refused >= 5 ? true : undefined,
      );
      await sleep(1_500);
      const refusedDuringOutage = state.refused;
      state.down = false;
      const rows = await rowsOf('outage', 5);
      // Assess
      expect(refusedDuringOutage).toBeGreaterThan(6);
      expect(failures.length).toBeGreaterThanOrEqual(refusedDuringOutage);
      expect(failures.every((f) => f instanceof StoreUnavailableError)).toBe(true);
      expect(rows.map((r) => r.idempotencyKey)).toEqual(ids);
      // No delivery was returned to the queue: the broker counted none (it adds x-delivery-count when it does).
      for (const row of rows) expect(row.headers).not.toHaveProperty('x-delivery-count');
      await eventually('the queue to be empty and acknowledged', async () => {
        const { messageCount } = await channel.checkQueue(queue);
        return messageCount === 0 ? true : undefined;
      });
    } finally {
      state.down = false;
      await consumer.close();
      await channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('loses nothing when the broker closes the channel during an outage (as its consumer timeout does)', async () => {
    // Prepare
    const queue = await quorumQueue('outage-broken');
    const proxy = await startTcpProxy(hostPort(url, 5672));
    const { store, state } = outageableInbox(db.store.inbox);
    const consumer = createRabbitMqConsumer({
      source: 'outage-broken',
      url: viaPort(url, proxy.port),
      queue,
      retryDelayMs: 50,
      maxRetryDelayMs: 200,
      reconnectDelayMs: 50,
      ingestion: createBrokerIngestion({ store, sources }),
    });
    const ids = Array.from({ length: 5 }, () => randomUUID());
    try {
      state.down = true;
      await consumer.start();
      ids.forEach((id, n) => {
        send(queue, { n }, id);
      });
      await eventually('five deliveries held', () => (state.refused >= 5 ? true : undefined));
      // Act: the unacknowledged deliveries go back to the queue, as when consumer_timeout closes the channel.
      await proxy.stop();
      await eventually('the consumer to notice', () => (consumer.consuming ? undefined : true));
      await proxy.start();
      await eventually('the consumer to be back', () => (consumer.consuming ? true : undefined));
      const refusedBefore = state.refused;
      await eventually('the redeliveries to be tried', () =>
        state.refused > refusedBefore ? true : undefined,
      );
      await sleep(1_000); // the outage goes on after the reconnect
      state.down = false;
      const rows = await rowsOf('outage-broken', 5);
      // Assess
      expect(rows.map((r) => r.idempotencyKey).sort()).toEqual([...ids].sort());
      // The closed channel returned each delivery once (RabbitMQ before 4.3 counts that), the outage none.
      for (const row of rows) expect(Number(row.headers['x-delivery-count'] ?? 0)).toBeLessThanOrEqual(1);
      await eventually('the queue to be empty', async () =>
        (await channel.checkQueue(queue)).messageCount === 0 ? true : undefined,
      );
      expect(proxy.accepted).toBe(2);
    } finally {
      state.down = false;
      await consumer.close();
      await proxy.stop();
      await channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('leaves the deliveries waiting for the database to the broker when it closes', async () => {
    // Prepare
    const queue = await quorumQueue('outage-close');
    const { store, state } = outageableInbox(db.store.inbox);
    const consumer = createRabbitMqConsumer({
      source: 'outage-close',
      url,
      queue,
      retryDelayMs: 60_000,
      ingestion: createBrokerIngestion({ store, sources }),
    });
    try {
      state.down = true;
      await consumer.start();
      for (let n = 0; n < 3; n++) send(queue, { n }, randomUUID());
      // The first try fails; the two after it wait behind it without a try of their own.
      await eventually('three deliveries held', async () =>
        state.refused >= 1 && (await channel.checkQueue(queue)).messageCount === 0 ? true : undefined,
      );
      // Act
      const started = Date.now();
      await consumer.close();
      const took = Date.now() - started;
      // Assess: back in the queue at once, not after the minute's pause, and nothing stored.
      expect(took).toBeLessThan(5_000);
      const { messageCount } = await eventually('the messages back in the queue', async () => {
        const checked = await channel.checkQueue(queue);
        return checked.messageCount === 3 ? checked : undefined;
      });
      expect(messageCount).toBe(3);
      expect(await db.inboxRows('outage-close')).toEqual([]);
    } finally {
      state.down = false;
      await consumer.close();
      await channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('still requeues a delivery whose ingestion failed for another reason than an outage', async () => {
    // Prepare
    const queue = await quorumQueue('bug');
    const inner = createBrokerIngestion({ store: db.store.inbox, sources });
    let thrown = 0;
    const consumer = createRabbitMqConsumer({
      source: 'bug',
      url,
      queue,
      retryDelayMs: 50,
      ingestion: {
        async ingest(source, message) {
          if (thrown === 0) {
            thrown += 1;
            throw new Error('a bug');
          }
          return inner.ingest(source, message);
        },
      },
    });
    const id = randomUUID();
    try {
      await consumer.start();
      // Act
      send(queue, { n: 1 }, id);
      const [row] = await rowsOf('bug', 1);
      // Assess: nacked with requeue, so the broker counted a delivery.
      expect(row).toMatchObject({ idempotencyKey: id, headers: { 'x-delivery-count': '1' } });
    } finally {
      await consumer.close();
      await channel.deleteQueue(queue).catch(() => undefined);
    }
  });
});
