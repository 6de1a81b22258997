/**
 * The local runtime as a real process with an SQS source and an SQS destination on ElasticMQ and a real PostgreSQL:
 * a message sent to the source queue becomes an inbox row (long-polling consumer, deleted after it committed), is
 * relayed, and the outbox publishes it to a FIFO destination queue with the row key as message group; a repeat is
 * consumed as a duplicate; SIGTERM exits 0. Credentials come from the default AWS chain (environment), as in
 * production.
 */
import { GetQueueAttributesCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestQueue,
  dropQueue,
  receiveAll,
  TEST_CREDENTIALS,
  testSqsClient,
} from '../../packages/aws/test/support/sqs.ts';
import { baseUrlOf, cleanup, eventually, type QueueBoxProcess, startQueueBox } from './support.ts';

const needs = await requireServices('local sqs tests', ['postgres', 'sqs']);
const endpoint = needs.url.sqs;

describe.skipIf(needs.skipReason)(
  'local runtime with an SQS source and an SQS destination (real process)',
  () => {
    const { pool, schema } = usePostgresSchema(needs.url.postgres, 'local_sqs', 2);
    let client: SQSClient;
    let inQueue: string;
    let outQueue: string;
    let queuebox: QueueBoxProcess;

    beforeAll(async () => {
      client = testSqsClient(endpoint);
      inQueue = await createTestQueue(client, 'local-in');
      outQueue = await createTestQueue(client, 'local-out', { fifo: true });
      queuebox = await startQueueBox({
        env: {
          AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId,
          AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey,
          AWS_REGION: 'us-east-1',
        },
        yaml: `database:
  url: ${JSON.stringify(needs.url.postgres)}
  schema: ${schema.name}
http: { port: 0, host: 127.0.0.1 }
inbox:
  relay: { pollIntervalMs: 50 }
outbox:
  pollIntervalMs: 50
sources:
  jobs-in:
    type: sqs
    queueUrl: ${inQueue}
    endpoint: ${endpoint}
    waitTimeSeconds: 1
    idempotencyKey: { header: job-id }
    eventTypePath: $.kind
    aggregateIdPath: $.image
    topic: "jobs.{{ eventType }}"
destinations:
  out:
    type: sqs
    queueUrl: ${outQueue}
    endpoint: ${endpoint}
routes:
  - { match: "jobs.#", destination: out }
`,
      });
      await baseUrlOf(queuebox);
    });

    afterAll(async () => {
      await cleanup();
      if (client) {
        await dropQueue(client, inQueue);
        await dropQueue(client, outQueue);
        client.destroy();
      }
    });

    it('consumes the source queue, relays, and publishes to the FIFO destination; a repeat is a duplicate', async () => {
      const send = () =>
        client.send(
          new SendMessageCommand({
            QueueUrl: inQueue,
            MessageBody: JSON.stringify({ kind: 'resize', image: 'a.png' }),
            MessageAttributes: { 'job-id': { DataType: 'String', StringValue: 'job-1' } },
          }),
        );

      await send();
      const [delivered] = await receiveAll(client, outQueue, 1, 30_000, true);
      await send();
      await eventually(async () => {
        const answer = await client.send(
          new GetQueueAttributesCommand({
            QueueUrl: inQueue,
            AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
          }),
        );
        return (
          answer.Attributes?.ApproximateNumberOfMessages === '0' &&
          answer.Attributes?.ApproximateNumberOfMessagesNotVisible === '0'
        );
      }, 'both messages consumed and deleted');

      expect(JSON.parse(delivered?.Body ?? '')).toEqual({ kind: 'resize', image: 'a.png' });
      expect(delivered?.Attributes?.MessageGroupId).toBe('a.png');
      expect(delivered?.MessageAttributes?.['x-source']?.StringValue).toBe('jobs-in');
      const { rows } = await pool.query<{ n: number; state: string }>(
        `SELECT count(*)::int AS n, min(state) AS state FROM "${schema.name}".inbox WHERE source = 'jobs-in'`,
      );
      expect(rows[0]).toEqual({ n: 1, state: 'processed' });
      expect(await queuebox.stop('SIGTERM')).toBe(0);
    });
  },
);
