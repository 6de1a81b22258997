import { randomBytes } from 'node:crypto';
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  DeleteQueueCommand,
  type Message,
  ReceiveMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import type { OutgoingMessage } from '@queuebox/core';

/** Credentials for local endpoints (ElasticMQ and the loopback check nothing but the SigV4 shape). */
export const TEST_CREDENTIALS = { accessKeyId: 'AKIDQUEUEBOXTEST', secretAccessKey: 'queuebox-test-secret' };

/** An SQS client for a local endpoint. */
export function testSqsClient(endpoint: string): SQSClient {
  return new SQSClient({ region: 'us-east-1', endpoint, credentials: TEST_CREDENTIALS, maxAttempts: 1 });
}

/** A fresh queue with a unique name (`.fifo` when asked); deleted by `drop`. */
export async function createTestQueue(
  client: SQSClient,
  label: string,
  options: {
    fifo?: boolean;
    visibilityTimeoutSeconds?: number;
    /** Other queue attributes (`RedrivePolicy`, …). */
    attributes?: Record<string, string>;
  } = {},
): Promise<string> {
  const name = `qb-test-${label}-${randomBytes(4).toString('hex')}${options.fifo ? '.fifo' : ''}`;
  const answer = await client.send(
    new CreateQueueCommand({
      QueueName: name,
      Attributes: {
        ...(options.fifo ? { FifoQueue: 'true' } : {}),
        VisibilityTimeout: String(options.visibilityTimeoutSeconds ?? 30),
        ...options.attributes,
      },
    }),
  );
  if (!answer.QueueUrl) throw new Error(`CreateQueue gave no URL for ${name}`);
  return answer.QueueUrl;
}

export async function dropQueue(client: SQSClient, queueUrl: string): Promise<void> {
  await client.send(new DeleteQueueCommand({ QueueUrl: queueUrl })).catch(() => undefined);
}

/**
 * Receives until `count` messages came or `timeoutMs` passed. Messages stay in flight unless `deleteEach` (a FIFO
 * group hands out its next message only once the one before is deleted).
 */
export async function receiveAll(
  client: SQSClient,
  queueUrl: string,
  count: number,
  timeoutMs = 10_000,
  deleteEach = false,
): Promise<Message[]> {
  const found: Message[] = [];
  const deadline = Date.now() + timeoutMs;
  while (found.length < count && Date.now() < deadline) {
    const answer = await client.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['All'],
        VisibilityTimeout: 60,
      }),
    );
    for (const message of answer.Messages ?? []) {
      found.push(message);
      if (deleteEach) {
        await client.send(
          new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: message.ReceiptHandle }),
        );
      }
    }
  }
  return found;
}

let nextId = 1;
const run = randomBytes(3).toString('hex');

/** An outgoing message (the routed outbox row as a publisher gets it). */
export function aMessage(overrides: Partial<OutgoingMessage> = {}): OutgoingMessage {
  const id = overrides.id ?? `${Date.now()}${nextId++}`;
  return {
    id,
    topic: 'orders.created',
    key: 'o-1',
    payload: { id, run, note: 'ü' },
    headers: { 'x-trace': 't' },
    attempt: 0,
    ...overrides,
  };
}
