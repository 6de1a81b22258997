/**
 * The SQS publisher against a real SQS-compatible server (ElasticMQ, `scripts/elasticmq.sh`): standard and FIFO
 * queues, deduplication, oversize rows, an unreachable endpoint; the per-entry results of a partial batch come
 * from the loopback endpoint (ElasticMQ accepts every entry the publisher builds, so it cannot fail one alone).
 */
import { SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { requireServices } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { awsErrorCode, createSqsPublisher, SQS_MAX_MESSAGE_BYTES } from '../src/index.ts';
import { type AwsLoopback, startAwsLoopback } from './support/aws-loopback.ts';
import { aMessage, createTestQueue, dropQueue, receiveAll, testSqsClient } from './support/sqs.ts';

const needs = await requireServices('sqs publisher', ['sqs']);
const endpoint = needs.url.sqs;

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

async function queue(label: string, fifo = false) {
  const url = await createTestQueue(client, label, { fifo });
  queues.push(url);
  return url;
}

describe.runIf(needs.available)(`SQS publisher on ${needs.via.sqs}`, () => {
  it('sends to a standard queue: JSON body, the outbox id and the headers as attributes, mapped by the rules', async () => {
    // Prepare
    const queueUrl = await queue('std');
    const publisher = createSqsPublisher({ queueUrl, client });
    const message = aMessage({
      headers: {
        'x-trace': 't-1',
        'Message-Id': 'forged',
        'bad name!': 'kept',
        'AWS.reserved': 'dropped',
        '.dots..here.': 'mapped',
        empty: '',
      },
    });
    try {
      // Act
      const outcome = await publisher.publish(message);
      const [received] = await receiveAll(client, queueUrl, 1);
      // Assess
      expect(outcome).toEqual({ kind: 'sent' });
      expect(JSON.parse(received?.Body ?? '')).toEqual(message.payload);
      const attributes = Object.fromEntries(
        Object.entries(received?.MessageAttributes ?? {}).map(([k, v]) => [k, v.StringValue]),
      );
      expect(attributes).toEqual({
        'message-id': message.id,
        'x-trace': 't-1',
        bad_name_: 'kept',
        'dots.here': 'mapped',
      });
      expect(received?.Attributes?.MessageGroupId).toBeUndefined();
    } finally {
      await publisher.close();
    }
  });

  it('sends to a FIFO queue with the key as group and the outbox id as deduplication id; a repeat is dropped', async () => {
    // Prepare
    const queueUrl = await queue('fifo', true);
    const publisher = createSqsPublisher({ queueUrl, client, messageGroupId: 'unkeyed' });
    const keyed = aMessage({ key: 'order-7' });
    const unkeyed = aMessage({ key: null });
    const odd = aMessage({ key: 'clé avec espaces' });
    try {
      // Act
      const outcomes = await Promise.all([keyed, unkeyed, odd].map((m) => publisher.publish(m)));
      const repeat = await publisher.publish({ ...keyed, attempt: 1 });
      const received = await receiveAll(client, queueUrl, 4, 4000);
      // Assess
      expect(outcomes).toEqual([{ kind: 'sent' }, { kind: 'sent' }, { kind: 'sent' }]);
      expect(repeat).toEqual({ kind: 'sent' });
      expect(received).toHaveLength(3);
      const byDedup = new Map(received.map((m) => [m.Attributes?.MessageDeduplicationId, m.Attributes]));
      expect(byDedup.get(keyed.id)?.MessageGroupId).toBe('order-7');
      expect(byDedup.get(unkeyed.id)?.MessageGroupId).toBe('unkeyed');
      expect(byDedup.get(odd.id)?.MessageGroupId).toMatch(/^sha256:[0-9a-f]{64}$/);
    } finally {
      await publisher.close();
    }
  });

  it('answers dead for a row over the size limit, without a request, and sends the rest of its batch normally', async () => {
    // Prepare
    const queueUrl = await queue('big');
    const publisher = createSqsPublisher({ queueUrl, client });
    const big = aMessage({ payload: { blob: 'x'.repeat(SQS_MAX_MESSAGE_BYTES) } });
    const small = aMessage();
    try {
      // Act
      const [bigOutcome, smallOutcome] = await Promise.all([
        publisher.publish(big),
        publisher.publish(small),
      ]);
      const received = await receiveAll(client, queueUrl, 2, 3000);
      // Assess
      expect(bigOutcome.kind).toBe('dead');
      expect(bigOutcome.kind === 'dead' && bigOutcome.error).toMatch(
        /^the message is 1048\d{3} bytes \(payload 1048\d{3} \+ attributes \d+\); SQS destination "sqs" accepts at most 1048576 bytes per message, so it can never be sent$/,
      );
      expect(smallOutcome).toEqual({ kind: 'sent' });
      expect(received.map((m) => m.MessageAttributes?.['message-id']?.StringValue)).toEqual([small.id]);
    } finally {
      await publisher.close();
    }
  });

  it('sends a row of 300,000 bytes: SQS takes messages of up to 1 MiB', async () => {
    // Prepare
    const queueUrl = await queue('large');
    const publisher = createSqsPublisher({ queueUrl, client });
    const large = aMessage({ payload: { blob: 'x'.repeat(300_000) } });
    try {
      // Act
      const outcome = await publisher.publish(large);
      const received = await receiveAll(client, queueUrl, 1, 3000);
      // Assess
      expect(outcome).toEqual({ kind: 'sent' });
      expect(received.map((m) => m.Body)).toEqual([JSON.stringify(large.payload)]);
    } finally {
      await publisher.close();
    }
  });

  it("reads the code of a refused batch under ElasticMQ's prefix (com.amazonaws.sqs#…)", async () => {
    // Prepare
    const queueUrl = await queue('codes');
    // Act
    const refused = await client
      .send(
        new SendMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: [
            { Id: 'a', MessageBody: 'x' },
            { Id: 'a', MessageBody: 'y' },
          ],
        }),
      )
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    // Assess
    expect(refused).toMatchObject({ Code: 'com.amazonaws.sqs#BatchEntryIdsNotDistinct' });
    expect(awsErrorCode(refused)).toBe('BatchEntryIdsNotDistinct');
  });

  it('retries when the endpoint cannot be reached, and sends once it can', async () => {
    // Prepare
    const queueUrl = await queue('away');
    const away = createSqsPublisher({
      queueUrl,
      endpoint: 'http://127.0.0.1:9',
      region: 'us-east-1',
      client: testSqsClient('http://127.0.0.1:9'),
    });
    const back = createSqsPublisher({ queueUrl, client });
    const message = aMessage();
    try {
      // Act
      const failed = await away.publish(message);
      const sent = await back.publish({ ...message, attempt: 1 });
      // Assess
      expect(failed.kind).toBe('retry');
      expect(failed.kind === 'retry' && failed.error).toMatch(
        /^SQS refused the request for destination "sqs": .*ECONNREFUSED/,
      );
      expect(sent).toEqual({ kind: 'sent' });
      expect(await receiveAll(client, queueUrl, 1)).toHaveLength(1);
    } finally {
      await away.close();
      await back.close();
    }
  });

  it('packs concurrent publishes into requests of at most 10 entries', async () => {
    // Prepare
    const queueUrl = await queue('pack');
    const publisher = createSqsPublisher({ queueUrl, client });
    const messages = Array.from({ length: 25 }, () => aMessage());
    try {
      // Act
      const outcomes = await Promise.all(messages.map((m) => publisher.publish(m)));
      const received = await receiveAll(client, queueUrl, 25);
      // Assess
      expect(outcomes.every((o) => o.kind === 'sent')).toBe(true);
      expect(new Set(received.map((m) => m.MessageAttributes?.['message-id']?.StringValue))).toEqual(
        new Set(messages.map((m) => m.id)),
      );
    } finally {
      await publisher.close();
    }
  });
});

