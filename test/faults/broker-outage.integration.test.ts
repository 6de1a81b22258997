/**
 * Broker outage, per broker: keyed outbox rows go to a broker that is away for several delivery attempts, then
 * comes back. test/brokers covers one row retried once per broker; this adds what an outage of several attempts
 * must keep: no row goes dead while attempts remain, the head row of each key is the only one tried (the rows
 * behind it wait untried, so per-key order survives the outage), and once the broker is back every row is
 * delivered (read back from the broker).
 *
 * The machine's brokers are never stopped: RabbitMQ is reached through a TCP proxy that is stopped and started,
 * NATS is a private nats-server stopped and started for real, and Kafka's bootstrap address is a proxy (Kafka
 * advertises its own address, so after the first connection the producer talks to the broker directly: only an
 * outage before the producer connected can be staged here).
 */
import { randomBytes } from 'node:crypto';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect as connectNats } from '@nats-io/transport-node';
import type { OutboxRow, Publisher, RowId } from '@queuebox/core';
import { createKafkaPublisher } from '@queuebox/kafka';
import { createNatsPublisher } from '@queuebox/nats';
import { createOutboxPoller } from '@queuebox/outbox';
import { createRabbitMqPublisher } from '@queuebox/rabbitmq';
import { findKafka, findNats, findRabbitMq, messageIdsOf } from '@queuebox/testing';
import amqp from 'amqplib';
import { describe, expect, it } from 'vitest';
import { createKafkaTestKit } from '../brokers/support/kafka.ts';
import { natsServerBinary, startPrivateNatsServer } from '../brokers/support/nats-server.ts';
import { postgresUrl, useBrokerTestStore } from '../brokers/support/store.ts';
import { hostPort, startTcpProxy, viaPort } from '../brokers/support/tcp-proxy.ts';

const pgUrl = await postgresUrl('faults: broker outage');
const [rabbit, nats, kafka] = await Promise.all([findRabbitMq(), findNats(), findKafka()]);
const natsBinary = natsServerBinary();
for (const [name, found] of [
  ['RabbitMQ', rabbit],
  ['NATS', nats],
  ['Kafka', kafka],
] as const) {
  if (!found.available) console.info(`[faults: broker outage] ${name} skipped: ${found.reason}`);
}
if ('reason' in natsBinary) console.info(`[faults: broker outage] NATS skipped: ${natsBinary.reason}`);
const db = useBrokerTestStore('faults_broker_outage', pgUrl);

const KEYS = 4;
const PER_KEY = 10;
const MAX_ATTEMPTS = 8;
/** Failed attempts of each head row before the broker comes back (well below MAX_ATTEMPTS). */
const OUTAGE_ATTEMPTS = 3;

/** What one broker case provides: a publisher behind a switch, and a way to read the delivered messages back. */
interface BrokerCase {
  readonly publisher: Publisher;
  down(): Promise<void>;
  up(): Promise<void>;
  /** The message ids the broker holds, in the order a consumer reads them (per key where it has one). */
  readBack(count: number): Promise<{ id: string; key: string | null }[]>;
  dispose(): Promise<void>;
}

async function rowsOf(ids: readonly RowId[]): Promise<OutboxRow[]> {
  const rows = await Promise.all(ids.map((id) => db.store.outbox.get(id)));
  return rows.filter((r) => r !== undefined);
}

/**
 * The scenario every broker runs: rows of KEYS keys enqueued, the broker down, drains until every head row failed
 * OUTAGE_ATTEMPTS times, the broker up, drains until everything is sent; then the broker's copy is read back.
 */
