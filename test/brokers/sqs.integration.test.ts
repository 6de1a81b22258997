/**
 * SQS end to end, on ElasticMQ (`scripts/elasticmq.sh`) and a real PostgreSQL: outbox rows through the poller and
 * the SQS publisher into a FIFO queue with per-key order; the validated configuration wired into the publisher;
 * an SQS queue through the long-polling consumer into the inbox (dead rows, duplicates, database down); the Lambda
 * event handler's `batchItemFailures` for standard and FIFO queues.
 */
import { getEventListeners } from 'node:events';
import {
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { createSqsConsumer, createSqsEventHandler, sqsPublisherFactory } from '@queuebox/aws';
import { parseConfig } from '@queuebox/config';
import type { BrokerIngestionPort, Store } from '@queuebox/core';
import { MessageState, StoreUnavailableError } from '@queuebox/core';
import { createBrokerIngestion, type Sources } from '@queuebox/inbox';
import { LOCAL_PUBLISHER_FACTORIES } from '@queuebox/local';
import { createPublishers, type PublisherFactory } from '@queuebox/outbox';
import { openPostgresStore } from '@queuebox/store-postgres';
import { requireServices } from '@queuebox/testing';
import type { SQSEvent, SQSRecord } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestQueue,
  dropQueue,
  receiveAll,
  TEST_CREDENTIALS,
  testSqsClient,
} from '../../packages/aws/test/support/sqs.ts';
import { brokerPoller } from './support/poller.ts';
import { deadStoreUrl, eventually, useBrokerTestStore } from './support/store.ts';

const needs = await requireServices('sqs e2e', ['postgres', 'sqs']);
const lambdaEvent = await requireServices('sqs e2e: Lambda event', ['postgres']);
const endpoint = needs.url.sqs;
const db = useBrokerTestStore('sqs_e2e', lambdaEvent.available ? lambdaEvent.url.postgres : undefined);

// The destinations built from configuration use the SDK's default credential chain, as they do in production.
process.env.AWS_ACCESS_KEY_ID = TEST_CREDENTIALS.accessKeyId;
process.env.AWS_SECRET_ACCESS_KEY = TEST_CREDENTIALS.secretAccessKey;
process.env.AWS_REGION = 'us-east-1';

let client: SQSClient;
const queues: string[] = [];

beforeAll(() => {
  if (needs.available) client = testSqsClient(endpoint);
});

afterAll(async () => {
  if (!needs.available) return;
  for (const queue of queues) await dropQueue(client, queue);
  client.destroy();
});

async function queue(
  label: string,
  fifo = false,
  visibilityTimeoutSeconds = 30,
  attributes?: Record<string, string>,
) {
  const url = await createTestQueue(client, label, { fifo, visibilityTimeoutSeconds, attributes });
  queues.push(url);
  return url;
}

async function queueArn(queueUrl: string): Promise<string> {
  const answer = await client.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
  );
  const arn = answer.Attributes?.QueueArn;
  if (!arn) throw new Error(`no QueueArn for ${queueUrl}`);
  return arn;
}

/** A queue whose messages go to a fresh dead-letter queue on their receive after the `maxReceiveCount`th. */
async function queueWithDlq(label: string, visibilityTimeoutSeconds: number, maxReceiveCount: number) {
  const dlq = await queue(`${label}-dlq`);
  const redrive = JSON.stringify({ deadLetterTargetArn: await queueArn(dlq), maxReceiveCount });
  const queueUrl = await queue(label, false, visibilityTimeoutSeconds, { RedrivePolicy: redrive });
  return { queueUrl, dlq };
}

/** Visible and in-flight messages of a queue. */
async function queueCounts(queueUrl: string): Promise<{ visible: number; inFlight: number }> {
  const answer = await client.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return {
    visible: Number(answer.Attributes?.ApproximateNumberOfMessages ?? 0),
    inFlight: Number(answer.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0),
  };
}

/**
 * The inbox ingestion of a database that is down (a port nothing listens on: every statement throws core's
 * StoreUnavailableError, as the PostgreSQL store says it) until `up()`, then of the real one.
 */
