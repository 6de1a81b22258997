/** The keys of `type: sqs | sns | eventbridge` destinations and `type: sqs` sources: defaults and refusals. */
import type { ConfigIssue } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { parseConfig, validateConfig } from '../src/index.ts';

function issuesOf(input: unknown): ConfigIssue[] {
  const result = validateConfig(input);
  return result.ok ? [] : result.issues;
}

const QUEUE = 'https://sqs.eu-west-1.amazonaws.com/123456789012/orders';
const TOPIC = 'arn:aws:sns:eu-west-1:123456789012:orders.fifo';

describe('AWS destinations', () => {
  it('take their defaults', () => {
    // Act
    const config = parseConfig({
      destinations: {
        queue: { type: 'sqs', queueUrl: QUEUE },
        topic: { type: 'sns', topicArn: TOPIC },
        bus: { type: 'eventbridge', source: 'com.example.orders' },
      },
    });

    // Assess
    expect(config.destinations).toEqual({
      queue: { type: 'sqs', queueUrl: QUEUE, messageGroupId: 'queuebox', maxMessageBytes: 1_048_576 },
      topic: { type: 'sns', topicArn: TOPIC, messageGroupId: 'queuebox', maxMessageBytes: 262_144 },
      bus: {
        type: 'eventbridge',
        source: 'com.example.orders',
        eventBus: 'default',
        detailType: '{{ topic }}',
        maxEventBytes: 1_048_575,
      },
    });
  });

  it('refuse what the services would never accept, each at its path', () => {
    // Act
    const issues = issuesOf({
      destinations: {
        queue: {
          type: 'sqs',
          queueUrl: 'https://sqs.eu-west-1.amazonaws.com/orders',
          messageGroupId: 'with space',
          maxMessageBytes: 2_000_000,
          region: 'Europe',
        },
        topic: { type: 'sns', topicArn: 'arn:aws:sqs:eu-west-1:123456789012:orders' },
        bus: { type: 'eventbridge', source: 'aws.orders', detailType: '{{ eventType }}', eventBus: 'a b' },
        nosource: { type: 'eventbridge' },
      },
    });

    // Assess
    expect(issues.map((i) => i.path).sort()).toEqual([
      'destinations.bus.detailType',
      'destinations.bus.eventBus',
      'destinations.bus.source',
      'destinations.nosource.source',
      'destinations.queue.maxMessageBytes',
      'destinations.queue.messageGroupId',
      'destinations.queue.queueUrl',
      'destinations.queue.region',
      'destinations.topic.topicArn',
    ]);
  });

  it('take queue names up to 80 characters, the .fifo suffix of a FIFO queue included', () => {
    const url = (name: string) => `https://sqs.eu-west-1.amazonaws.com/123456789012/${name}`;
    const issuesFor = (name: string) =>
      issuesOf({ destinations: { queue: { type: 'sqs', queueUrl: url(name) } } }).map((i) => i.path);

    expect(issuesFor('q'.repeat(80))).toEqual([]);
    expect(issuesFor(`${'q'.repeat(75)}.fifo`)).toEqual([]);
    expect(issuesFor('q'.repeat(81))).toEqual(['destinations.queue.queueUrl']);
    expect(issuesFor(`${'q'.repeat(76)}.fifo`)).toEqual(['destinations.queue.queueUrl']);
  });

  it('accept a local endpoint and an event bus ARN', () => {
    // Act
    const result = validateConfig({
      destinations: {
        local: {
          type: 'sqs',
          queueUrl: 'http://127.0.0.1:9324/000000000000/jobs.fifo',
          endpoint: 'http://127.0.0.1:9324',
        },
        bus: {
          type: 'eventbridge',
          source: 'com.example',
          eventBus: 'arn:aws:events:eu-west-1:123456789012:event-bus/partner',
        },
      },
    });

    // Assess
    expect(result.ok).toBe(true);
  });
});

describe('SQS sources', () => {
  it('default batchSize 10, waitTimeSeconds 20 and the {{ source }} topic', () => {
    // Act
    const config = parseConfig({ sources: { jobs: { type: 'sqs', queueUrl: QUEUE } } });

    // Assess
    expect(config.sources.jobs).toMatchObject({
      type: 'sqs',
      mode: 'push',
      queueUrl: QUEUE,
      batchSize: 10,
      waitTimeSeconds: 20,
      topic: '{{ source }}',
      correlationIdHeader: 'X-Correlation-Id',
    });
  });

  it('refuse a batch above 10 and a wait above 20 s', () => {
    // Act
    const issues = issuesOf({
      sources: { jobs: { type: 'sqs', queueUrl: QUEUE, batchSize: 11, waitTimeSeconds: 21 } },
    });

    // Assess
    expect(issues.map((i) => i.path).sort()).toEqual([
      'sources.jobs.batchSize',
      'sources.jobs.waitTimeSeconds',
    ]);
  });
});
