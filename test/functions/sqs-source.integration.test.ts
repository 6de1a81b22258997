/**
 * functions/sqs-source.ts with real-shaped SQS events (as an SQS event source mapping delivers them) against the real
 * PostgreSQL: messages stored under the SQS source of their queue, a poison body as a dead row, redeliveries as
 * duplicates, the relay woken, and `batchItemFailures` when the database is unavailable.
 */
import { createHash } from 'node:crypto';
import { SQSClient } from '@aws-sdk/client-sqs';

import { StoreUnavailableError } from '@queuebox/core';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import type { SQSEvent, SQSRecord } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler as createMigrate } from '../../functions/migrate.ts';
import { createHandler as createSqsSource } from '../../functions/sqs-source.ts';
import { cleanup } from '../local/support.ts';
import {
  aLambdaContext,
  anInvokeRecorder,
  RecordingMetrics,
  type TestShell,
  testShell,
  writeConfigFile,
} from './support.ts';

const needs = await requireServices('function tests: sqs-source', ['postgres']);

const RELAY = 'queuebox-test-RelayTick';
const QUEUE_ARN = 'arn:aws:sqs:eu-west-1:123456789012:orders-in';

/** One SQS record as the event source mapping delivers it. */
function anSqsRecord(n: number, body: string, attributes: Record<string, string> = {}): SQSRecord {
  return {
    messageId: `0f1e2d3c-0000-4000-8000-00000000000${n}`,
    receiptHandle: `AQEB${n}receipt`,
    body,
    attributes: {
      ApproximateReceiveCount: '1',
      SentTimestamp: '1796140000000',
      SenderId: 'AROAEXAMPLE:queuebox',
      ApproximateFirstReceiveTimestamp: '1796140000100',
    },
    messageAttributes: Object.fromEntries(
      Object.entries(attributes).map(([name, value]) => [
        name,
        { stringValue: value, stringListValues: [], binaryListValues: [], dataType: 'String' },
      ]),
    ),
    md5OfBody: 'ignored',
    eventSource: 'aws:sqs',
    eventSourceARN: QUEUE_ARN,
    awsRegion: 'eu-west-1',
  };
}