async function outageIngestion(sourcesOf: Sources) {
  const down = await openPostgresStore({ url: deadStoreUrl(), schema: db.schema });
  const broken = createBrokerIngestion({ store: down.inbox, sources: sourcesOf });
  const healthy = createBrokerIngestion({ store: db.store.inbox, sources: sourcesOf });
  const state = { up: false, failedCalls: 0 };
  const ingestion: BrokerIngestionPort = {
    async ingest(source, message) {
      if (state.up) return healthy.ingest(source, message);
      try {
        return await broken.ingest(source, message);
      } catch (error) {
        state.failedCalls += 1;
        throw error;
      }
    },
  };
  return { ingestion, state, close: () => down.close() };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function sendNumbered(queueUrl: string, count: number, key: string) {
  await client.send(
    new SendMessageBatchCommand({
      QueueUrl: queueUrl,
      Entries: Array.from({ length: count }, (_, n) => ({
        Id: `e${n}`,
        MessageBody: JSON.stringify({ kind: 'order.held', order: `o-${n}` }),
        MessageAttributes: { 'message-id': { DataType: 'String', StringValue: `${key}-${n}` } },
      })),
    }),
  );
}

const outbox = {
  batchSize: 100,
  claimTimeoutMs: 30_000,
  maxAttempts: 10,
  backoff: { baseMs: 200, maxMs: 200 },
};

/** Receives and deletes until `count` messages came (a FIFO group hands out its next message once the last is deleted). */
const drainQueue = (queueUrl: string, count: number) => receiveAll(client, queueUrl, count, 30_000, true);

async function visibleCount(queueUrl: string): Promise<number> {
  const answer = await client.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return (
    Number(answer.Attributes?.ApproximateNumberOfMessages ?? 0) +
    Number(answer.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0)
  );
}

const sources: Sources = {
  'orders-in': {
    type: 'sqs',
    idempotencyKey: { header: 'message-id' },
    eventTypePath: '$.kind',
    aggregateIdPath: '$.order',
    transform: { jsonata: 'kind = "test" ? $reject("test orders are not stored") : $' },
  },
};

function ingestionOf(store: Store) {
  return createBrokerIngestion({ store: store.inbox, sources });
}

describe.skipIf(needs.skipReason)(`SQS end to end on ${needs.via.sqs}`, () => {
  it('delivers 240 rows of 8 keys through a FIFO queue in per-key insert order, with retries in between', async () => {
    // Prepare
    const queueUrl = await queue('order', true);
    const keys = Array.from({ length: 8 }, (_, k) => `customer-${k}`);
    const rows = [];
    for (let n = 0; n < 30; n++) {
      for (const key of keys)
        rows.push({ topic: 'orders.changed', key, payload: { key, n }, maxAttempts: 5 });
    }
    await db.store.outbox.insert(rows);
    // Every fourth row fails its first attempt (as a throttled entry would): its key waits for the retry.
    let failedFirst = 0;
    const flakySqs: PublisherFactory = (name, options) => {
      const real = sqsPublisherFactory(name, options);
      return {
        publish(message, signal) {
          const { n } = message.payload as { n: number };
          if (message.attempt === 0 && n % 4 === 1) {
            failedFirst += 1;
            return Promise.resolve({ kind: 'retry', error: 'injected: throttled' });
          }
          return real.publish(message, signal);
        },
        close: () => real.close(),
      };
    };
    const poller = brokerPoller(
      db.store,
      { type: 'sqs', queueUrl, endpoint, region: 'us-east-1' },
      flakySqs,
      outbox,
    );
    try {
      // Act: one claimable row per key at a time, so each drain round sends up to 8 rows in one request.
      let sent = 0;
      for (let round = 0; round < 400 && sent < rows.length; round++) {
        const report = await poller.drain();
        sent += report.sent;
        if (report.sent === 0) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const received = await drainQueue(queueUrl, rows.length);
      // Assess
      expect(sent).toBe(rows.length);
      expect(failedFirst).toBe(8 * 8);
      expect(received).toHaveLength(rows.length);
      const seen = new Map<string, number[]>();
      for (const message of received) {
        const { key, n } = JSON.parse(message.Body ?? '') as { key: string; n: number };
        expect(message.Attributes?.MessageGroupId).toBe(key);
        seen.set(key, [...(seen.get(key) ?? []), n]);
      }
      for (const key of keys) expect(seen.get(key)).toEqual(Array.from({ length: 30 }, (_, n) => n));
      const stored = await db.outboxRows();
      expect(
        stored.filter((r) => r.topic === 'orders.changed' && r.state === MessageState.Sent),
      ).toHaveLength(rows.length);
    } finally {
      await poller.close();
    }
  });

  it('retries a row over the size limit while it has attempts left, and dead-letters it at its last, with the reason', async () => {
    // Prepare: the specification's state table sends a row dead only when no attempt remains (or no route, or a
    // transform), however sure the publisher is that it can never go.
    const queueUrl = await queue('size');
    // SQS takes messages of up to 1 MiB (1,048,576 bytes), the publisher's default maxMessageBytes.
    const blob = 'z'.repeat(1_048_576);
    const [big, last, small] = await db.store.outbox.insert([
      { topic: 'orders.big', key: 'size-1', payload: { blob }, maxAttempts: 5 },
      { topic: 'orders.big', key: 'size-3', payload: { blob }, maxAttempts: 1 },
      { topic: 'orders.small', key: 'size-2', payload: { ok: true }, maxAttempts: 5 },
    ]);
    const poller = brokerPoller(
      db.store,
      { type: 'sqs', queueUrl, endpoint, region: 'us-east-1' },
      sqsPublisherFactory,
      outbox,
    );
    try {
      // Act
      const report = await poller.drain();
      const rows = await Promise.all([big, last, small].map((id) => db.store.outbox.get(id ?? '')));
      // Assess
      expect(report).toMatchObject({ sent: 1, dead: 1, retried: 1 });
      const tooBig =
        /^the message is 1048\d{3} bytes \(payload 1048\d{3} \+ attributes \d+\); SQS destination "events" accepts at most 1048576 bytes per message, so it can never be sent$/;
      expect(rows[0]).toMatchObject({ state: MessageState.Pending, attempt: 1 });
      expect(rows[0]?.lastError).toMatch(tooBig);
      expect(rows[1]).toMatchObject({ state: MessageState.Dead, attempt: 1 });
      expect(rows[1]?.lastError).toMatch(tooBig);
      expect(rows[2]).toMatchObject({ state: MessageState.Sent });
    } finally {
      await poller.close();
    }
  });

  it('builds the publisher from the validated configuration (default credential chain, endpoint)', async () => {
    // Prepare
    const queueUrl = await queue('config');
    const config = parseConfig({
      destinations: { jobs: { type: 'sqs', queueUrl, endpoint, maxMessageBytes: 4096 } },
      routes: [{ match: '#', destination: 'jobs' }],
    });
    const publishers = createPublishers(config.destinations, LOCAL_PUBLISHER_FACTORIES);
    try {
      // Act
      const publisher = publishers.get('jobs');
      const sent = await publisher?.publish({
        id: '77',
        topic: 'jobs.run',
        key: null,
        payload: { job: 1 },
        headers: {},
        attempt: 0,
      });
      const big = await publisher?.publish({
        id: '78',
        topic: 'jobs.run',
        key: null,
        payload: { blob: 'b'.repeat(5000) },
        headers: {},
        attempt: 0,
      });
      const [message] = await drainQueue(queueUrl, 1);
      // Assess
      expect(config.destinations.jobs).toMatchObject({
        type: 'sqs',
        messageGroupId: 'queuebox',
        maxMessageBytes: 4096,
      });
      expect(sent).toEqual({ kind: 'sent' });
      expect(big?.kind).toBe('dead');
      expect(big?.kind === 'dead' && big.error).toContain('accepts at most 4096 bytes per message');
      expect(message?.MessageAttributes?.['message-id']?.StringValue).toBe('77');
    } finally {
      await publishers.close();
    }
  });

  it('consumes a queue into the inbox: stored, duplicate, not JSON → dead, rejected → dead; all deleted', async () => {
    // Prepare
    const queueUrl = await queue('in');
    const id = `m-${Date.now()}`;
    const attr = (value: string) => ({ 'message-id': { DataType: 'String', StringValue: value } });
    await client.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: [
          {
            Id: 'a',
            MessageBody: JSON.stringify({ kind: 'order.created', order: 'o-1' }),
            MessageAttributes: attr(id),
          },
          {
            Id: 'b',
            MessageBody: JSON.stringify({ kind: 'order.created', order: 'o-1' }),
            MessageAttributes: attr(id),
          },
          { Id: 'c', MessageBody: 'not json at all', MessageAttributes: attr(`poison-${id}`) },
          {
            Id: 'd',
            MessageBody: JSON.stringify({ kind: 'test', order: 'o-2' }),
            MessageAttributes: attr(`test-${id}`),
          },
        ],
      }),
    );
    const consumer = createSqsConsumer({
      source: 'orders-in',
      queueUrl,
      client,
      waitTimeSeconds: 1,
      ingestion: ingestionOf(db.store),
    });
    try {
      // Act
      let received = 0;
      const totals = { stored: 0, duplicate: 0, dead: 0 };
      for (let i = 0; i < 10 && received < 4; i++) {
        const report = await consumer.receive();
        expect(report.error).toBeUndefined();
        received += report.received;
        totals.stored += report.stored;
        totals.duplicate += report.duplicate;
        totals.dead += report.dead;
      }
      const rows = await db.inboxRows('orders-in');
      // Assess
      expect(totals).toEqual({ stored: 1, duplicate: 1, dead: 2 });
      expect(await visibleCount(queueUrl)).toBe(0);
      const byKey = new Map(rows.map((r) => [r.idempotencyKey, r]));
      expect(byKey.get(id)).toMatchObject({
        state: MessageState.Pending,
        eventType: 'order.created',
        aggregateId: 'o-1',
        payload: { kind: 'order.created', order: 'o-1' },
      });
      expect(byKey.get(`poison-${id}`)).toMatchObject({
        state: MessageState.Dead,
        payload: 'not json at all',
      });
      expect(byKey.get(`test-${id}`)).toMatchObject({
        state: MessageState.Dead,
        lastError: 'The transform rejected the message: test orders are not stored',
      });
    } finally {
      await consumer.close();
    }
  });

  it('run() keeps short-polling an empty queue without spinning, stores what arrives, and stops when aborted', async () => {
    // Prepare
    const queueUrl = await queue('run');
    let receives = 0;
    const stored: string[] = [];
    const consumer = createSqsConsumer({
      source: 'orders-in',
      queueUrl,
      client,
      waitTimeSeconds: 0,
      ingestion: ingestionOf(db.store),
      onIngested: (result) => stored.push(result.status),
    });
    const abort = new AbortController();
    const originalSend = client.send.bind(client);
    client.send = ((command: { constructor: { name: string } }, ...rest: unknown[]) => {
      if (command.constructor.name === 'ReceiveMessageCommand') receives += 1;
      return (originalSend as (...args: unknown[]) => unknown)(command, ...rest);
    }) as typeof client.send;
    try {
      // Act
      const running = consumer.run(abort.signal, { idleMs: 200 });
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const idleReceives = receives;
      const idleListeners = getEventListeners(abort.signal, 'abort').length;
      await client.send(
        new SendMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: [{ Id: 'a', MessageBody: JSON.stringify({ kind: 'order.run', order: 'o-9' }) }],
        }),
      );
      for (let i = 0; i < 50 && stored.length === 0; i++) await new Promise((r) => setTimeout(r, 100));
      abort.abort();
      await running;
      // Assess: a receive per 200 ms pause while idle (5 in the second, fewer on a slow machine), not a spin of hundreds.
      expect(idleReceives).toBeGreaterThanOrEqual(1);
      expect(idleReceives).toBeLessThanOrEqual(10);
      // The idle pauses left no listeners behind on the runtime's signal (one per pause did, for days).
      expect(idleListeners).toBeLessThanOrEqual(2);
      expect(stored).toEqual(['stored']);
      expect(await visibleCount(queueUrl)).toBe(0);
    } finally {
      client.send = originalSend;
      await consumer.close();
    }
  });

  it('gives the messages held while the database is down back when its receive stops; they are stored once the database answers', async () => {
    // Prepare
    const queueUrl = await queue('outage', true);
    const key = `fifo-${Date.now()}`;
    await client.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: [1, 2].map((n) => ({
          Id: `e${n}`,
          MessageBody: JSON.stringify({ kind: 'order.paid', order: `o-${n}` }),
          MessageGroupId: 'g',
          MessageDeduplicationId: `${key}-${n}`,
          MessageAttributes: { 'message-id': { DataType: 'String', StringValue: `${key}-${n}` } },
        })),
      }),
    );
    const down = await openPostgresStore({ url: deadStoreUrl(), schema: db.schema });
    const failures: unknown[] = [];
    const broken = createSqsConsumer({
      source: 'orders-in',
      queueUrl,
      client,
      waitTimeSeconds: 1,
      retryDelaySeconds: 1,
      ingestion: ingestionOf(down),
      onError: (error) => failures.push(error),
    });
    const healthy = createSqsConsumer({
      source: 'orders-in',
      queueUrl,
      client,
      waitTimeSeconds: 2,
      ingestion: ingestionOf(db.store),
    });
    try {
      // Act: the receive holds the messages through the outage until its signal aborts, then gives them back.
      const whileDown = await broken.receive(AbortSignal.timeout(1500));
      const countWhileDown = await visibleCount(queueUrl);
      let stored = 0;
      for (let i = 0; i < 10 && stored < 2; i++) stored += (await healthy.receive()).stored;
      // Assess
      expect(whileDown).toMatchObject({ received: 2, stored: 0, returned: 2 });
      expect(whileDown.error).toBeInstanceOf(StoreUnavailableError);
      expect(failures[0]).toBeInstanceOf(StoreUnavailableError);
      expect(countWhileDown).toBe(2);
      expect(stored).toBe(2);
      const rows = (await db.inboxRows('orders-in')).filter((r) => r.idempotencyKey.startsWith(key));
      expect(rows.map((r) => r.aggregateId)).toEqual(['o-1', 'o-2']);
      expect(await visibleCount(queueUrl)).toBe(0);
    } finally {
      await broken.close();
      await healthy.close();
      await down.close();
    }
  });
  it('holds the messages through an 8 s database outage (visibility extended, nothing received again) instead of spending the redrive budget; all stored, none dead-lettered', async () => {
    // Prepare: a visibility timeout of 2 s and maxReceiveCount 3. Giving the messages back each second would send
    // them to the dead-letter queue within a few seconds of the outage.
    const { queueUrl, dlq } = await queueWithDlq('hold', 2, 3);
    const key = `hold-${Date.now()}`;
    await sendNumbered(queueUrl, 10, key);
    const outage = await outageIngestion(sources);
    const consumerClient = testSqsClient(endpoint);
    /** How often each message was received by the consumer, and how many visibility changes it sent. */
    const receivedTimes = new Map<string, number>();
    let visibilityChanges = 0;
    consumerClient.middlewareStack.add(
      (next, context) => async (args) => {
        const answer = await next(args);
        if (context.commandName === 'ReceiveMessageCommand') {
          const output = answer.output as { Messages?: Message[] };
          for (const m of output.Messages ?? []) {
            receivedTimes.set(m.MessageId ?? '', (receivedTimes.get(m.MessageId ?? '') ?? 0) + 1);
          }
        }
        if (context.commandName === 'ChangeMessageVisibilityBatchCommand') visibilityChanges += 1;
        return answer;
      },
      { step: 'initialize', name: 'countReceives' },
    );
    const errors: string[] = [];
    const consumer = createSqsConsumer({
      source: 'orders-in',
      queueUrl,
      client: consumerClient,
      waitTimeSeconds: 1,
      // Faster than the defaults (1 s doubling to 30 s) to keep the test short. The held visibility of 4 s is
      // renewed every 1.3 s: the messages stay in flight through the 8 s only because it is renewed.
      unavailableRetryMs: { first: 500, max: 2000 },
      heldVisibilitySeconds: 4,
      ingestion: outage.ingestion,
      onError: (_error, { during }) => errors.push(during),
    });
    const abort = new AbortController();
    const running = consumer.run(abort.signal);
    try {
      // Act: the database is down for 8 s; the queue is looked at while the messages are held.
      const start = Date.now();
      await eventually('the first failed ingestion', () => (outage.state.failedCalls > 0 ? true : undefined));
      const during: { visible: number; inFlight: number }[] = [];
      while (Date.now() - start < 8000) {
        await sleep(1000);
        during.push(await queueCounts(queueUrl));
      }
      outage.state.up = true;
      // Stored and deleted, or moved to the dead-letter queue.
      await eventually(
        'an empty queue',
        async () => {
          const counts = await queueCounts(queueUrl);
          return counts.visible + counts.inFlight === 0 ? true : undefined;
        },
        15_000,
      );
      abort.abort();
      await running;
      const rows = (await db.inboxRows('orders-in')).filter((r) => r.idempotencyKey.startsWith(key));
      // Assess: none in the dead-letter queue; every message stored once, received once.
      expect(await queueCounts(dlq)).toEqual({ visible: 0, inFlight: 0 });
      expect(rows.map((r) => r.aggregateId).sort()).toEqual(
        Array.from({ length: 10 }, (_, n) => `o-${n}`).sort(),
      );
      expect([...receivedTimes.values()]).toEqual(Array.from({ length: 10 }, () => 1));
      // Held in flight all along: never visible while the database was down, though the queue's 2 s ran out.
      expect(during.every((c) => c.visible === 0 && c.inFlight === 10)).toBe(true);
      expect(visibilityChanges).toBeGreaterThanOrEqual(4);
      // Retried with growing pauses (0.5, 1, 2, 2, … s), not tried in a loop: about 6 failed tries in 8 s.
      expect(outage.state.failedCalls).toBeGreaterThanOrEqual(3);
      expect(outage.state.failedCalls).toBeLessThanOrEqual(12);
      expect(errors.filter((d) => d !== 'ingest')).toEqual([]);
    } finally {
      abort.abort();
      await running;
      await consumer.close();
      consumerClient.destroy();
      await outage.close();
    }
  }, 40_000);

  it('deletes what it stored between two outages of one batch at once: nothing received again meanwhile', async () => {
    // Prepare: the database flaps: down for the first try, up for the next two, then down for 6 s. The held
    // visibility is 2 s: a stored message left undeleted would be visible again well within the second outage.
    const { queueUrl, dlq } = await queueWithDlq('flap', 30, 5);
    const key = `flap-${Date.now()}`;
    await sendNumbered(queueUrl, 3, key);
    const outage = await outageIngestion(sources);
    let calls = 0;
    let secondUntil = 0;
    const flapping: BrokerIngestionPort = {
      async ingest(source, message) {
        calls += 1;
        outage.state.up = calls === 2 || calls === 3 || (secondUntil > 0 && Date.now() >= secondUntil);
        if (calls === 4) secondUntil = Date.now() + 6000;
        return outage.ingestion.ingest(source, message);
      },
    };
    const consumer = createSqsConsumer({
      source: 'orders-in',
      queueUrl,
      client,
      waitTimeSeconds: 1,
      unavailableRetryMs: { first: 200, max: 1000 },
      heldVisibilitySeconds: 2,
      ingestion: flapping,
    });
    try {
      // Act: one receive through both outages, while another replica polls the queue once the receive holds the
      // batch (polling from the start, the other replica could take the batch first; and a receive that ended
      // without it ends the polling too, rather than leave it waiting for an outage that never comes).
      let settled = false;
      const receiving = consumer.receive().finally(() => {
        settled = true;
      });
      while (calls === 0 && !settled) await new Promise((resolve) => setTimeout(resolve, 20));
      const other = testSqsClient(endpoint);
      const seenByOther: string[] = [];
      try {
        while (!settled || (secondUntil !== 0 && Date.now() < secondUntil + 500)) {
          const answer = await other.send(
            new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
          );
          for (const m of answer.Messages ?? []) seenByOther.push(m.Body ?? '');
        }
      } finally {
        other.destroy();
      }
      const report = await receiving;
      // Assess: the two messages stored between the outages were deleted at once, never seen again
      expect(seenByOther).toEqual([]);
      expect(report).toMatchObject({ stored: 3 });
      expect(report.error).toBeUndefined();
      const rows = (await db.inboxRows('orders-in')).filter((r) => r.idempotencyKey.startsWith(key));
      expect(rows).toHaveLength(3);
      expect(await queueCounts(queueUrl)).toEqual({ visible: 0, inFlight: 0 });
      expect(await queueCounts(dlq)).toEqual({ visible: 0, inFlight: 0 });
    } finally {
      await consumer.close();
      await outage.close();
    }
  }, 40_000);

  it('keeps a FIFO batch held through an outage in group order and gives it back at once when run() stops', async () => {
    // Prepare: two groups, interleaved.
    const queueUrl = await queue('hold-fifo', true, 30);
    const key = `hfifo-${Date.now()}`;
    await client.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: Array.from({ length: 6 }, (_, n) => ({
          Id: `e${n}`,
          MessageBody: JSON.stringify({ kind: 'order.held', order: `g${n % 2}-${Math.floor(n / 2)}` }),
          MessageGroupId: `g${n % 2}`,
          MessageDeduplicationId: `${key}-${n}`,
          MessageAttributes: { 'message-id': { DataType: 'String', StringValue: `${key}-${n}` } },
        })),
      }),
    );
    const outage = await outageIngestion(sources);
    const stopped = createSqsConsumer({
      source: 'orders-in',
      queueUrl,
      client,
      waitTimeSeconds: 1,
      unavailableRetryMs: { first: 300, max: 300 },
      ingestion: outage.ingestion,
    });
    const abort = new AbortController();
    try {
      // Act: a run that stops during the outage, then one after it.
      const running = stopped.run(abort.signal);
      await eventually('two failed tries', () => (outage.state.failedCalls >= 2 ? true : undefined));
      const heldCounts = await queueCounts(queueUrl);
      abort.abort();
      await running;
      const afterStop = await queueCounts(queueUrl);
      outage.state.up = true;
      const resumed = createSqsConsumer({
        source: 'orders-in',
        queueUrl,
        client,
        waitTimeSeconds: 1,
        ingestion: outage.ingestion,
      });
      let stored = 0;
      for (let i = 0; i < 15 && stored < 6; i++) stored += (await resumed.receive()).stored;
      await resumed.close();
      // Assess: in flight while held; visible at once after the stop (not after the queue's 30 s); stored in group order.
      expect(heldCounts.inFlight).toBeGreaterThan(0);
      expect(afterStop).toEqual({ visible: heldCounts.inFlight + heldCounts.visible, inFlight: 0 });
      expect(stored).toBe(6);
      const rows = (await db.inboxRows('orders-in')).filter((r) => r.idempotencyKey.startsWith(key));
      for (const group of ['g0', 'g1']) {
        expect(rows.map((r) => r.aggregateId).filter((a) => a?.startsWith(group))).toEqual([
          `${group}-0`,
          `${group}-1`,
          `${group}-2`,
        ]);
      }
    } finally {
      abort.abort();
      await stopped.close();
      await outage.close();
    }
  });

  it('Lambda handler in a 12 s database outage: each receive doubles the visibility, so maxReceiveCount 5 outlasts it; all stored, none dead-lettered', async () => {
    // Prepare: visibility timeout 1 s, maxReceiveCount 5. Handing the records back with the queue's own 1 s (what
    // batchItemFailures alone does) spends the 5 receives in about 5 s; doubled each time (1, 2, 4, 8 s) the fifth
    // receive comes about 15 s after the first.
    const { queueUrl, dlq } = await queueWithDlq('lambda-hold', 1, 5);
    const arn = await queueArn(queueUrl);
    const key = `lhold-${Date.now()}`;
    await sendNumbered(queueUrl, 10, key);
    const handlerSources = {
      'orders-in': { ...sources['orders-in'], queueUrl },
    } as unknown as Sources & Record<string, { type: string; queueUrl: string }>;
    const outage = await outageIngestion(handlerSources);
    const visibilityErrors: unknown[] = [];
    const handle = createSqsEventHandler({
      ingestion: outage.ingestion,
      sources: handlerSources,
      sqsClient: client,
      onVisibilityError: (error) => visibilityErrors.push(error),
    });
    /** Each invocation: when, and the receive counts of its records. */
    const invocations: { at: number; receiveCounts: number[]; failed: number; keptAway: number }[] = [];
    const start = Date.now();
    try {
      // Act: a stand-in for the event source mapping (receive ≤ 10, invoke, delete what was not reported failed;
      // the failed ones are left to their visibility timeout), while the database is down for 12 s.
      let stored = 0;
      while (stored < 10 && Date.now() - start < 28_000) {
        if (!outage.state.up && Date.now() - start >= 12_000) outage.state.up = true;
        const answer = await client.send(
          new ReceiveMessageCommand({
            QueueUrl: queueUrl,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 1,
            MessageAttributeNames: ['All'],
            MessageSystemAttributeNames: ['All'],
          }),
        );
        const messages = answer.Messages ?? [];
        if (messages.length === 0) continue;
        const event: SQSEvent = {
          Records: messages.map((m) => ({
            messageId: m.MessageId ?? '',
            receiptHandle: m.ReceiptHandle ?? '',
            body: m.Body ?? '',
            attributes: m.Attributes as unknown as SQSRecord['attributes'],
            messageAttributes: Object.fromEntries(
              Object.entries(m.MessageAttributes ?? {}).map(([name, value]) => [
                name,
                { dataType: value.DataType ?? 'String', stringValue: value.StringValue },
              ]),
            ),
            md5OfBody: m.MD5OfBody ?? '',
            eventSource: 'aws:sqs',
            eventSourceARN: arn,
            awsRegion: 'us-east-1',
          })),
        };
        const report = await handle(event);
        invocations.push({
          at: Date.now() - start,
          receiveCounts: messages.map((m) => Number(m.Attributes?.ApproximateReceiveCount)),
          failed: report.failed,
          keptAway: report.keptAway,
        });
        stored += report.stored + report.duplicate;
        const failed = new Set(report.response.batchItemFailures.map((f) => f.itemIdentifier));
        const done = messages.filter((m) => !failed.has(m.MessageId ?? ''));
        if (done.length > 0) {
          await client.send(
            new DeleteMessageBatchCommand({
              QueueUrl: queueUrl,
              Entries: done.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle })),
            }),
          );
        }
      }
      const rows = (await db.inboxRows('orders-in')).filter((r) => r.idempotencyKey.startsWith(key));
      // Assess: all stored, nothing dead-lettered, the queue empty.
      expect(rows).toHaveLength(10);
      expect(await queueCounts(dlq)).toEqual({ visible: 0, inFlight: 0 });
      expect(await queueCounts(queueUrl)).toEqual({ visible: 0, inFlight: 0 });
      expect(visibilityErrors).toEqual([]);
      // Every failed record had its visibility made longer.
      for (const i of invocations) expect(i.keptAway).toBe(i.failed);
      // Each receive n of a record kept it away for 2^(n−1) s: it came again no sooner. (Looser checks would pass
      // with the queue's 1 s too; this one does not.)
      const firstSeen = invocations.filter((i) => i.receiveCounts.includes(1))[0];
      expect(firstSeen).toBeDefined();
      for (let n = 2; n <= 5; n++) {
        const earlier = invocations.find((i) => i.receiveCounts.includes(n - 1));
        const later = invocations.find((i) => i.receiveCounts.includes(n));
        if (earlier === undefined || later === undefined) continue;
        expect(later.at - earlier.at).toBeGreaterThanOrEqual(2 ** (n - 2) * 1000 - 300);
      }
      // About 5 invocations during 12 s of outage, not one a second.
      expect(Math.max(...invocations.flatMap((i) => i.receiveCounts))).toBeLessThanOrEqual(5);
      expect(invocations.length).toBeLessThanOrEqual(10);
    } finally {
      await outage.close();
    }
  }, 40_000);
});