describe('SQS publisher: per-entry results (loopback endpoint speaking SQS JSON 1.0)', () => {
  let loopback: AwsLoopback;
  beforeAll(async () => {
    loopback = await startAwsLoopback();
  });
  afterAll(async () => {
    expect(loopback.violations).toEqual([]);
    await loopback.close();
  });

  it('settles each entry of one request alone: sent, retry (throttled) and dead (sender fault)', async () => {
    // Prepare
    loopback.requests.length = 0;
    loopback.decideEntry = (entry) => {
      const payload = JSON.parse(entry.body) as { fate?: string };
      if (payload.fate === 'throttle') return { code: 'RequestThrottled', senderFault: false };
      if (payload.fate === 'refuse')
        return { code: 'InvalidParameterValue', message: 'no', senderFault: true };
      return 'ok';
    };
    const queueUrl = `${loopback.endpoint}/123456789012/orders.fifo`;
    const publisher = createSqsPublisher({ queueUrl, client: testSqsClient(loopback.endpoint) });
    const messages = [
      aMessage({ key: 'a', payload: { fate: 'ok' } }),
      aMessage({ key: 'b', payload: { fate: 'throttle' } }),
      aMessage({ key: 'c', payload: { fate: 'refuse' } }),
    ];
    try {
      // Act
      const outcomes = await Promise.all(messages.map((m) => publisher.publish(m)));
      // Assess
      expect(loopback.requests).toHaveLength(1);
      expect(loopback.requests[0]?.entries.map((e) => [e.groupId, e.deduplicationId])).toEqual(
        messages.map((m) => [m.key, m.id]),
      );
      expect(outcomes).toEqual([
        { kind: 'sent' },
        { kind: 'retry', error: 'SQS did not accept the message for destination "sqs": RequestThrottled' },
        {
          kind: 'dead',
          error: 'SQS did not accept the message for destination "sqs": InvalidParameterValue: no',
        },
      ]);
    } finally {
      loopback.decideEntry = () => 'ok';
      await publisher.close();
    }
  });

  it('splits requests by bytes as well as by count', async () => {
    // Prepare
    loopback.requests.length = 0;
    const publisher = createSqsPublisher({
      queueUrl: `${loopback.endpoint}/123456789012/orders`,
      client: testSqsClient(loopback.endpoint),
    });
    const messages = Array.from({ length: 3 }, () => aMessage({ payload: { blob: 'y'.repeat(400_000) } }));
    try {
      // Act
      const outcomes = await Promise.all(messages.map((m) => publisher.publish(m)));
      // Assess
      expect(outcomes.every((o) => o.kind === 'sent')).toBe(true);
      // Two requests, 2 entries and 1 (both go at once: the endpoint may read the smaller one first).
      expect(loopback.requests.map((r) => r.entries.length).sort()).toEqual([1, 2]);
    } finally {
      await publisher.close();
    }
  });
  it.each([
    'BatchRequestTooLong',
    'TooManyEntriesInBatchRequest',
    'BatchEntryIdsNotDistinct',
    'InvalidBatchEntryId',
    'EmptyBatchRequest',
  ])(
    're-sends a request refused with %s (AWS.SimpleQueueService.…) entry by entry: only the culprit is answered dead',
    async (code) => {
      // Prepare: SQS names the code AWS.SimpleQueueService.<code> in x-amzn-query-error, the SDK's `Code`.
      loopback.requests.length = 0;
      loopback.decideRequest = (request) =>
        request.entries.some((e) => e.body.includes('poison'))
          ? { status: 400, code, message: 'the batch is refused' }
          : 'entries';
      const publisher = createSqsPublisher({
        queueUrl: `${loopback.endpoint}/123456789012/orders`,
        client: testSqsClient(loopback.endpoint),
      });
      try {
        // Act
        const outcomes = await Promise.all(
          ['fine', 'poison', 'fine'].map((note) => publisher.publish(aMessage({ payload: { note } }))),
        );
        // Assess
        expect(outcomes.map((o) => o.kind)).toEqual(['sent', 'dead', 'sent']);
        expect(outcomes[1]).toEqual({
          kind: 'dead',
          error: `SQS refused the request for destination "sqs": ${code}: the batch is refused (HTTP 400)`,
        });
        expect(loopback.requests.map((r) => r.entries.length)).toEqual([3, 1, 1, 1]);
      } finally {
        loopback.decideRequest = () => 'entries';
        await publisher.close();
      }
    },
  );

  // A queue whose MaximumMessageSize is below the destination's maxMessageBytes refuses a larger message itself.
  // ElasticMQ 1.7.1 does not enforce a queue's MaximumMessageSize, so the loopback answers both ways SQS is reported
  // to: the entry failed alone (InvalidParameterValue, a sender fault), or the whole request (BatchRequestTooLong).
  it.each(['entry', 'request'])(
    "ends a row over the queue's own MaximumMessageSize dead and sends the others (refused per %s)",
    async (how) => {
      // Prepare
      const queueLimit = 1024;
      loopback.requests.length = 0;
      const tooLong = (body: string) => Buffer.byteLength(body) > queueLimit;
      if (how === 'entry') {
        loopback.decideEntry = (entry) =>
          tooLong(entry.body)
            ? {
                code: 'InvalidParameterValue',
                message: `One or more parameters are invalid. Reason: Message must be shorter than ${queueLimit} bytes.`,
                senderFault: true,
              }
            : 'ok';
      } else {
        loopback.decideRequest = (request) =>
          request.entries.some((e) => tooLong(e.body))
            ? {
                status: 400,
                code: 'BatchRequestTooLong',
                message: `Batch requests cannot be longer than ${queueLimit} bytes.`,
              }
            : 'entries';
      }
      const publisher = createSqsPublisher({
        queueUrl: `${loopback.endpoint}/123456789012/small`,
        client: testSqsClient(loopback.endpoint),
      });
      try {
        // Act
        const outcomes = await Promise.all(
          ['a', 'b'.repeat(2000), 'c'].map((note) => publisher.publish(aMessage({ payload: { note } }))),
        );
        // Assess
        expect(outcomes.map((o) => o.kind)).toEqual(['sent', 'dead', 'sent']);
        expect(outcomes[1]?.kind === 'dead' && outcomes[1].error).toMatch(
          /shorter than 1024|longer than 1024/,
        );
      } finally {
        loopback.decideEntry = () => 'ok';
        loopback.decideRequest = () => 'entries';
        await publisher.close();
      }
    },
  );
});
