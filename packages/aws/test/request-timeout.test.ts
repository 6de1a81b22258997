/**
 * Requests AWS never answers (a lost response, a half-open connection): the SDK clients QueueBox builds time them
 * out, the publishers count that as a retry and free the request's slot, and a caller's abort frees it too. The
 * real SDK against the loopback endpoint (support/aws-loopback.ts), which leaves the requests it is told to unanswered.
 */
import type { BrokerIngestionPort } from '@queuebox/core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createSqsConsumer, createSqsPublisher } from '../src/index.ts';
import { type AwsLoopback, startAwsLoopback } from './support/aws-loopback.ts';
import { aMessage, TEST_CREDENTIALS } from './support/sqs.ts';

let loopback: AwsLoopback;
let queueUrl: string;

beforeAll(async () => {
  loopback = await startAwsLoopback();
  queueUrl = `${loopback.endpoint}/123456789012/orders`;
});

beforeEach(() => {
  // The clients are built from the options, as outbox-tick builds them: credentials from the default chain.
  vi.stubEnv('AWS_ACCESS_KEY_ID', TEST_CREDENTIALS.accessKeyId);
  vi.stubEnv('AWS_SECRET_ACCESS_KEY', TEST_CREDENTIALS.secretAccessKey);
  vi.stubEnv('AWS_SESSION_TOKEN', '');
  vi.stubEnv('AWS_PROFILE', '');
});

afterEach(() => {
  vi.unstubAllEnvs();
  loopback.requests.length = 0;
  loopback.decideRequest = () => 'entries';
});

afterAll(async () => {
  expect(loopback.violations).toEqual([]);
  await loopback.close();
});

/** Leaves the next `count` requests unanswered, answers the rest; tells how many it left so far. */
function hangFirst(count: number): () => number {
  let seen = 0;
  const before = loopback.hanging;
  loopback.decideRequest = () => (seen++ < count ? 'hang' : 'entries');
  return () => loopback.hanging - before;
}

/** What `promise` settled with within `ms`, or `pending`. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'pending'> {
  return Promise.race([
    promise,
    new Promise<'pending'>((resolve) => setTimeout(() => resolve('pending'), ms)),
  ]);
}

describe('a request AWS never answers', () => {
  it('times out as a retry (the SDK tries twice), and later rows are sent once the service answers', async () => {
    // Prepare: more unanswered requests than the publisher has slots (8).
    const hung = hangFirst(10);
    const publisher = createSqsPublisher({
      queueUrl,
      endpoint: loopback.endpoint,
      region: 'us-east-1',
      requestTimeoutMs: 200,
    });
    try {
      // Act: five rows one after the other, each with the poller's kind of deadline.
      const outcomes = [];
      for (let i = 0; i < 5; i++)
        outcomes.push(await publisher.publish(aMessage(), AbortSignal.timeout(5000)));
      const closed = await within(
        publisher.close().then(() => 'closed'),
        5000,
      );
      // Assess
      for (const outcome of outcomes) {
        expect(outcome.kind).toBe('retry');
        expect(outcome.kind === 'retry' && outcome.error).toMatch(
          /^SQS refused the request for destination "sqs": TimeoutError: .*exceeded the configured 200 ms requestTimeout/,
        );
      }
      expect(hung()).toBe(10);
      expect(loopback.requests).toHaveLength(10);
      expect(closed).toBe('closed');
    } finally {
      await within(publisher.close(), 5000);
    }
    // Act: the service answers again.
    const again = createSqsPublisher({ queueUrl, endpoint: loopback.endpoint, requestTimeoutMs: 200 });
    try {
      // Assess
      expect(await again.publish(aMessage(), AbortSignal.timeout(5000))).toEqual({ kind: 'sent' });
    } finally {
      await within(again.close(), 5000);
    }
  });

  it("frees the request's slot when every caller in it aborted: later rows are sent and close returns", async () => {
    // Prepare: a timeout far beyond the test, so only the callers' aborts can free the 8 slots.
    const hung = hangFirst(8);
    const publisher = createSqsPublisher({
      queueUrl,
      endpoint: loopback.endpoint,
      region: 'us-east-1',
      requestTimeoutMs: 600_000,
    });
    try {
      // Act: eight requests of one row each (one per turn of the event loop), each given up after 300 ms.
      const abandoned = [];
      for (let i = 0; i < 8; i++) {
        abandoned.push(publisher.publish(aMessage(), AbortSignal.timeout(300)));
        await new Promise((resolve) => setImmediate(resolve));
      }
      const gaveUp = await Promise.all(abandoned);
      const later = await publisher.publish(aMessage(), AbortSignal.timeout(5000));
      const closed = await within(
        publisher.close().then(() => 'closed'),
        5000,
      );
      // Assess
      expect(gaveUp).toEqual(Array(8).fill({ kind: 'retry', error: 'aborted while waiting for SQS' }));
      expect(hung()).toBe(8);
      expect(later).toEqual({ kind: 'sent' });
      expect(closed).toBe('closed');
    } finally {
      await within(publisher.close(), 5000);
    }
  });

  it("times out the local SQS consumer's receive too", async () => {
    // Prepare
    hangFirst(1);
    const ingestion: BrokerIngestionPort = {
      ingest: () => Promise.reject(new Error('no message is received here')),
    };
    const consumer = createSqsConsumer({
      source: 'orders',
      queueUrl,
      endpoint: loopback.endpoint,
      region: 'us-east-1',
      ingestion,
      waitTimeSeconds: 0,
      requestTimeoutMs: 200,
      sdkMaxAttempts: 1,
    });
    try {
      // Act
      const first = await within(consumer.receive(), 5000);
      const second = await within(consumer.receive(), 5000);
      // Assess
      expect(first).not.toBe('pending');
      expect(first !== 'pending' && String(first.error)).toMatch(
        /exceeded the configured 200 ms requestTimeout/,
      );
      expect(second).toMatchObject({ received: 0 });
      expect(second !== 'pending' && second.error).toBeUndefined();
    } finally {
      await within(consumer.close(), 5000);
    }
  });
});
