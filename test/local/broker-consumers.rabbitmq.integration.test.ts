/**
 * The local runtime as a real process consuming a RabbitMQ source and publishing to a RabbitMQ destination, on the
 * machine's broker and a real PostgreSQL: a message published to the source queue becomes an inbox row, is relayed
 * and delivered to a real HTTP receiver; a body that is not JSON becomes a dead row and is acknowledged; an outbox
 * row routed to the rabbitmq destination arrives in a bound queue; SIGTERM during a burst loses nothing (every
 * message is stored once or still in the queue) and exits 0.
 */
import { randomBytes } from 'node:crypto';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import amqp, { type Channel, type ChannelModel } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  baseUrlOf,
  cleanup,
  type Delivery,
  eventually,
  type QueueBoxProcess,
  type Receiver,
  startQueueBox,
  startReceiver,
} from './support.ts';

const needs = await requireServices('local rabbitmq tests', ['postgres', 'rabbitmq']);
const amqpUrl = needs.url.rabbitmq;

const run = randomBytes(4).toString('hex');
const inQueue = `qb.test.local.${run}.in`;
const outQueue = `qb.test.local.${run}.out`;
const exchange = `qb.test.local.${run}`;
const BURST = 30;

describe.skipIf(needs.skipReason)(
  'local runtime with a RabbitMQ source and destination (real process)',
  () => {
    const { pool, schema } = usePostgresSchema(needs.url.postgres, 'local_amqp', 2);
    let broker: ChannelModel;
    let channel: Channel;
    let receiver: Receiver;
    let queuebox: QueueBoxProcess;
    let base: string;

    const publish = (body: string, messageId: string) =>
      channel.sendToQueue(inQueue, Buffer.from(body), {
        messageId,
        contentType: 'application/json',
        headers: { 'x-correlation-id': `corr-${messageId}` },
      });

    async function deliveryWithKey(key: string): Promise<Delivery> {
      let found: Delivery | undefined;
      await eventually(async () => {
        found = receiver.deliveries.find((d) => d.headers['x-idempotency-key'] === key);
        return found !== undefined;
      }, `the delivery of ${key}`);
      return found as Delivery;
    }

    async function inboxRow(
      key: string,
    ): Promise<{ id: string; state: string; last_error: string | null } | undefined> {
      const { rows } = await pool.query<{ id: string; state: string; last_error: string | null }>(
        `SELECT id::text AS id, state, last_error FROM "${schema.name}".inbox WHERE source = 'orders-in' AND idempotency_key = $1`,
        [key],
      );
      return rows[0];
    }

    beforeAll(async () => {
      broker = await amqp.connect(amqpUrl);
      channel = await broker.createChannel();
      await channel.assertQueue(inQueue, { durable: false });
      await channel.assertExchange(exchange, 'topic', { durable: false });
      await channel.assertQueue(outQueue, { durable: false });
      await channel.bindQueue(outQueue, exchange, 'to-rabbit.#');
      receiver = await startReceiver();
      queuebox = await startQueueBox({
        yaml: `database:
  url: ${JSON.stringify(needs.url.postgres)}
  schema: ${schema.name}
http: { port: 0, host: 127.0.0.1 }
inbox:
  relay: { pollIntervalMs: 50 }
outbox:
  pollIntervalMs: 50
  backoff: { baseMs: 100, maxMs: 1000 }
sources:
  orders-in:
    type: amqp
    url: ${JSON.stringify(amqpUrl)}
    queue: ${inQueue}
    prefetch: 5
    aggregateIdPath: $.id
destinations:
  receiver: { type: http, url: ${receiver.url}, timeoutMs: 15000 }
  rabbit: { type: rabbitmq, url: ${JSON.stringify(amqpUrl)}, exchange: ${exchange}, persistent: false }
routes:
  - { match: "to-rabbit.#", destination: rabbit }
  - { match: "orders-in", destination: receiver }
logLevel: debug
`,
      });
      base = await baseUrlOf(queuebox);
      await queuebox.waitForLog((l) => l.message === 'consuming' && l.source === 'orders-in', 'the consumer');
    });

    afterAll(async () => {
      await cleanup();
      await receiver?.close();
      if (channel) {
        await channel.deleteQueue(inQueue).catch(() => undefined);
        await channel.deleteQueue(outQueue).catch(() => undefined);
        await channel.deleteExchange(exchange).catch(() => undefined);
      }
      await broker?.close();
    });

    it('stores a published message, relays it and delivers it to the HTTP receiver', async () => {
      publish(JSON.stringify({ id: 'order-1', total: 5 }), 'amqp-1');

      const delivery = await deliveryWithKey('amqp-1');

      expect(JSON.parse(delivery.body)).toEqual({ id: 'order-1', total: 5 });
      expect(delivery.headers['x-source']).toBe('orders-in');
      expect(delivery.headers['x-correlation-id']).toBe('corr-amqp-1');
      expect((await inboxRow('amqp-1'))?.state).toBe('processed');
      const metrics = await (await fetch(`${base}/metrics`)).text();
      expect(metrics).toContain('queuebox_inbox_accepted_total{source="orders-in"} 1');
    });

    it('stores a message whose header bytes hold 0x00 or are not UTF-8 (base64:), between two good ones, and moves on (issue 13)', async () => {
      // Before: PostgreSQL refused the row on every redelivery and the queue never got past it.
      publish(JSON.stringify({ id: 'poison-0' }), 'amqp-poison-0');
      channel.sendToQueue(inQueue, Buffer.from(JSON.stringify({ id: 'poison-1' })), {
        messageId: 'amqp-poison-1',
        contentType: 'application/json',
        headers: {
          trace: Buffer.from([0x61, 0x00, 0x62]),
          blob: Buffer.from([0xff, 0xfe]),
          note: 'x\u0000y',
        },
      });
      publish(JSON.stringify({ id: 'poison-2' }), 'amqp-poison-2');

      const last = await deliveryWithKey('amqp-poison-2');
      const poisoned = await deliveryWithKey('amqp-poison-1');

      expect(JSON.parse(last.body)).toEqual({ id: 'poison-2' });
      expect(poisoned.headers.trace).toBe(`base64:${Buffer.from([0x61, 0x00, 0x62]).toString('base64')}`);
      expect(poisoned.headers.blob).toBe(`base64:${Buffer.from([0xff, 0xfe]).toString('base64')}`);
      expect(poisoned.headers.note).toBe(`base64:${Buffer.from('x\u0000y').toString('base64')}`);
      expect((await inboxRow('amqp-poison-1'))?.state).toBe('processed');
    });

    it('answers /admin with 404 admin_disabled when no admin.token is configured', async () => {
      const response = await fetch(`${base}/admin/stats`);

      expect(response.status).toBe(404);
      expect(await response.json()).toMatchObject({ error: 'admin_disabled' });
    });

    it('stores a body that is not JSON as a dead row and acknowledges it', async () => {
      publish('this is not json', 'amqp-bad');

      await eventually(async () => (await inboxRow('amqp-bad'))?.state === 'dead', 'the dead row');
      await eventually(
        async () => (await channel.checkQueue(inQueue)).messageCount === 0,
        'the queue being empty',
      );
      expect(receiver.deliveries.some((d) => d.headers['x-idempotency-key'] === 'amqp-bad')).toBe(false);
      // Said at INFO, without the message's text: the row's id only.
      const dead = (await inboxRow('amqp-bad'))?.id;
      const line = await queuebox.waitForLog(
        (l) => typeof l.message === 'string' && l.message.startsWith('broker message stored dead'),
        'the dead message line',
      );
      expect(line).toEqual(expect.objectContaining({ level: 'WARN', source: 'orders-in', id: String(dead) }));
      expect(JSON.stringify(line)).not.toContain('this is not json');
    });

    it('publishes an outbox row routed to the rabbitmq destination to its exchange', async () => {
      await pool.query(
        `INSERT INTO "${schema.name}".outbox (topic, key, payload, max_attempts) VALUES ('to-rabbit.orders', 'k1', $1, 3)`,
        [JSON.stringify({ to: 'rabbit', run })],
      );

      let message: amqp.GetMessage | false = false;
      await eventually(async () => {
        message = await channel.get(outQueue, { noAck: true });
        return message !== false;
      }, 'the message in the bound queue');

      const got = message as unknown as amqp.GetMessage;
      expect(JSON.parse(got.content.toString('utf8'))).toEqual({ to: 'rabbit', run });
      expect(got.fields.routingKey).toBe('to-rabbit.orders');
    });

    it('logs a cancel when its queue is deleted, shows it in queuebox_broker_consumer_failures, and consumes again once the queue is back', async () => {
      const failuresOf = async () => {
        const text = await (await fetch(`${base}/metrics`)).text();
        const line = text
          .split('\n')
          .find((l) => l.startsWith('queuebox_broker_consumer_failures{source="orders-in"}'));
        return Number(line?.split(' ')[1]);
      };
      expect(await failuresOf()).toBe(0);

      // The broker cancels the consumer (basic.cancel); before, the source stopped for good, silently.
      await channel.deleteQueue(inQueue);
      await queuebox.waitForLog(
        (l) => l.source === 'orders-in' && JSON.stringify(l).includes('cancelled the consumer of queue'),
        'the cancel logged',
      );
      await eventually(async () => (await failuresOf()) > 0, 'the failures gauge above 0');
      await channel.assertQueue(inQueue, { durable: false });
      await eventually(async () => (await failuresOf()) === 0, 'the gauge back at 0 once consuming again');
      publish(JSON.stringify({ id: 'after-cancel' }), 'amqp-after-cancel');

      const delivery = await deliveryWithKey('amqp-after-cancel');
      expect(JSON.parse(delivery.body)).toEqual({ id: 'after-cancel' });
    });

    it('on SIGTERM during a burst stops consuming, keeps every message once (stored or queued) and exits 0', async () => {
      for (let i = 0; i < BURST; i++) publish(JSON.stringify({ id: `burst-${i}` }), `burst-${i}`);
      // Some of the burst is in the runtime's hands when the signal comes.
      await eventually(async () => {
        const { rows } = await pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${schema.name}".inbox WHERE idempotency_key LIKE 'burst-%'`,
        );
        return (rows[0]?.n ?? 0) > 0;
      }, 'the first burst message stored');

      const code = await queuebox.stop('SIGTERM');

      expect(code).toBe(0);
      const stopLog = queuebox.logs.map((l) => l.message);
      expect(stopLog.indexOf('shutting down')).toBeLessThan(stopLog.indexOf('stopped'));
      const { rows } = await pool.query<{ n: number; keys: number }>(
        `SELECT count(*)::int AS n, count(DISTINCT idempotency_key)::int AS keys
         FROM "${schema.name}".inbox WHERE idempotency_key LIKE 'burst-%'`,
      );
      const stored = rows[0]?.n ?? 0;
      // The consumer's connection is closed, so what it held unacknowledged is back in the queue.
      const queued = (await channel.checkQueue(inQueue)).messageCount;
      expect(rows[0]?.keys).toBe(stored);
      expect(stored + queued).toBe(BURST);
      const processing = await pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${schema.name}".inbox WHERE state = 'processing'`,
      );
      expect(processing.rows[0]?.n).toBe(0);
    });
  },
);
