import { ConfigError, UnexpectedEventError } from '@queuebox/core';
import type { MSKEvent, SelfManagedKafkaEvent } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import {
  consumedRecordMessage,
  createKafkaPublisher,
  type KafkaLambdaEvent,
  kafkaDeliveries,
  kafkaHeadersText,
  kafkaPublisherFactory,
  permanentKafkaErrorType,
  sourcesByTopic,
} from '../src/index.ts';

const bytes = (text: string) => [...Buffer.from(text)];

function anMskEvent(): MSKEvent {
  // The shape of the documented example: records by "topic-partition", base64 key and value, header byte arrays.
  return {
    eventSource: 'aws:kafka',
    eventSourceArn:
      'arn:aws:kafka:us-east-1:123456789012:cluster/vpc-2priv-2pub/751d2973-a626-431c-9d4e-d7975eb44dd7-2',
    bootstrapServers: 'b-2.demo-cluster-1.a1bcde.c1.kafka.us-east-1.amazonaws.com:9092',
    records: {
      'orders-0': [
        {
          topic: 'orders',
          partition: 0,
          offset: 15,
          timestamp: 1545084650987,
          timestampType: 'CREATE_TIME',
          key: Buffer.from('order-1').toString('base64'),
          value: Buffer.from('{"id":"o-1"}').toString('base64'),
          headers: [{ 'x-trace': bytes('t1') }, { 'x-tag': bytes('a') }, { 'x-tag': bytes('b') }],
        },
        {
          topic: 'orders',
          partition: 0,
          offset: 16,
          timestamp: 1545084650988,
          timestampType: 'CREATE_TIME',
          key: '',
          value: '',
          headers: [],
        },
      ],
      'audit-3': [
        {
          topic: 'audit',
          partition: 3,
          offset: 7,
          timestamp: 1545084650989,
          timestampType: 'LOG_APPEND_TIME',
          key: '',
          value: Buffer.from('[1]').toString('base64'),
          headers: [],
        },
      ],
    },
  };
}

describe('MSK and self-managed Kafka events', () => {
  it('decodes values and header byte arrays, with topic:partition:offset@timestamp as the default key', () => {
    // Act
    const deliveries = kafkaDeliveries(anMskEvent());
    // Assess
    expect(deliveries.map((d) => d.message.defaultIdempotencyKey)).toEqual([
      'orders:0:15@1545084650987',
      'orders:0:16@1545084650988',
      'audit:3:7@1545084650989',
    ]);
    expect(Buffer.from(deliveries[0]?.message.body ?? []).toString()).toBe('{"id":"o-1"}');
    expect(deliveries[0]?.message.headers).toEqual({ 'x-trace': 't1', 'x-tag': 'a, b' });
    expect(deliveries[1]?.message.body.byteLength).toBe(0);
  });

  it('reads a self-managed Kafka event the same way', () => {
    // Prepare
    const { eventSourceArn: _arn, ...rest } = anMskEvent();
    const event: SelfManagedKafkaEvent = { ...rest, eventSource: 'SelfManagedKafka' };
    // Act / Assess
    expect(kafkaDeliveries(event)).toHaveLength(3);
  });

  it('refuses an event of another source, and one without records, storing nothing', () => {
    // Prepare: an SQS event wired to the Kafka function by mistake, and an MSK event that lost its records.
    const sqs = {
      Records: [
        { messageId: 'm', body: '{}', eventSource: 'aws:sqs', eventSourceARN: 'arn:aws:sqs:us-east-1:1:q' },
      ],
    } as unknown as KafkaLambdaEvent;
    const { records: _records, ...withoutRecords } = anMskEvent();
    // Act / Assess
    expect(() => kafkaDeliveries(sqs)).toThrow(UnexpectedEventError);
    expect(() => kafkaDeliveries(withoutRecords as KafkaLambdaEvent)).toThrow('"aws:kafka"');
    expect(() => kafkaDeliveries({ ...anMskEvent(), records: { 'orders-0': {} } } as never)).toThrow(
      UnexpectedEventError,
    );
  });

  it('maps topics to sources and refuses a topic claimed twice', () => {
    // Prepare
    const sources = {
      a: { type: 'kafka', topics: ['orders'] },
      b: { type: 'kafka', topics: ['audit'] },
      c: { type: 'amqp' },
    };
    // Act / Assess
    expect([...sourcesByTopic(sources)]).toEqual([
      ['orders', 'a'],
      ['audit', 'b'],
    ]);
    expect(() => sourcesByTopic({ ...sources, d: { type: 'kafka', topics: ['orders'] } })).toThrow(
      /topic "orders" is also consumed by source a/,
    );
  });
});

describe('kafkajs records', () => {
  it('turns header buffers and repeated headers into text', () => {
    expect(
      kafkaHeadersText({ a: Buffer.from('x'), b: 'y', c: [Buffer.from('1'), '2'], d: undefined }),
    ).toEqual({
      a: 'x',
      b: 'y',
      c: '1, 2',
    });
  });

  it('reads a null header value (Kafka allows one) as empty, alone or repeated, as the Lambda event does', () => {
    const headers = { x: null, y: [Buffer.from('1'), null] } as unknown as Parameters<
      typeof kafkaHeadersText
    >[0];

    expect(kafkaHeadersText(headers)).toEqual({ x: '', y: '1, ' });
  });

  it('builds the inbox message of a fetched record', () => {
    // The same key as the Lambda event's for the same record: offset and timestamp as the log keeps them.
    expect(
      consumedRecordMessage('t', 2, {
        offset: '40',
        timestamp: '1796000000040',
        value: null,
        headers: { h: Buffer.from('v') },
      }),
    ).toEqual({
      body: new Uint8Array(),
      headers: { h: 'v' },
      defaultIdempotencyKey: 't:2:40@1796000000040',
    });
  });
});

describe('publisher options and errors', () => {
  it('finds a permanent broker error in the cause chain', () => {
    // Prepare
    const inner = Object.assign(new Error('too large'), { type: 'MESSAGE_TOO_LARGE' });
    const outer = Object.assign(new Error('retries exceeded'), { cause: inner });
    // Act / Assess
    expect(permanentKafkaErrorType(outer)).toBe('MESSAGE_TOO_LARGE');
    expect(
      permanentKafkaErrorType(Object.assign(new Error('x'), { type: 'LEADER_NOT_AVAILABLE' })),
    ).toBeUndefined();
  });

  it('refuses a destination without brokers', () => {
    expect(() => kafkaPublisherFactory('events', { type: 'kafka' })).toThrow(/destinations\.events\.brokers/);
  });

  it("passes the configuration's maxRequestBytes to the publisher", () => {
    const destination = { type: 'kafka', brokers: ['127.0.0.1:9092'], maxRequestBytes: 0.5 };
    expect(() => kafkaPublisherFactory('events', destination)).toThrow(
      /destinations\.events\.maxRequestBytes/,
    );
  });

  it('refuses, when created, options the idempotent producer would only fail on at the first publish', () => {
    let error: unknown;
    try {
      createKafkaPublisher({ name: 'events', brokers: ['127.0.0.1:9092'], retries: 0, maxBatchMessages: 0 });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).issues.map((i) => i.path)).toEqual([
      'destinations.events.retries',
      'destinations.events.maxBatchMessages',
    ]);
    expect(() => createKafkaPublisher({ brokers: ['127.0.0.1:9092'], retries: 1 })).not.toThrow();
  });
});