async function outageScenario(label: string, make: (topic: string) => Promise<BrokerCase>) {
  // Prepare
  const topic = `outage.${label}.${randomBytes(3).toString('hex')}`;
  const broker = await make(topic);
  const poller = createOutboxPoller({
    store: db.store.outbox,
    publishers: () => broker.publisher,
    routes: [{ match: `outage.${label}.#`, destination: label }],
    destinations: { [label]: { type: label } },
    options: {
      batchSize: 100,
      claimTimeoutMs: 60_000,
      maxAttempts: MAX_ATTEMPTS,
      backoff: { baseMs: 50, maxMs: 100 },
    },
  });
  try {
    const messages = [];
    for (let seq = 0; seq < PER_KEY; seq += 1) {
      for (let k = 0; k < KEYS; k += 1) {
        messages.push({ topic, key: `k${k}`, payload: { key: `k${k}`, seq }, maxAttempts: MAX_ATTEMPTS });
      }
    }
    const ids = await db.store.outbox.insert(messages);
    const heads = new Set(ids.slice(0, KEYS));
    await broker.down();

    // Act: drain against the missing broker until each head failed OUTAGE_ATTEMPTS times
    const duringOutage: OutboxRow[][] = [];
    for (let round = 0; round < 40; round += 1) {
      await poller.drain({ deadline: Date.now() + 15_000 });
      const rows = await rowsOf(ids);
      duringOutage.push(rows);
      if (rows.filter((r) => heads.has(r.id)).every((r) => r.attempt >= OUTAGE_ATTEMPTS)) break;
      await new Promise((resolve) => setTimeout(resolve, 120));
    }
    await broker.up();
    let sent = 0;
    for (let round = 0; round < 40 && sent < ids.length; round += 1) {
      sent += (await poller.drain({ deadline: Date.now() + 15_000 })).sent;
      if (sent < ids.length) await new Promise((resolve) => setTimeout(resolve, 120));
    }
    const after = await rowsOf(ids);
    const received = await broker.readBack(ids.length);

    // Assess
    const last = duringOutage.at(-1) ?? [];
    for (const rows of duringOutage) {
      expect(rows.filter((r) => r.state === 'Dead').map((r) => r.id)).toEqual([]);
    }
    expect(
      last
        .filter((r) => heads.has(r.id))
        .map((r) => r.attempt >= OUTAGE_ATTEMPTS && r.attempt < MAX_ATTEMPTS),
    ).toEqual([...heads].map(() => true));
    expect(last.filter((r) => !heads.has(r.id) && r.attempt > 0).map((r) => r.id)).toEqual([]);
    expect(last.every((r) => r.state === 'Pending')).toBe(true);
    expect(last.find((r) => heads.has(r.id))?.lastError).toBeTruthy();
    expect(after.map((r) => r.state)).toEqual(ids.map(() => 'Sent'));
    // The broker holds message ids: the schema's install id, the row id, the row's uid.
    const messageIds = await messageIdsOf(db.store, ids);
    const receivedIds = new Set(received.map((m) => m.id));
    expect(messageIds.filter((id) => !receivedIds.has(id))).toEqual([]);
    const position = new Map(messageIds.map((id, i) => [id, i]));
    for (let k = 0; k < KEYS; k += 1) {
      const firsts: number[] = [];
      const seen = new Set<string>();
      for (const m of received) {
        if (m.key !== `k${k}` || seen.has(m.id)) continue;
        seen.add(m.id);
        firsts.push(position.get(m.id) ?? -1);
      }
      expect(firsts, `order of key k${k} at the broker`).toEqual([...firsts].sort((a, b) => a - b));
    }
    console.info(
      `[faults: broker outage] ${label}: ${ids.length} rows over ${KEYS} keys, ${duringOutage.length} drains during the outage, head attempts ${last
        .filter((r) => heads.has(r.id))
        .map((r) => r.attempt)
        .join(
          '/',
        )} of ${MAX_ATTEMPTS}, 0 dead, ${received.length - receivedIds.size} duplicates at the broker, all delivered`,
    );
  } finally {
    await poller.close();
    await broker.publisher.close();
    await broker.dispose();
  }
}

