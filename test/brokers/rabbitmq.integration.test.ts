/**
 * RabbitMQ end to end, on the machine's broker and a real PostgreSQL: outbox rows through the poller and the
 * RabbitMQ publisher to a queue; a queue through the long-lived consumer (and through the Amazon MQ handler)
 * into the inbox.
 */
import { randomUUID } from 'node:crypto';
import type { Store } from '@queuebox/core';
import { MessageState, StoreUnavailableError } from '@queuebox/core';
import { createBrokerIngestion, type Sources } from '@queuebox/inbox';
import type { AmazonMqRabbitEvent } from '@queuebox/rabbitmq';
import { createAmazonMqHandler, createRabbitMqConsumer, rabbitmqPublisherFactory } from '@queuebox/rabbitmq';
import { openPostgresStore } from '@queuebox/store-postgres';
import { messageIdsOf, requireServices } from '@queuebox/testing';
import type { GetMessage } from 'amqplib';
import { beforeAll, describe, expect, it } from 'vitest';
import { useAmqpAdmin } from './support/amqp-admin.ts';
import { brokerPoller } from './support/poller.ts';
import { deadStoreUrl, eventually, useBrokerTestStore } from './support/store.ts';
import { hostPort, startTcpProxy, viaPort } from './support/tcp-proxy.ts';

const needs = await requireServices('rabbitmq e2e', ['postgres', 'rabbitmq']);
const url = needs.url.rabbitmq;
const db = useBrokerTestStore('rabbitmq_e2e', needs.available ? needs.url.postgres : undefined);

const rabbit = useAmqpAdmin(needs.available ? url : undefined, 'qb.test.e2e');
const exchange = rabbit.exchange('x');
const outQueue = rabbit.queue('out');
const inQueue = rabbit.queue('in');

beforeAll(async () => {
  if (!needs.available) return;
  await rabbit.channel.assertExchange(exchange, 'topic', { durable: false });
  await rabbit.channel.assertQueue(outQueue, { durable: false });
  await rabbit.channel.bindQueue(outQueue, exchange, 'orders.#');
  await rabbit.channel.assertQueue(inQueue, { durable: false });
});

const outbox = {
  batchSize: 50,
  claimTimeoutMs: 30_000,
  maxAttempts: 5,
  backoff: { baseMs: 200, maxMs: 200 },
};

function poller(store: Store, brokerUrl: string) {
  return brokerPoller(
    store,
    { type: 'rabbitmq', url: brokerUrl, exchange, routingKey: '{{ topic }}.{{ key }}', persistent: true },
    rabbitmqPublisherFactory,
    outbox,
  );
}

async function take(queue: string): Promise<GetMessage> {
  return eventually(
    `a message in ${queue}`,
    async () => (await rabbit.channel.get(queue, { noAck: true })) || undefined,
  );
}

const sources: Sources = {
  'orders-in': {
    type: 'amqp',
    eventTypeFromHeader: true,
    aggregateIdPath: '$.order',
    transform: { jsonata: 'kind = "test" ? $reject("test orders are not stored") : $' },
  },
};

function send(
  body: string | object,
  properties: { messageId?: string; type?: string; headers?: object } = {},
) {
  const content = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  rabbit.channel.sendToQueue(inQueue, content, { persistent: false, ...properties });
}

