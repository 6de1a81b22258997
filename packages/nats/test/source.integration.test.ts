/**
 * The JetStream source on a real server when its durable consumer, or its whole stream, goes away under it: the
 * set-up (stream and consumer created with `createMissing`) must be done again, not kept from the first pull.
 */
import { randomBytes } from 'node:crypto';
import { type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { BrokerIngestionPort, BrokerMessage } from '@queuebox/core';
import { requireServices } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNatsSource, type NatsPullReport } from '../src/index.ts';

const needs = await requireServices('nats source', ['nats']);
const url = needs.url.nats;
const run = randomBytes(4).toString('hex');

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

/** An inbox that keeps what it is given, in order. */
function memoryIngestion(): BrokerIngestionPort & { readonly messages: BrokerMessage[] } {
  const messages: BrokerMessage[] = [];
  return {
    messages,
    async ingest(_source, message) {
      messages.push(message);
      return { status: 'stored', id: String(messages.length), wakeRelay: false };
    },
  };
}

const text = (message: BrokerMessage) => Buffer.from(message.body).toString('utf8');

async function publish(subject: string, ...bodies: string[]) {
  const js = jetstream(nc);
  for (const body of bodies) await js.publish(subject, body);
}

/** Pulls until `count` messages are stored in all, at most `pulls` times; the reports of the pulls. */
async function pullUntil(
  source: { pull(budget: { deadline: number }): Promise<NatsPullReport> },
  ingestion: { readonly messages: readonly BrokerMessage[] },
  count: number,
  pulls = 5,
): Promise<NatsPullReport[]> {
  const reports: NatsPullReport[] = [];
  for (let i = 0; i < pulls && ingestion.messages.length < count; i++) {
    reports.push(await source.pull({ deadline: Date.now() + 5000 }));
  }
  return reports;
}

describe.skipIf(needs.skipReason)(`NATS source on ${needs.via.nats}`, () => {
  it.each([
    // A new stream holds only the two new messages; a new consumer on the old stream starts at its first (deliver-all).
    ['its stream is deleted and created again', 'stream', 2],
    ['its durable consumer is deleted', 'consumer', 4],
  ] as const)('consumes again after %s', async (_what, removed, redelivered) => {
    // Prepare: the source creates the stream and its consumer on the first pull
    const stream = `QB_TEST_SRC_${run}_${removed.toUpperCase()}`;
    const subject = `qb.test.src.${run}.${removed}`;
    streams.push(stream);
    const ingestion = memoryIngestion();
    const source = createNatsSource({
      source: 'events',
      servers: [url],
      stream,
      subject: `${subject}.>`,
      ingestion,
      fetchExpiresMs: 1000,
    });
    try {
      const first = await source.pull({ deadline: Date.now() + 5000 });
      expect(first.stoppedFor).toBe('empty');
      await publish(`${subject}.x`, '{"n":"before-1"}', '{"n":"before-2"}');
      await pullUntil(source, ingestion, 2);
      expect(ingestion.messages.map(text)).toEqual(['{"n":"before-1"}', '{"n":"before-2"}']);
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
      const after = ingestion.messages.slice(2).map(text);
      expect(after).toHaveLength(redelivered);
      expect(after.filter((body) => body.includes('after'))).toEqual(['{"n":"after-1"}', '{"n":"after-2"}']);
    } finally {
      await source.close();
    }
  });
});
