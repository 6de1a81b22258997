import { ConfigError, UnexpectedEventError } from '@queuebox/core';
import type { MSKEvent, SelfManagedKafkaEvent } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import {
  consumedRecordMessage,
  createKafkaPublisher,
  KAFKA_KEY_HEADER,
  type KafkaLambdaEvent,
  kafkaDeliveries,
  kafkaHeadersText,
  kafkaPublisherFactory,
  permanentKafkaErrorType,
  sourcesByTopic,
  withKafkaKey,
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
    expect(deliveries[0]?.message.headers).toEqual({
      'x-trace': 't1',
      'x-tag': 'a, b',
      'x-kafka-key': 'order-1',
    });
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

/** One record as both paths receive it: kafkajs's fetched record and the record of an MSK event. */
interface SameRecord {
  /** `null`: a record without a key (kafkajs gives `null`; Lambda leaves `key` out). */
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  /** In the record's order; a name may repeat, a value may be null (Kafka allows both). */
  readonly headers: readonly (readonly [string, Buffer | null])[];
}

function kafkajsRecord(record: SameRecord) {
  const headers: Record<string, Buffer | (Buffer | null)[] | null> = {};
  for (const [name, value] of record.headers) {
    const previous = headers[name];
    // kafkajs makes an array of a repeated header's values.
    headers[name] =
      previous === undefined ? value : Array.isArray(previous) ? [...previous, value] : [previous, value];
  }
  return {
    offset: '9',
    timestamp: '1796000000009',
    key: record.key,
    value: record.value,
    headers: headers as Parameters<typeof kafkaHeadersText>[0],
  };
}

function lambdaEvent(record: SameRecord): MSKEvent {
  const event = anMskEvent();
  const msk = {
    topic: 't',
    partition: 2,
    offset: 9,
    timestamp: 1796000000009,
    timestampType: 'CREATE_TIME' as const,
    value: record.value === null ? '' : record.value.toString('base64'),
    headers: record.headers.map(([name, value]) => ({ [name]: value === null ? [] : [...value] })),
  };
  // Lambda leaves `key` out of a record without one (the type says it is always there).
  const withKey = record.key === null ? msk : { ...msk, key: record.key.toString('base64') };
  return { ...event, records: { 't-2': [withKey as MSKEvent['records'][string][number]] } };
}

const NOT_UTF8 = Buffer.from([0xff, 0xfe, 0x41]);

describe('the record key as the header x-kafka-key', () => {
  const cases: Record<string, SameRecord> = {
    'a text key': { key: Buffer.from('order-1'), value: Buffer.from('{"n":1}'), headers: [] },
    'a tombstone with a key': { key: Buffer.from('order-1'), value: null, headers: [] },
    'an empty key': { key: Buffer.alloc(0), value: Buffer.from('{}'), headers: [] },
    'no key': { key: null, value: Buffer.from('{}'), headers: [['trace', Buffer.from('t')]] },
    'a key that is not UTF-8': { key: NOT_UTF8, value: Buffer.from('{}'), headers: [] },
    'a key holding NUL': { key: Buffer.from('a\u0000b'), value: Buffer.from('{}'), headers: [] },
    'a forged key header': {
      key: Buffer.from('real'),
      value: Buffer.from('{}'),
      headers: [
        ['X-Kafka-Key', Buffer.from('forged')],
        ['x-kafka-key', Buffer.from('forged too')],
        ['X-KAFKA-KEY', null],
        // The Kelvin sign lower-cases to k.
        ['X-KAFKA-\u212AEY', Buffer.from('forged with a Kelvin sign')],
        ['trace', Buffer.from('t')],
      ],
    },
    'a forged key header without a key': {
      key: null,
      value: Buffer.from('{}'),
      headers: [
        ['X-Kafka-Key', Buffer.from('forged')],
        ['x-kafka-key', Buffer.from('forged too')],
      ],
    },
    'repeated and null headers': {
      key: Buffer.from('k'),
      value: Buffer.from('{}'),
      headers: [
        ['tag', Buffer.from('a')],
        ['tag', null],
        ['blob', NOT_UTF8],
      ],
    },
  };
  const expected: Record<string, Record<string, string>> = {
    'a text key': { 'x-kafka-key': 'order-1' },
    'a tombstone with a key': { 'x-kafka-key': 'order-1' },
    'an empty key': { 'x-kafka-key': '' },
    'no key': { trace: 't' },
    'a key that is not UTF-8': { 'x-kafka-key': `base64:${NOT_UTF8.toString('base64')}` },
    'a key holding NUL': { 'x-kafka-key': `base64:${Buffer.from('a\u0000b').toString('base64')}` },
    'a forged key header': { trace: 't', 'x-kafka-key': 'real' },
    'a forged key header without a key': {},
    'repeated and null headers': {
      tag: 'a, ',
      blob: `base64:${NOT_UTF8.toString('base64')}`,
      'x-kafka-key': 'k',
    },
  };

  it.each(Object.keys(cases))(
    'stores %s the same from the local consumer and from a Lambda event',
    (name) => {
      // Prepare
      const record = cases[name] as SameRecord;

      // Act
      const local = consumedRecordMessage('t', 2, kafkajsRecord(record));
      const [lambda, ...others] = kafkaDeliveries(lambdaEvent(record));

      // Assess
      expect(others).toEqual([]);
      expect(local.headers).toEqual(expected[name]);
      expect(lambda?.message.headers).toEqual(local.headers);
      expect(Buffer.from(lambda?.message.body ?? [])).toEqual(Buffer.from(local.body));
      expect(lambda?.message.defaultIdempotencyKey).toBe(local.defaultIdempotencyKey);
    },
  );

  it('reads a key Lambda sends as null as no key', () => {
    // Prepare
    const event = lambdaEvent(cases['no key'] as SameRecord);
    const [record] = Object.values(event.records)[0] ?? [];
    (record as unknown as { key: null }).key = null;

    // Act / Assess
    expect(kafkaDeliveries(event)[0]?.message.headers).toEqual({ trace: 't' });
  });

  it('keeps the record without a key as it was, and withKafkaKey drops forged names in any case', () => {
    expect(withKafkaKey({ a: '1', 'X-Kafka-KEY': 'f' }, null)).toEqual({ a: '1' });
    expect(withKafkaKey({ 'x-kafka-key': 'f' }, Buffer.from('k'))).toEqual({ 'x-kafka-key': 'k' });
    expect(KAFKA_KEY_HEADER).toBe('x-kafka-key');
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