describe.skipIf(needs.skipReason)('RabbitMQ end to end', () => {
  it('delivers outbox rows with payload, key and headers, read back by a real consumer', async () => {
    // Prepare
    const ids = await db.store.outbox.insert([
      {
        topic: 'orders.created',
        key: 'o-1',
        payload: { n: 1 },
        headers: { 'x-trace': 't1' },
        maxAttempts: 5,
      },
      {
        topic: 'orders.created',
        key: 'o-1',
        payload: { n: 2 },
        headers: { 'x-trace': 't2' },
        maxAttempts: 5,
      },
      { topic: 'orders.paid', key: 'o-2', payload: { n: 3 }, maxAttempts: 5 },
    ]);
    const p = poller(db.store, url);
    try {
      // Act
      const report = await p.drain();
      // Assess
      expect(report).toMatchObject({ sent: 3, retried: 0, dead: 0 });
      const received = [await take(outQueue), await take(outQueue), await take(outQueue)];
      const messageIds = await messageIdsOf(db.store, ids);
      const byId = new Map(received.map((m) => [m.properties.messageId as string, m]));
      expect([...byId.keys()].sort()).toEqual([...messageIds].sort());
      const first = byId.get(messageIds[0] ?? '');
      expect(JSON.parse(first?.content.toString() ?? '')).toEqual({ n: 1 });
      expect(first?.fields.routingKey).toBe('orders.created.o-1');
      expect(first?.properties.headers).toMatchObject({ 'x-trace': 't1', 'message-id': messageIds[0] });
      expect(byId.get(messageIds[2] ?? '')?.fields.routingKey).toBe('orders.paid.o-2');
      for (const id of ids) expect((await db.store.outbox.get(id))?.state).toBe(MessageState.Sent);
    } finally {
      await p.close();
    }
  });

  it('retries while the broker is away and delivers after it returns', async () => {
    // Prepare
    const proxy = await startTcpProxy(hostPort(url, 5672));
    const p = poller(db.store, viaPort(url, proxy.port));
    try {
      await proxy.stop();
      const [id] = await db.store.outbox.insert([
        { topic: 'orders.late', key: 'o-3', payload: { late: true }, maxAttempts: 10 },
      ]);
      // Act
      const during = await p.drain();
      const afterFailure = await db.store.outbox.get(id ?? '');
      await proxy.start();
      const after = await eventually('the row to be delivered', async () => {
        const report = await p.drain();
        return report.sent > 0 ? report : undefined;
      });
      // Assess
      expect(during).toMatchObject({ sent: 0, retried: 1 });
      expect(afterFailure).toMatchObject({ state: MessageState.Pending, attempt: 1 });
      expect(afterFailure?.lastError).toMatch(/RabbitMQ/);
      expect(after.sent).toBe(1);
      const message = await take(outQueue);
      expect(message.properties.messageId).toBe((await messageIdsOf(db.store, [id ?? '']))[0]);
      expect((await db.store.outbox.get(id ?? ''))?.state).toBe(MessageState.Sent);
    } finally {
      await p.close();
      await proxy.stop();
    }
  });

  it('consumes into the inbox: one row per message id, poison as dead rows, everything acknowledged', async () => {
    // Prepare
    const ingestion = createBrokerIngestion({ store: db.store.inbox, sources });
    const consumer = createRabbitMqConsumer({
      source: 'orders-in',
      url,
      queue: inQueue,
      prefetch: 5,
      ingestion,
    });
    await consumer.start();
    const good = randomUUID();
    try {
      // Act
      send(
        { order: 'o-9', kind: 'real' },
        { messageId: good, type: 'order.created', headers: { 'x-trace': 'tt' } },
      );
      send({ order: 'o-9', kind: 'real' }, { messageId: good, type: 'order.created' });
      send('<order>not json</order>', { messageId: `poison-${good}` });
      send({ order: 'o-10', kind: 'test' }, { messageId: `rejected-${good}` });
      const rows = await eventually('three inbox rows', async () => {
        const found = await db.inboxRows('orders-in');
        return found.length >= 3 ? found : undefined;
      });
      await eventually('the queue to drain', async () =>
        (await rabbit.channel.checkQueue(inQueue)).messageCount === 0 ? true : undefined,
      );
      await consumer.close();
      // Assess
      expect(rows).toHaveLength(3);
      const byKey = new Map(rows.map((r) => [r.idempotencyKey, r]));
      expect(byKey.get(good)).toMatchObject({
        state: MessageState.Pending,
        eventType: 'order.created',
        aggregateId: 'o-9',
        payload: { order: 'o-9', kind: 'real' },
        headers: { 'x-trace': 'tt' },
      });
      expect(byKey.get(`poison-${good}`)).toMatchObject({
        state: MessageState.Dead,
        payload: '<order>not json</order>',
        lastError: 'The body is not JSON (stored as text)',
      });
      expect(byKey.get(`rejected-${good}`)).toMatchObject({
        state: MessageState.Dead,
        lastError: 'The transform rejected the message: test orders are not stored',
      });
      // Closing returned nothing to the queue: every delivery was acknowledged.
      expect((await rabbit.channel.checkQueue(inQueue)).messageCount).toBe(0);
    } finally {
      await consumer.close();
    }
  });

  it('acknowledges nothing while the database is down, and the message is stored once it is back', async () => {
    // Prepare
    const down = await openPostgresStore({ url: deadStoreUrl(), schema: db.schema });
    const failures: unknown[] = [];
    const broken = createRabbitMqConsumer({
      source: 'orders-in',
      url,
      queue: inQueue,
      retryDelayMs: 50,
      ingestion: createBrokerIngestion({ store: down.inbox, sources }),
      onError: (error) => failures.push(error),
    });
    const id = randomUUID();
    try {
      await broken.start();
      // Act
      send({ order: 'o-11' }, { messageId: id });
      await eventually('two failed attempts', () => (failures.length >= 2 ? true : undefined));
      await broken.close();
      const waiting = (await rabbit.channel.checkQueue(inQueue)).messageCount;
      const healthy = createRabbitMqConsumer({
        source: 'orders-in',
        url,
        queue: inQueue,
        ingestion: createBrokerIngestion({ store: db.store.inbox, sources }),
      });
      await healthy.start();
      const row = await eventually('the row', async () =>
        (await db.inboxRows('orders-in')).find((r) => r.idempotencyKey === id),
      );
      await healthy.close();
      // Assess
      expect(failures[0]).toBeInstanceOf(StoreUnavailableError);
      expect(waiting).toBe(1);
      expect(row.payload).toEqual({ order: 'o-11' });
      expect((await rabbit.channel.checkQueue(inQueue)).messageCount).toBe(0);
    } finally {
      await broken.close();
      await down.close();
    }
  });

  it('reconnects when the connection breaks and keeps consuming', async () => {
    // Prepare
    const proxy = await startTcpProxy(hostPort(url, 5672));
    const consumer = createRabbitMqConsumer({
      source: 'orders-in',
      url: viaPort(url, proxy.port),
      queue: inQueue,
      reconnectDelayMs: 50,
      ingestion: createBrokerIngestion({ store: db.store.inbox, sources }),
    });
    const id = randomUUID();
    try {
      await consumer.start();
      // Act
      await proxy.stop();
      await eventually('the consumer to notice', () => (consumer.consuming ? undefined : true));
      await proxy.start();
      await eventually('the consumer to be back', () => (consumer.consuming ? true : undefined));
      send({ order: 'o-12' }, { messageId: id });
      const row = await eventually('the row', async () =>
        (await db.inboxRows('orders-in')).find((r) => r.idempotencyKey === id),
      );
      // Assess
      expect(row.payload).toEqual({ order: 'o-12' });
      expect(proxy.accepted).toBe(2);
    } finally {
      await consumer.close();
      await proxy.stop();
    }
  });

  it('stores the messages of a real-shaped Amazon MQ event, and fails the batch when the database is down', async () => {
    // Prepare
    const id = randomUUID();
    const event: AmazonMqRabbitEvent = {
      eventSource: 'aws:rmq',
      eventSourceArn: 'arn:aws:mq:eu-west-1:111122223333:broker:qb:b-9bcfa592-423a-4942-879d-eb284b418fc8',
      rmqMessagesByQueue: {
        [`${inQueue}::/`]: [
          {
            basicProperties: {
              contentType: 'application/json',
              headers: { 'x-trace': { bytes: [...Buffer.from('mq')] }, retries: 2 },
              deliveryMode: 2,
              messageId: id,
              type: 'order.shipped',
              correlationId: 'corr-mq',
              bodySize: 16,
            },
            redelivered: false,
            data: Buffer.from(JSON.stringify({ order: 'o-13' })).toString('base64'),
          },
          {
            basicProperties: { messageId: `bad-${id}`, headers: null },
            redelivered: false,
            data: Buffer.from('oops').toString('base64'),
          },
        ],
      },
    };
    const handler = createAmazonMqHandler({
      ingestion: createBrokerIngestion({ store: db.store.inbox, sources }),
      sources: { 'orders-in': { type: 'amqp', queue: inQueue } },
    });
    const down = await openPostgresStore({ url: deadStoreUrl(), schema: db.schema });
    const brokenHandler = createAmazonMqHandler({
      ingestion: createBrokerIngestion({ store: down.inbox, sources }),
      sources: { 'orders-in': { type: 'amqp', queue: inQueue } },
    });
    try {
      // Act
      const first = await handler(event);
      const second = await handler(event);
      const failed = brokenHandler(event);
      // Assess
      expect(first).toEqual({ stored: 1, duplicate: 0, dead: 1, wakeRelay: true });
      expect(second).toEqual({ stored: 0, duplicate: 2, dead: 0, wakeRelay: false });
      await expect(failed).rejects.toBeInstanceOf(StoreUnavailableError);
      const row = (await db.inboxRows('orders-in')).find((r) => r.idempotencyKey === id);
      expect(row).toMatchObject({
        eventType: 'order.shipped',
        correlationId: 'corr-mq',
        aggregateId: 'o-13',
        headers: { 'x-trace': 'mq', retries: '2' },
      });
    } finally {
      await down.close();
    }
  });

  it("stores a message an Amazon MQ batch fails on as a dead row at its queue's delivery limit (x-delivery-count)", async () => {
    // Prepare: a transform that throws on one message; before its last delivery the batch fails (Lambda returns it
    // to the queue), at it the message is a dead row and the batch completes
    const id = randomUUID();
    const message = (deliveries: number | undefined) => ({
      basicProperties: {
        messageId: `limit-${id}`,
        headers: deliveries === undefined ? null : { 'x-delivery-count': deliveries },
      },
      redelivered: deliveries !== undefined,
      data: Buffer.from(JSON.stringify({ order: 'o-14', poison: true })).toString('base64'),
    });
    const eventWith = (deliveries: number | undefined): AmazonMqRabbitEvent => ({
      eventSource: 'aws:rmq',
      eventSourceArn: 'arn:aws:mq:eu-west-1:111122223333:broker:qb:b-9bcfa592-423a-4942-879d-eb284b418fc8',
      rmqMessagesByQueue: { [`${inQueue}::/`]: [message(deliveries)] },
    });
    const strict: Sources = { limits: { type: 'amqp', transform: { function: 'strict' } } };
    const handler = createAmazonMqHandler({
      ingestion: createBrokerIngestion({
        store: db.store.inbox,
        sources: strict,
        transforms: {
          strict: ({ payload }) => {
            if ((payload as { poison?: boolean }).poison) throw new TypeError('a bug');
            return { payload };
          },
        },
      }),
      sources: { limits: { type: 'amqp', queue: inQueue, deliveryLimit: 5 } },
    });
    const good = {
      basicProperties: { messageId: `good-${id}`, headers: null },
      redelivered: false,
      data: Buffer.from(JSON.stringify({ order: 'o-15' })).toString('base64'),
    };
    const withGood: AmazonMqRabbitEvent = {
      ...eventWith(undefined),
      rmqMessagesByQueue: { [`${inQueue}::/`]: [message(undefined), good] },
    };
    // Act / Assess: the message behind the poison one is stored although the batch fails
    await expect(handler(withGood)).rejects.toThrow('a bug');
    expect((await db.inboxRows('limits')).map((r) => [r.idempotencyKey, r.state])).toEqual([
      [`good-${id}`, MessageState.Pending],
    ]);
    await expect(handler(eventWith(undefined))).rejects.toThrow('a bug');
    await expect(handler(eventWith(4))).rejects.toThrow('a bug');
    expect(await handler(eventWith(5))).toEqual({ stored: 0, duplicate: 0, dead: 1, wakeRelay: false });
    const row = (await db.inboxRows('limits')).find((r) => r.idempotencyKey === `limit-${id}`);
    expect(row).toMatchObject({ state: MessageState.Dead, payload: { order: 'o-14', poison: true } });
    expect(row?.lastError).toContain("at the broker's last delivery of it");
  });
});
