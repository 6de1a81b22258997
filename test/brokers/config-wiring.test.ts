/**
 * The validated configuration (packages/config) goes into the broker adapters as it is: destinations into the
 * publisher factories, sources into the consumers and the Lambda handlers. No network: nothing is started.
 */
import type { AmqpSourceConfig, KafkaSourceConfig, NatsSourceConfig } from '@queuebox/config';
import { parseConfig } from '@queuebox/config';
import { ConfigError } from '@queuebox/core';
import {
  createKafkaConsumer,
  createKafkaEventHandler,
  kafkaPublisherFactory,
  sourcesByTopic,
} from '@queuebox/kafka';
import { createNatsSource, natsPublisherFactory } from '@queuebox/nats';
import { createPublishers, defaultPublisherFactories } from '@queuebox/outbox';
import {
  createAmazonMqHandler,
  createRabbitMqConsumer,
  rabbitmqPublisherFactory,
  sourcesByQueue,
} from '@queuebox/rabbitmq';
import { describe, expect, it } from 'vitest';

function aConfig() {
  return parseConfig({
    database: { url: 'postgres://u@127.0.0.1:5432/db' },
    sources: {
      'orders-in': {
        type: 'amqp',
        url: 'amqp://guest:guest@127.0.0.1:5672',
        queue: 'orders.in',
        eventTypeFromHeader: true,
      },
      'events-in': { type: 'kafka', brokers: ['127.0.0.1:9092'], topics: ['events'] },
      'jobs-in': { type: 'nats', servers: ['nats://127.0.0.1:4222'], stream: 'JOBS', subject: 'jobs.>' },
    },
    destinations: {
      rabbit: { type: 'rabbitmq', url: 'amqp://guest:guest@127.0.0.1:5672', exchange: 'events' },
      kafka: { type: 'kafka', brokers: ['127.0.0.1:9092'] },
      nats: { type: 'nats', servers: ['nats://127.0.0.1:4222'], jetstream: false },
    },
    routes: [{ match: '#', destination: 'rabbit' }],
  });
}

const ingestion = { ingest: async () => ({ status: 'stored' as const, id: '1', wakeRelay: false }) };

describe('configuration into the broker adapters', () => {
  it('builds one publisher per broker destination from the validated destinations', async () => {
    // Prepare
    const config = aConfig();
    // Act
    const publishers = createPublishers(config.destinations, {
      ...defaultPublisherFactories,
      rabbitmq: rabbitmqPublisherFactory,
      kafka: kafkaPublisherFactory,
      nats: natsPublisherFactory,
    });
    // Assess
    try {
      expect(['rabbit', 'kafka', 'nats'].map((d) => publishers.get(d) !== undefined)).toEqual([
        true,
        true,
        true,
      ]);
    } finally {
      await publishers.close();
    }
  });

  it('maps queues and topics of the validated sources for the Lambda handlers, and builds the consumers', async () => {
    // Prepare
    const config = aConfig();
    const amqp = config.sources['orders-in'] as AmqpSourceConfig;
    const kafka = config.sources['events-in'] as KafkaSourceConfig;
    const nats = config.sources['jobs-in'] as NatsSourceConfig;
    // Act
    const queues = sourcesByQueue(config.sources);
    const topics = sourcesByTopic(config.sources);
    const handlers = [
      createAmazonMqHandler({ ingestion, sources: config.sources }),
      createKafkaEventHandler({ ingestion, sources: config.sources }),
    ];
    const rabbit = createRabbitMqConsumer({ ...amqp, source: 'orders-in', ingestion });
    const kafkaConsumer = createKafkaConsumer({ ...kafka, source: 'events-in', ingestion });
    const natsSource = createNatsSource({ ...nats, source: 'jobs-in', ingestion });
    // Assess
    expect([...queues]).toEqual([['orders.in', 'orders-in']]);
    expect([...topics]).toEqual([['events', 'events-in']]);
    expect(handlers).toHaveLength(2);
    expect(rabbit.consuming).toBe(false);
    await rabbit.close();
    await kafkaConsumer.close();
    await natsSource.close();
  });

  it("takes the local consumers' retry and commit pacing from the configuration, bounded and checked", () => {
    // Prepare
    const base = {
      database: { url: 'postgres://u@127.0.0.1:5432/db' },
      destinations: { rabbit: { type: 'rabbitmq', url: 'amqp://127.0.0.1', exchange: 'events' } },
      routes: [{ match: '#', destination: 'rabbit' }],
    };
    const amqp = { type: 'amqp', url: 'amqp://127.0.0.1', queue: 'orders.in' };
    const kafka = { type: 'kafka', brokers: ['127.0.0.1:9092'], topics: ['events'] };
    const problems = (sources: object) => {
      try {
        parseConfig({ ...base, sources });
        return [];
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        return error.issues.map((i) => `${i.path}: ${i.message}`);
      }
    };
    // Act
    const config = parseConfig({
      ...base,
      sources: {
        'orders-in': { ...amqp, retryDelayMs: 200, maxRetryDelayMs: 5000 },
        'events-in': { ...kafka, commitIntervalMs: 250, commitEveryRecords: 50, retryDelayMs: 300 },
      },
    });
    // Assess: what the local runtime spreads into createRabbitMqConsumer / createKafkaConsumer as it is.
    expect(config.sources['orders-in']).toMatchObject({ retryDelayMs: 200, maxRetryDelayMs: 5000 });
    expect(config.sources['events-in']).toMatchObject({
      commitIntervalMs: 250,
      commitEveryRecords: 50,
      retryDelayMs: 300,
    });
    expect(problems({ 'orders-in': { ...amqp, retryDelayMs: 5000, maxRetryDelayMs: 1000 } })).toEqual([
      'sources.orders-in.maxRetryDelayMs: must be at least retryDelayMs (5000)',
    ]);
    expect(problems({ 'orders-in': { ...amqp, maxRetryDelayMs: 3_600_000 } })).toHaveLength(1);
    expect(problems({ 'events-in': { ...kafka, retryDelayMs: 60_000, commitEveryRecords: 0 } })).toHaveLength(
      2,
    );
  });
});
