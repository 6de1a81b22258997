/**
 * Two QueueBox installs (two services, two schemas) publishing to one broker: row ids start at 1 in every schema, so
 * the message id every delivery carries must hold more than the row id, or a receiver that deduplicates on it loses
 * the second install's messages. On the machine's NATS and RabbitMQ and a real PostgreSQL:
 *
 * - JetStream deduplicates on `Nats-Msg-Id` within its window and acks the repeat as a duplicate, which the
 *   publisher counts as sent: both row-1 messages must be in the stream;
 * - a QueueBox inbox consuming an AMQP queue keys its rows by the `message-id` property when the source configures
 *   no idempotency key: both row-1 messages must be stored.
 */
import { randomBytes } from 'node:crypto';
import { type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { MessageState, type Store } from '@queuebox/core';
import { createBrokerIngestion, type Sources } from '@queuebox/inbox';
import { natsPublisherFactory } from '@queuebox/nats';
import { createRabbitMqConsumer, rabbitmqPublisherFactory } from '@queuebox/rabbitmq';
import { messageIdsOf, requireServices } from '@queuebox/testing';
import amqp, { type Channel, type ChannelModel } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { brokerPoller } from './support/poller.ts';
import { eventually, useBrokerTestStore } from './support/store.ts';

const needs = await requireServices('message ids of two installs', ['postgres', 'nats', 'rabbitmq']);
const pgUrl = needs.available ? needs.url.postgres : undefined;
const orders = useBrokerTestStore('msgid_orders', pgUrl);
const billing = useBrokerTestStore('msgid_billing', pgUrl);
const downstream = useBrokerTestStore('msgid_inbox', pgUrl);

const run = randomBytes(4).toString('hex');
const stream = `QB_TEST_MSGID_${run}`;
const subjects = `qb.test.msgid.${run}`;
const exchange = `qb.test.msgid.${run}`;
const queue = `qb.test.msgid.${run}.in`;

let nc: NatsConnection;
let jsm: JetStreamManager;
let amqpModel: ChannelModel;
let channel: Channel;

beforeAll(async () => {
  if (!needs.available) return;
  nc = await connect({ servers: needs.url.nats });
  jsm = await jetstreamManager(nc);
  // The default duplicate window (2 minutes): the second install's row 1 arrives well within it.
  await jsm.streams.add({ name: stream, subjects: [`${subjects}.>`] });
  amqpModel = await amqp.connect(needs.url.rabbitmq);
  channel = await amqpModel.createChannel();
  await channel.assertExchange(exchange, 'topic', { durable: false });
  await channel.assertQueue(queue, { durable: false });
  await channel.bindQueue(queue, exchange, 'orders.#');
});

afterAll(async () => {
  if (!needs.available) return;
  await jsm.streams.delete(stream).catch(() => undefined);
  await nc.close();
  await channel.deleteQueue(queue).catch(() => undefined);
  await channel.deleteExchange(exchange).catch(() => undefined);
  await amqpModel.close();
});

const outbox = {
  batchSize: 10,
  claimTimeoutMs: 30_000,
  maxAttempts: 3,
  backoff: { baseMs: 100, maxMs: 100 },
};

/** Each install's first outbox row (row 1 of its fresh schema), delivered by a poller of its own. */
async function deliverRowOne(
  installs: readonly Store[],
  destination: Parameters<typeof brokerPoller>[1],
  factory: Parameters<typeof brokerPoller>[2],
): Promise<string[]> {
  const ids: string[] = [];
  for (const [i, store] of installs.entries()) {
    const [id] = await store.outbox.insert([
      { topic: 'orders.created', payload: { install: i }, maxAttempts: 3 },
    ]);
    const poller = brokerPoller(store, destination, factory, outbox);
    try {
      expect(await poller.drain()).toMatchObject({ sent: 1, retried: 0, dead: 0 });
    } finally {
      await poller.close();
    }
    expect((await store.outbox.get(id ?? ''))?.state).toBe(MessageState.Sent);
    ids.push(id ?? '');
  }
  return ids;
}

describe.skipIf(needs.skipReason)('two installs publishing row 1 to one broker', () => {
  it('JetStream keeps both messages: their Nats-Msg-Id holds the install id', async () => {
    // Prepare
    const installs = [orders.store, billing.store];

    // Act
    const ids = await deliverRowOne(
      installs,
      { type: 'nats', servers: [needs.url.nats], subject: `${subjects}.{{ topic }}`, jetstream: true },
      natsPublisherFactory,
    );
    const info = await jsm.streams.info(stream);
    const consumer = await jetstream(nc).consumers.get(stream);
    const received = [];
    for await (const m of await consumer.fetch({ max_messages: 2, expires: 2000 })) received.push(m);

    // Assess: the same row id, two messages in the stream, each under its install's message id.
    expect(ids).toEqual(['1', '1']);
    expect(info.state.messages).toBe(2);
    const expected = [
      ...(await messageIdsOf(orders.store, ['1'])),
      ...(await messageIdsOf(billing.store, ['1'])),
    ];
    expect(received.map((m) => m.headers?.get('Nats-Msg-Id'))).toEqual(expected);
    expect(received.map((m) => m.headers?.get('message-id'))).toEqual(expected);
    expect(received.map((m) => m.json())).toEqual([{ install: 0 }, { install: 1 }]);
  });

  it('an inbox keyed by the AMQP message-id stores both messages, none as a duplicate', async () => {
    // Prepare: the receiving QueueBox's source sets no idempotency key, so the message-id property is the key.
    const sources: Sources = { upstream: { type: 'amqp' } };
    const consumer = createRabbitMqConsumer({
      source: 'upstream',
      url: needs.url.rabbitmq,
      queue,
      ingestion: createBrokerIngestion({ store: downstream.store.inbox, sources }),
    });
    await consumer.start();
    try {
      // Act: each install's next row (row 2 after the test above; equal row ids either way).
      const ids = await deliverRowOne(
        [orders.store, billing.store],
        { type: 'rabbitmq', url: needs.url.rabbitmq, exchange, routingKey: '{{ topic }}' },
        rabbitmqPublisherFactory,
      );
      await eventually('the queue to drain', async () =>
        (await channel.checkQueue(queue)).messageCount === 0 ? true : undefined,
      );
      const rows = await eventually('two inbox rows', async () => {
        const found = await downstream.inboxRows('upstream');
        return found.length >= 2 ? found : undefined;
      });

      // Assess
      expect(ids[0]).toBe(ids[1]);
      expect(rows.map((r) => r.idempotencyKey)).toEqual([
        ...(await messageIdsOf(orders.store, [ids[0] ?? ''])),
        ...(await messageIdsOf(billing.store, [ids[1] ?? ''])),
      ]);
      expect(rows.map((r) => r.payload)).toEqual([{ install: 0 }, { install: 1 }]);
    } finally {
      await consumer.close();
    }
  });
});