function aRecord(overrides: Partial<SQSRecord> & { body: string }, queueArn: string): SQSRecord {
  const messageId = overrides.messageId ?? crypto.randomUUID();
  return {
    messageId,
    receiptHandle: `rh-${messageId}`,
    attributes: {
      ApproximateReceiveCount: '1',
      SentTimestamp: String(Date.now()),
      SenderId: 'AIDAEXAMPLE',
      ApproximateFirstReceiveTimestamp: String(Date.now()),
      ...(overrides.attributes ?? {}),
    },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: 'eu-west-1',
    ...overrides,
  };
}

describe.skipIf(lambdaEvent.skipReason)('SQS Lambda event (ReportBatchItemFailures) into PostgreSQL', () => {
  const lambdaSources = {
    'orders-in': {
      ...sources['orders-in'],
      queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/orders-in',
    },
    'fifo-in': {
      ...sources['orders-in'],
      queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/orders-in.fifo',
      idempotencyKey: undefined,
    },
  } as unknown as Sources & Record<string, { type: string; queueUrl: string }>;

  /** Fails records whose body says so, like a database that goes away for one statement. */
  function flaky(store: Store): BrokerIngestionPort {
    const real = createBrokerIngestion({ store: store.inbox, sources: lambdaSources });
    return {
      ingest: (source, message) =>
        Buffer.from(message.body).toString().includes('"fail"')
          ? Promise.reject(new Error('ingestion failed for this record'))
          : real.ingest(source, message),
    };
  }

  it('standard queue: a poison body becomes a dead row, a failing record alone is handed back', async () => {
    // Prepare
    const arn = 'arn:aws:sqs:eu-west-1:123456789012:orders-in';
    const handle = createSqsEventHandler({ ingestion: flaky(db.store), sources: lambdaSources });
    const run = Date.now();
    const withId = (body: string, id: string) =>
      aRecord({ body, messageAttributes: { 'message-id': { dataType: 'String', stringValue: id } } }, arn);
    const records = [
      withId(JSON.stringify({ kind: 'a', order: 'o-1' }), `s1-${run}`),
      withId('{ not json', `s2-${run}`),
      aRecord({ body: JSON.stringify({ kind: 'fail' }) }, arn),
      withId(JSON.stringify({ kind: 'b', order: 'o-2' }), `s4-${run}`),
      // JSON that PostgreSQL's jsonb cannot hold (an escaped NUL): a dead row too, not a failed batch.
      withId('{"kind":"c","note":"\\u0000"}', `s5-${run}`),
    ];
    // Act
    const report = await handle({ Records: records } satisfies SQSEvent);
    // Assess
    expect(report).toMatchObject({ stored: 2, dead: 2, duplicate: 0, failed: 1 });
    expect(report.response).toEqual({ batchItemFailures: [{ itemIdentifier: records[2]?.messageId }] });
    const rows = await db.inboxRows('orders-in');
    const dead = rows.find((r) => r.idempotencyKey === `s2-${run}`);
    expect(dead).toMatchObject({ state: MessageState.Dead, payload: '{ not json' });
  });

  it('FIFO queue: keys from the SQS message id, not the 5-minute deduplication id; after a failure the rest of the batch is handed back untried', async () => {
    // Prepare
    const arn = 'arn:aws:sqs:eu-west-1:123456789012:orders-in.fifo';
    const handle = createSqsEventHandler({ ingestion: flaky(db.store), sources: lambdaSources });
    const run = Date.now();
    const fifo = (n: number, body: object) =>
      aRecord(
        {
          body: JSON.stringify(body),
          attributes: {
            MessageGroupId: 'g-1',
            MessageDeduplicationId: `d${n}-${run}`,
            SequenceNumber: String(n),
          } as SQSRecord['attributes'],
        },
        arn,
      );
    const records = [
      fifo(1, { kind: 'x', order: 'o-1' }),
      fifo(2, { kind: 'fail' }),
      fifo(3, { kind: 'y', order: 'o-1' }),
    ];
    // Act
    const report = await handle({ Records: records });
    // Assess
    expect(report).toMatchObject({ stored: 1, failed: 2 });
    expect(report.response.batchItemFailures.map((f) => f.itemIdentifier)).toEqual([
      records[1]?.messageId,
      records[2]?.messageId,
    ]);
    const rows = await db.inboxRows('fifo-in');
    expect(rows.map((r) => [r.idempotencyKey, r.headers['sqs-message-group-id']])).toEqual([
      [records[0]?.messageId, 'g-1'],
    ]);
  });
});