describe.runIf(pgUrl !== undefined)(
  'broker outage: retries, no row dead while attempts remain, then delivery',
  () => {
    it.runIf(rabbit.available)(
      'RabbitMQ (TCP proxy stopped and started)',
      async () => {
        const url = rabbit.available ? rabbit.url : '';
        await outageScenario('rabbitmq', async (topic) => {
          const exchange = `qb.test.faults.${randomBytes(4).toString('hex')}`;
          const queue = `${exchange}.q`;
          const admin = await amqp.connect(url);
          const channel = await admin.createChannel();
          await channel.assertExchange(exchange, 'topic', { durable: false });
          await channel.assertQueue(queue, { durable: false });
          await channel.bindQueue(queue, exchange, '#');
          const proxy = await startTcpProxy(hostPort(url, 5672));
          return {
            publisher: createRabbitMqPublisher({
              url: viaPort(url, proxy.port),
              exchange,
              routingKey: '{{ topic }}',
              connectTimeoutMs: 1000,
              confirmTimeoutMs: 2000,
            }),
            down: () => proxy.stop(),
            up: () => proxy.start(),
            async readBack(count) {
              const found: { id: string; key: string | null }[] = [];
              const until = Date.now() + 10_000;
              while (found.length < count && Date.now() < until) {
                const message = await channel.get(queue, { noAck: true });
                if (!message) {
                  await new Promise((resolve) => setTimeout(resolve, 50));
                  continue;
                }
                const payload = JSON.parse(message.content.toString()) as { key: string };
                found.push({ id: String(message.properties.messageId), key: payload.key });
              }
              expect(topic).toContain('outage.rabbitmq');
              return found;
            },
            async dispose() {
              await proxy.stop();
              await channel.deleteQueue(queue).catch(() => undefined);
              await channel.deleteExchange(exchange).catch(() => undefined);
              await admin.close();
            },
          };
        });
      },
      90_000,
    );

    it.runIf(nats.available && 'path' in natsBinary)(
      'NATS JetStream (private nats-server stopped and started)',
      async () => {
        await outageScenario('nats', async () => {
          const server = await startPrivateNatsServer('path' in natsBinary ? natsBinary.path : '');
          const admin = await connectNats({ servers: server.url });
          await (await jetstreamManager(admin)).streams.add({ name: 'FAULTS', subjects: ['outage.>'] });
          await admin.close();
          return {
            publisher: createNatsPublisher({ servers: [server.url], jetstream: true, timeoutMs: 1000 }),
            down: () => server.stop(),
            up: () => server.start(),
            async readBack(count) {
              const reader = await connectNats({ servers: server.url });
              try {
                const consumer = await jetstream(reader).consumers.get('FAULTS');
                const found: { id: string; key: string | null }[] = [];
                for await (const m of await consumer.fetch({ max_messages: count, expires: 5000 })) {
                  found.push({
                    id: m.headers?.get('message-id') ?? '',
                    key: (m.json() as { key: string }).key,
                  });
                  if (found.length >= count) break;
                }
                return found;
              } finally {
                await reader.close();
              }
            },
            dispose: () => server.dispose(),
          };
        });
      },
      90_000,
    );

    it.runIf(kafka.available)(
      'Kafka (bootstrap proxy stopped before the producer connected, then started)',
      async () => {
        const brokers = kafka.available ? kafka.url.split(',') : [];
        const kit = await createKafkaTestKit(brokers);
        try {
          const outTopic = await kit.topic('faults-outage', 2);
          const [host, port] = (brokers[0] ?? '').split(':');
          await outageScenario('kafka', async () => {
            const proxy = await startTcpProxy({ host: host ?? '127.0.0.1', port: Number(port) });
            return {
              publisher: createKafkaPublisher({
                brokers: [`127.0.0.1:${proxy.port}`],
                topic: outTopic,
                connectionTimeoutMs: 1000,
              }),
              down: () => proxy.stop(),
              up: () => proxy.start(),
              async readBack(count) {
                const records = await kit.read(outTopic, count);
                // One partition per key: offsets order the messages of a key.
                return [...records]
                  .sort((a, b) => a.partition - b.partition || Number(BigInt(a.offset) - BigInt(b.offset)))
                  .map((r) => ({ id: r.headers['message-id'] ?? '', key: r.key }));
              },
              dispose: () => proxy.stop(),
            };
          });
        } finally {
          await kit.cleanup();
        }
      },
      90_000,
    );
  },
);
