/**
 * The JetStream source on a real server when its durable consumer, or its whole stream, goes away under it: the
 * set-up (stream and consumer created with `createMissing`) must be done again, not kept from the first pull; and
 * the messages of a stream created again (numbered from 1 again) must not be taken for the old ones the inbox keeps.
 */
import { randomBytes } from 'node:crypto';
import { type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { BrokerIngestionPort, BrokerMessage, Logger } from '@queuebox/core';
import { silentLogger } from '@queuebox/core';
import { fallbackIdempotencyKey } from '@queuebox/inbox';
import { requireServices } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { natsServerBinary, startPrivateNatsServer } from '../../../test/brokers/support/nats-server.ts';
import { createNatsSource, type NatsPullReport } from '../src/index.ts';

const needs = await requireServices('nats source', ['nats']);
const url = needs.url.nats;
const run = randomBytes(4).toString('hex');
const binary = natsServerBinary();

let nc: NatsConnection;
let jsm: JetStreamManager;
const streams: string[] = [];

beforeAll(async () => {
  if (!needs.available) return;
  nc = await connect({ servers: url });
  jsm = await jetstreamManager(nc);
});

afterAll(async () => {
  if (!needs.available) return;
  for (const stream of streams) await jsm.streams.delete(stream).catch(() => undefined);
  await nc.close();
});

/**
 * An inbox that keeps one row per key, in order, keyed as the inbox keys a message of a source without a configured
 * key (the message id, else the adapter's default key): a message whose key has a row is a duplicate, acked and
 * not stored.
 */
function memoryIngestion(): BrokerIngestionPort & {
  readonly messages: BrokerMessage[];
  readonly duplicates: BrokerMessage[];
  delivered(): number;
} {
  const messages: BrokerMessage[] = [];
  const duplicates: BrokerMessage[] = [];
  const rows = new Map<string, string>();
  return {
    messages,
    duplicates,
    delivered: () => messages.length + duplicates.length,
    async ingest(_source, message) {
      const key = fallbackIdempotencyKey(message);
      const row = rows.get(key);
      if (row !== undefined) {
        duplicates.push(message);
        return { status: 'duplicate', id: row, wakeRelay: false };
      }
      messages.push(message);
      rows.set(key, String(messages.length));
      return { status: 'stored', id: String(messages.length), wakeRelay: false };
    },
  };
}

/** A logger that keeps its WARN lines. */
function warnings(): Logger & { readonly lines: { message: string; fields?: unknown }[] } {
  const lines: { message: string; fields?: unknown }[] = [];
  const logger: Logger & { lines: typeof lines } = {
    ...silentLogger,
    lines,
    warn: (message, fields) => lines.push({ message, fields }),
    child: () => logger,
  };
  return logger;
}

const text = (message: BrokerMessage) => Buffer.from(message.body).toString('utf8');

async function publish(subject: string, ...bodies: string[]) {
  const js = jetstream(nc);
  for (const body of bodies) await js.publish(subject, body);
}

/** Pulls until `count` messages were delivered in all (stored or duplicate), at most `pulls` times; the reports. */
async function pullUntil(
  source: { pull(budget: { deadline: number }): Promise<NatsPullReport> },
  ingestion: { delivered(): number },
  count: number,
  pulls = 5,
): Promise<NatsPullReport[]> {
  const reports: NatsPullReport[] = [];
  for (let i = 0; i < pulls && ingestion.delivered() < count; i++) {
    reports.push(await source.pull({ deadline: Date.now() + 5000 }));
  }
  return reports;
}

describe.skipIf(needs.skipReason)(`NATS source on ${needs.via.nats}`, () => {
  it.each([
    // A new stream holds only the two new messages, numbered 1 and 2 again: new rows, not duplicates of the old 1
    // and 2. A new consumer on the old stream starts at its first (deliver-all): the old two are duplicates.
    ['its stream is deleted and created again', 'stream', 2],
    ['its durable consumer is deleted', 'consumer', 4],
  ] as const)('consumes again after %s', async (_what, removed, redelivered) => {
    // Prepare: the source creates the stream and its consumer on the first pull
    const stream = `QB_TEST_SRC_${run}_${removed.toUpperCase()}`;
    const subject = `qb.test.src.${run}.${removed}`;
    streams.push(stream);
    const ingestion = memoryIngestion();
    const logger = warnings();
    const source = createNatsSource({
      source: 'events',
      servers: [url],
      stream,
      subject: `${subject}.>`,
      ingestion,
      logger,
      fetchExpiresMs: 1000,
    });
    try {
      const first = await source.pull({ deadline: Date.now() + 5000 });
      expect(first.stoppedFor).toBe('empty');
      await publish(`${subject}.x`, '{"n":"before-1"}', '{"n":"before-2"}');
      await pullUntil(source, ingestion, 2);
      expect(ingestion.messages.map(text)).toEqual(['{"n":"before-1"}', '{"n":"before-2"}']);
      expect(logger.lines).toEqual([]);
      // Act
      if (removed === 'stream') {
        await jsm.streams.delete(stream);
        await jsm.streams.add({ name: stream, subjects: [`${subject}.>`] });
      } else {
        await jsm.consumers.delete(stream, 'queuebox-events');
      }
      await publish(`${subject}.x`, '{"n":"after-1"}', '{"n":"after-2"}');
      const reports = await pullUntil(source, ingestion, 2 + redelivered);
      // Assess: the pull that found the consumer gone says so; a later one sets it up again and consumes
      expect(reports[0]?.stoppedFor).toBe('error');
      expect(String(reports[0]?.error)).toMatch(/not found/i);
      expect(ingestion.delivered()).toBe(2 + redelivered);
      // The new messages are new rows (after a new stream, they have the sequences of the old rows)
      expect(ingestion.messages.map(text)).toEqual([
        '{"n":"before-1"}',
        '{"n":"before-2"}',
        '{"n":"after-1"}',
        '{"n":"after-2"}',
      ]);
      expect(reports.reduce((sum, r) => sum + r.stored, 0)).toBe(2);
      // Only the replayed old messages (deliver-all of a new consumer on the old stream) are duplicates
      expect(ingestion.duplicates.map(text)).toEqual(
        removed === 'consumer' ? ['{"n":"before-1"}', '{"n":"before-2"}'] : [],
      );
      if (removed === 'stream') {
        expect(ingestion.messages[2]?.defaultIdempotencyKey).toMatch(new RegExp(`^${stream}:1@\\d+$`));
        expect(ingestion.messages[2]?.defaultIdempotencyKey).not.toBe(
          ingestion.messages[0]?.defaultIdempotencyKey,
        );
      }
      // The consumer created again is a WARN naming the stream and the consumer (the test created the stream)
      expect(logger.lines).toEqual([
        {
          message: expect.stringMatching(
            /durable consumer was gone and has been created again with deliver-all/,
          ),
          fields: { source: 'events', stream, consumer: 'queuebox-events', streamCreated: false },
        },
      ]);
    } finally {
      await source.close();
    }
  });
  it.runIf('path' in binary)(
    'connects with the user and password of its server URL (a server that requires them)',
    async () => {
      // Prepare: a private server requiring a user; the password holds characters a URL must encode
      const password = 'p@ss/w:rd';
      const server = await startPrivateNatsServer('path' in binary ? binary.path : '', {
        config: `authorization { users = [ { user: "qb", password: "${password}" } ] }`,
      });
      const admin = await connect({ servers: server.url, user: 'qb', pass: password });
      await (await jetstreamManager(admin)).streams.add({ name: 'AUTHSRC', subjects: ['authsrc.>'] });
      await jetstream(admin).publish('authsrc.x', '{"n":1}');
      const ingestion = memoryIngestion();
      const source = createNatsSource({
        source: 'events',
        servers: [`nats://qb:${encodeURIComponent(password)}@${server.url.slice('nats://'.length)}`],
        stream: 'AUTHSRC',
        subject: 'authsrc.>',
        ingestion,
        fetchExpiresMs: 1000,
      });
      try {
        // Act
        await pullUntil(source, ingestion, 1);
        // Assess: before the fix the credentials were dropped and every pull failed to connect
        expect(ingestion.messages.map(text)).toEqual(['{"n":1}']);
      } finally {
        await source.close();
        await admin.close();
        await server.dispose();
      }
    },
  );
});
