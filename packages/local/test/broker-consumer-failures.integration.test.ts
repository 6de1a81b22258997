/**
 * The local runtime's consumer failures (`onFailures`, which feeds `queuebox_broker_consumer_failures`) for a
 * RabbitMQ source on the machine's broker and a real PostgreSQL store that is "down" (a wrapper throwing core's
 * StoreUnavailableError): a reconnect while the database is still down must not read as a recovery, and the first
 * message stored afterwards must. And for a NATS source on a private server that stops and starts again: its
 * failures must end when NATS answers again, with no message to store.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import type { QueueBoxConfig } from '@queuebox/config';
import { createBrokerIngestion } from '@queuebox/inbox';
import { requireServices } from '@queuebox/testing';
import amqp, { type Channel, type ChannelModel } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { natsServerBinary, startPrivateNatsServer } from '../../../test/brokers/support/nats-server.ts';
import { eventually, outageableInbox, useBrokerTestStore } from '../../../test/brokers/support/store.ts';
import { hostPort, startTcpProxy, viaPort } from '../../../test/brokers/support/tcp-proxy.ts';
import { startBrokerConsumers } from '../src/broker-consumers.ts';
import { createLogger } from '../src/logger.ts';

const needs = await requireServices('local consumer failures', ['postgres', 'rabbitmq']);
const url = needs.url.rabbitmq;
const db = useBrokerTestStore('local_consumer_failures', needs.available ? needs.url.postgres : undefined);
const queue = `qb.test.local.failures.${randomBytes(4).toString('hex')}`;

let admin: ChannelModel;
let channel: Channel;

beforeAll(async () => {
  if (!needs.available) return;
  admin = await amqp.connect(url);
  channel = await admin.createChannel();
  await channel.assertQueue(queue, { durable: false });
});

afterAll(async () => {
  if (!needs.available) return;
  await channel.deleteQueue(queue).catch(() => undefined);
  await admin.close();
});

describe.skipIf(needs.skipReason)('the local runtime’s broker consumer failures', () => {
  it('write the problem line again while a run of failures lasts, not only at its start and every 20th', async () => {
    // Prepare: a RabbitMQ source on a port nobody listens on fails every reconnect (0.5 s, doubling). Before, the line
    // came at the 1st failure and then at the 20th: a Kafka source retrying with pauses growing to 30 s wrote one line
    // in 2.5 minutes of failures (outside crash soak).
    const closed = await new Promise<number>((resolve) => {
      const probe = createServer();
      probe.listen(0, '127.0.0.1', () => {
        const address = probe.address();
        probe.close(() => resolve(typeof address === 'object' && address ? address.port : 1));
      });
    });
    const lines: { message: string; failures?: number }[] = [];
    const consumers = startBrokerConsumers({
      sources: {
        'nowhere-in': { type: 'amqp', url: `amqp://guest:guest@127.0.0.1:${closed}`, queue },
      } as unknown as QueueBoxConfig['sources'],
      ingestion: createBrokerIngestion({
        store: db.store.inbox,
        sources: { 'nowhere-in': { type: 'amqp' } },
      }),
      logger: createLogger({ level: 'warn', write: (line) => lines.push(JSON.parse(line)) }),
      problemLogIntervalMs: 300,
    });
    try {
      // Act
      await new Promise((resolve) => setTimeout(resolve, 4_000));
    } finally {
      await consumers.stop();
    }
    // Assess: several lines, their failure counts rising, all far below 20
    const problems = lines.filter((l) => l.message.startsWith('broker consumer problem'));
    expect(problems.length).toBeGreaterThanOrEqual(3);
    expect(problems.map((l) => l.failures)).toEqual(
      [...problems.map((l) => l.failures)].sort((a, b) => (a ?? 0) - (b ?? 0)),
    );
    expect(Math.max(...problems.map((l) => l.failures ?? 0))).toBeLessThan(20);
  });

  it('stay above 0 across a reconnect while the database is down, and return to 0 at the next stored message', async () => {
    // Prepare
    const proxy = await startTcpProxy(hostPort(url, 5672));
    const { store, state } = outageableInbox(db.store.inbox);
    const sources = {
      'orders-in': { type: 'amqp', url: viaPort(url, proxy.port), queue, prefetch: 5 },
    } as unknown as QueueBoxConfig['sources'];
    const reported: number[] = [];
    state.down = true;
    const consumers = startBrokerConsumers({
      sources,
      ingestion: createBrokerIngestion({ store, sources: { 'orders-in': { type: 'amqp' } } }),
      logger: createLogger({ level: 'error', write: () => undefined }),
      onFailures: (_source, failures) => reported.push(failures),
    });
    try {
      channel.sendToQueue(queue, Buffer.from(JSON.stringify({ n: 1 })), { messageId: randomUUID() });
      await eventually('an ingest refused', () => (state.refused > 0 ? true : undefined), 15_000);
      // Act: the connection is cut and comes back while the database stays down.
      await proxy.stop();
      await new Promise((resolve) => setTimeout(resolve, 500));
      await proxy.start();
      await eventually(
        'the consumer connected again',
        () => (proxy.accepted >= 2 ? true : undefined),
        15_000,
      );
      const refusedAtReconnect = state.refused;
      await eventually(
        'the redelivery refused',
        () => (state.refused > refusedAtReconnect ? true : undefined),
        20_000,
      );
      const duringOutage = [...reported];
      state.down = false;
      await eventually('the gauge back at 0', () => (reported.at(-1) === 0 ? true : undefined), 40_000);
      // Assess: never 0 while the database was down, the failures still counted after the reconnect
      expect(duringOutage.length).toBeGreaterThan(1);
      expect(duringOutage).not.toContain(0);
      expect(duringOutage).toEqual([...duringOutage].sort((a, b) => a - b));
      const rows = await db.inboxRows('orders-in');
      expect(rows).toHaveLength(1);
    } finally {
      state.down = false;
      await consumers.stop();
      await proxy.stop();
    }
  }, 90_000);
});

const binary = natsServerBinary();

describe.skipIf('reason' in binary ? binary.reason : undefined)(
  'the local runtime’s NATS consumer failures',
  () => {
    it('return to 0 once NATS answers again, on a stream without messages', async () => {
      // Prepare: a NATS source on a private server (the source creates its stream) that takes no message
      const server = await startPrivateNatsServer('path' in binary ? binary.path : '');
      const sources = {
        'jobs-in': {
          type: 'nats',
          servers: [server.url],
          stream: `FIXNATS_LOCAL_${randomBytes(4).toString('hex').toUpperCase()}`,
          batchSize: 10,
        },
      } as unknown as QueueBoxConfig['sources'];
      const reported: number[] = [];
      const consumers = startBrokerConsumers({
        sources,
        ingestion: {
          ingest: async () => {
            throw new Error('no message was published');
          },
        },
        logger: createLogger({ level: 'error', write: () => undefined }),
        onFailures: (_source, failures) => reported.push(failures),
      });
      try {
        // Act: NATS goes away long enough for failed pulls, and comes back
        await server.stop();
        await eventually('a failure', () => (reported.some((n) => n > 0) ? true : undefined), 30_000);
        await server.start();
        // Assess: back at 0 without a stored message (before: it stayed at its last count until one was stored)
        await eventually('the gauge back at 0', () => (reported.at(-1) === 0 ? true : undefined), 30_000);
        expect(reported[0]).toBe(1);
      } finally {
        await consumers.stop();
        await server.dispose();
      }
    }, 90_000);
  },
);