describe.skipIf(needs.skipReason)('sqs-source function', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'functions_sqs', 1);
  const recorder = anInvokeRecorder();
  const shells: TestShell[] = [];
  let configFile: string;
  const shell = (extra: Parameters<typeof testShell>[1] = {}) => {
    const options = testShell(configFile, {
      invoker: recorder,
      env: { RELAY_TICK_FUNCTION_NAME: RELAY },
      ...extra,
    });
    shells.push(options);
    return options;
  };

  beforeAll(async () => {
    configFile = await writeConfigFile(`database:
  url: ${JSON.stringify(needs.url.postgres)}
  schema: ${schema.name}
  poolSize: 2
sources:
  orders-in:
    type: sqs
    queueUrl: https://sqs.eu-west-1.amazonaws.com/123456789012/orders-in
    idempotencyKey: { header: message-id }
    eventTypePath: $.kind
    topic: "orders.{{ eventType }}"
  jobs-fifo:
    type: sqs
    queueUrl: https://sqs.eu-west-1.amazonaws.com/123456789012/jobs.fifo
    topic: jobs
`);
    await createMigrate(shell())(undefined, aLambdaContext());
  });

  afterAll(async () => {
    for (const options of shells) for (const cache of options.caches) await cache.close();
    await cleanup();
  });

  const rows = async () =>
    (
      await pool.query(
        `SELECT idempotency_key, event_type, state, payload FROM "${schema.name}".inbox WHERE source = 'orders-in' ORDER BY id`,
      )
    ).rows;

  it('stores each message, a poison body as a dead row (publishing the inbox gauges), answers no failures and wakes the relay', async () => {
    const metrics = new RecordingMetrics();
    const sqsSource = createSqsSource(shell({ metrics }));
    const event: SQSEvent = {
      Records: [
        anSqsRecord(1, JSON.stringify({ kind: 'created', order: 1 }), { 'message-id': 'out-1' }),
        anSqsRecord(2, 'not json at all', { 'message-id': 'out-2' }),
      ],
    };

    const first = await sqsSource(event, aLambdaContext());
    const publishedByFirst = [...metrics.published];
    const redelivered = await sqsSource(event, aLambdaContext());

    expect(first).toEqual({ batchItemFailures: [] });
    // The dead row moved the inbox DeadRows gauge at once (its alarm hears it within minutes); Accepted and Dead
    // moved, Duplicate did not and is not emitted (a billed custom metric saying 0).
    expect(publishedByFirst).toEqual([
      {
        metrics: { DeadRows: 1, OldestPendingAgeSeconds: expect.any(Number) },
        dimensions: { Table: 'inbox', service: 'queuebox-test' },
      },
      { metrics: { Accepted: 1, Dead: 1 }, dimensions: { service: 'queuebox-test' } },
    ]);
    // The redelivery stored only duplicates: no gauge.
    expect(metrics.gauges('inbox')).toHaveLength(1);
    expect(redelivered).toEqual({ batchItemFailures: [] });
    expect(recorder.invokes).toEqual([{ functionName: RELAY, payload: { trigger: 'wakeup' } }]);
    expect(await rows()).toEqual([
      expect.objectContaining({ idempotency_key: 'out-1', event_type: 'created', state: 'pending' }),
      expect.objectContaining({ idempotency_key: 'out-2', state: 'dead', payload: 'not json at all' }),
    ]);
  });

  it('keeps two FIFO messages with one content-based deduplication id, sent 10 minutes apart, as two rows', async () => {
    const sqsSource = createSqsSource(shell());
    const body = JSON.stringify({ ping: true });
    // Content-based deduplication: the id is the body's SHA-256, the same for both; SQS delivered both, as its
    // deduplication window is 5 minutes.
    const contentHash = createHash('sha256').update(body).digest('hex');
    const fifo = (n: number, sentAt: number): SQSRecord => {
      const record = anSqsRecord(n, body);
      return {
        ...record,
        eventSourceARN: 'arn:aws:sqs:eu-west-1:123456789012:jobs.fifo',
        attributes: {
          ...record.attributes,
          SentTimestamp: String(sentAt),
          MessageGroupId: 'g',
          MessageDeduplicationId: contentHash,
          SequenceNumber: `1862769876870400000${n}`,
        },
      };
    };

    const first = await sqsSource({ Records: [fifo(7, 1796140000000)] }, aLambdaContext());
    const second = await sqsSource({ Records: [fifo(8, 1796140600000)] }, aLambdaContext());

    expect([first, second]).toEqual([{ batchItemFailures: [] }, { batchItemFailures: [] }]);
    const stored = await pool.query(
      `SELECT idempotency_key FROM "${schema.name}".inbox WHERE source = 'jobs-fifo' ORDER BY id`,
    );
    expect(stored.rows.map((r) => r.idempotency_key)).toEqual([fifo(7, 0).messageId, fifo(8, 0).messageId]);
  });

  it('hands every message back through batchItemFailures while the database is unavailable, counting IngestFailures', async () => {
    const metrics = new RecordingMetrics();
    const down = testShell(configFile, {
      metrics,
      invoker: recorder,
      openStore: async () => {
        const { openPostgresStore } = await import('@queuebox/store-postgres');
        return openPostgresStore({ url: 'postgres://nobody@127.0.0.1:9/none', schema: schema.name });
      },
    });
    shells.push(down);
    const warnings: unknown[][] = [];
    if (down.logger) {
      down.logger.warn = ((message: string, extra: unknown) => {
        warnings.push([message, extra]);
      }) as typeof down.logger.warn;
    }
    // The records handed back in an outage get a longer visibility timeout; here SQS cannot be reached (a port
    // nothing listens on), so that fails and they are handed back as before, nothing lost.
    const unreachableSqs = new SQSClient({
      region: 'eu-west-1',
      endpoint: 'http://127.0.0.1:1',
      credentials: { accessKeyId: 'AKIDQUEUEBOXTEST', secretAccessKey: 'queuebox-test-secret' },
      maxAttempts: 1,
    });
    const sqsSource = createSqsSource(Object.assign(down, { sqsClient: unreachableSqs }));
    const records = [
      anSqsRecord(3, JSON.stringify({ kind: 'paid', order: 2 }), { 'message-id': 'out-3' }),
      anSqsRecord(4, JSON.stringify({ kind: 'paid', order: 3 }), { 'message-id': 'out-4' }),
    ];

    const answer = await sqsSource({ Records: records }, aLambdaContext()).finally(() =>
      unreachableSqs.destroy(),
    );

    expect(answer).toEqual({
      batchItemFailures: records.map((r) => ({ itemIdentifier: r.messageId })),
    });
    expect(warnings).toEqual([
      [
        'sqs messages handed back in a store outage keep the queue visibility timeout; they return sooner',
        expect.objectContaining({ queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/orders-in' }),
      ],
    ]);
    // The invocation succeeded (Lambda's Errors stays 0): the counter is what the ingest-failures alarm hears.
    expect(metrics.published).toEqual([
      { metrics: { IngestFailures: 2 }, dimensions: { service: 'queuebox-test' } },
    ]);
    expect((await rows()).map((r) => r.idempotency_key)).toEqual(['out-1', 'out-2']);
  });

  it('keeps a stored batch stored (no batchItemFailures) when publishing the gauges after it fails', async () => {
    const warnings: unknown[][] = [];
    const failing = testShell(configFile, {
      invoker: recorder,
      // The real store, whose dead-row count (the gauges' read) fails as a timed-out statement would.
      openStore: async () => {
        const { openPostgresStore } = await import('@queuebox/store-postgres');
        const store = await openPostgresStore({ url: needs.url.postgres, schema: schema.name });
        const deadRows = () => Promise.reject(new StoreUnavailableError('dead-row count timed out (test)'));
        return {
          ...store,
          admin: new Proxy(store.admin, { get: (t, p) => (p === 'deadRows' ? deadRows : Reflect.get(t, p)) }),
        };
      },
    });
    const logger = failing.logger;
    if (logger) {
      logger.warn = ((message: string, extra: unknown) => {
        warnings.push([message, extra]);
      }) as typeof logger.warn;
    }
    shells.push(failing);
    const sqsSource = createSqsSource(failing);
    const records = [
      anSqsRecord(5, JSON.stringify({ kind: 'paid', order: 5 }), { 'message-id': 'out-5' }),
      anSqsRecord(6, 'poison, not json', { 'message-id': 'out-6' }),
    ];

    const answer = await sqsSource({ Records: records }, aLambdaContext());

    // The dead row asked for the gauges; their read failed after both messages were stored: nothing is handed back
    // (SQS would redeliver them), and the failure is a WARN.
    expect(answer).toEqual({ batchItemFailures: [] });
    expect((await rows()).map((r) => [r.idempotency_key, r.state])).toEqual(
      expect.arrayContaining([
        ['out-5', 'pending'],
        ['out-6', 'dead'],
      ]),
    );
    expect(warnings).toEqual([
      [
        'publishing the gauges failed; the rows written stay written',
        expect.objectContaining({
          tables: ['inbox'],
          error: expect.objectContaining({ message: 'dead-row count timed out (test)' }),
        }),
      ],
    ]);
  });
});
