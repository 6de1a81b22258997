/**
 * sqs-source while the database is silent (a TCP proxy in front of the real PostgreSQL keeps the connections open
 * and forwards nothing), with `queryTimeoutMs: 0` (a statement waits as long as it takes): the function must still
 * answer before Lambda's timeout, handing the records back through `batchItemFailures` as a store outage. A
 * function that times out instead fails the whole batch without the longer visibility of an outage, so each
 * receive of a silent spell spends one of the queue's `maxReceiveCount` at the queue's visibility timeout.
 */
import { SQSClient } from '@aws-sdk/client-sqs';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import type { SQSRecord } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler as createMigrate } from '../../functions/migrate.ts';
import { createHandler as createSqsSource } from '../../functions/sqs-source.ts';
import { cleanup, startTcpProxy, type TcpProxy } from '../local/support.ts';
import { aLambdaContext, RecordingMetrics, type TestShell, testShell, writeConfigFile } from './support.ts';

const needs = await requireServices('function tests: sqs-source silent database', ['postgres']);

const QUEUE_ARN = 'arn:aws:sqs:eu-west-1:123456789012:aud-c-orders';

function anSqsRecord(n: number, body: string): SQSRecord {
  return {
    messageId: `5a1e2d3c-0000-4000-8000-00000000000${n}`,
    receiptHandle: `AQEB${n}receipt`,
    body,
    attributes: {
      ApproximateReceiveCount: '1',
      SentTimestamp: '1796140000000',
      SenderId: 'AROAEXAMPLE:queuebox',
      ApproximateFirstReceiveTimestamp: '1796140000100',
    },
    messageAttributes: {},
    md5OfBody: 'ignored',
    eventSource: 'aws:sqs',
    eventSourceARN: QUEUE_ARN,
    awsRegion: 'eu-west-1',
  };
}

describe.skipIf(needs.skipReason)('sqs-source with a silent database', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'sqs_silent', 1);
  const shells: TestShell[] = [];
  let proxy: TcpProxy;
  let configFile: string;

  beforeAll(async () => {
    const target = new URL(needs.url.postgres);
    proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    target.host = `127.0.0.1:${proxy.port}`;
    configFile = await writeConfigFile(`database:
  url: ${JSON.stringify(target.href)}
  schema: ${schema.name}
  poolSize: 2
  queryTimeoutMs: 0
sources:
  aud-c-orders:
    type: sqs
    queueUrl: https://sqs.eu-west-1.amazonaws.com/123456789012/aud-c-orders
    topic: orders
`);
    const migrate = testShell(configFile);
    shells.push(migrate);
    await createMigrate(migrate)(undefined, aLambdaContext());
  });

  afterAll(async () => {
    for (const options of shells) for (const cache of options.caches) await cache.close();
    await proxy?.close();
    await cleanup();
  });

  it('hands the batch back through batchItemFailures before the function times out', async () => {
    // Prepare: a warm container (its connections open), then the database goes silent
    const metrics = new RecordingMetrics();
    const options = testShell(configFile, { metrics });
    shells.push(options);
    // SQS itself is out of reach here (a port nothing listens on): the longer visibility fails fast, as tested
    // elsewhere; what matters is that the records are answered at all.
    const unreachableSqs = new SQSClient({
      region: 'eu-west-1',
      endpoint: 'http://127.0.0.1:1',
      credentials: { accessKeyId: 'AKIDQUEUEBOXTEST', secretAccessKey: 'queuebox-test-secret' },
      maxAttempts: 1,
    });
    const sqsSource = createSqsSource(Object.assign(options, { sqsClient: unreachableSqs }));
    const warm = await sqsSource({ Records: [anSqsRecord(1, '{"n":1}')] }, aLambdaContext());
    expect(warm).toEqual({ batchItemFailures: [] });
    proxy.silence();
    const records = [anSqsRecord(2, '{"n":2}'), anSqsRecord(3, '{"n":3}')];

    // Act: an invocation with 8 s left
    const answer = await sqsSource({ Records: records }, aLambdaContext({ remainingMs: 8000 })).finally(() =>
      unreachableSqs.destroy(),
    );
    proxy.restore();

    // Assess: both handed back (none stored), counted as ingest failures
    expect(answer).toEqual({ batchItemFailures: records.map((r) => ({ itemIdentifier: r.messageId })) });
    expect(metrics.published.filter((d) => 'IngestFailures' in d.metrics)).toEqual([
      { metrics: { IngestFailures: 2 }, dimensions: { service: 'queuebox-test' } },
    ]);
    const stored = await pool.query(`SELECT count(*)::int AS n FROM "${schema.name}".inbox`);
    expect(stored.rows[0]?.n).toBe(1);
  });
});
