import { type BrokerIngestionPort, UnexpectedEventError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import type { AmazonMqRabbitEvent } from '../src/index.ts';
import {
  amazonMqDeliveries,
  createAmazonMqHandler,
  headersText,
  parseQueueKey,
  rabbitmqPublisherFactory,
  sourcesByQueue,
  toBrokerMessage,
  withHeartbeat,
  withLastDelivery,
} from '../src/index.ts';

function anAmazonMqEvent(overrides: Partial<AmazonMqRabbitEvent> = {}): AmazonMqRabbitEvent {
  // The documented example event, with a JSON body and a few more properties.
  return {
    eventSource: 'aws:rmq',
    eventSourceArn: 'arn:aws:mq:us-west-2:111122223333:broker:test:b-9bcfa592-423a-4942-879d-eb284b418fc8',
    rmqMessagesByQueue: {
      'orders::/': [
        {
          basicProperties: {
            contentType: 'application/json',
            contentEncoding: null,
            headers: {
              header1: { bytes: [118, 97, 108, 117, 101, 49] },
              numberInHeader: 10,
              'x-death': [{ count: 1, queue: { bytes: [113] } }],
            },
            deliveryMode: 2,
            priority: 34,
            correlationId: 'corr-1',
            replyTo: null,
            expiration: '60000',
            messageId: 'm-1',
            timestamp: 'Jan 1, 1970, 12:33:41 AM',
            type: 'order.created',
            userId: 'AIDACKCEVSQ6C2EXAMPLE',
            appId: null,
            clusterId: null,
            bodySize: 80,
          },
          redelivered: false,
          data: Buffer.from('{"id":"o-1"}').toString('base64'),
        },
        {
          basicProperties: { headers: null, messageId: null, type: null, correlationId: null },
          redelivered: true,
          data: Buffer.from('second').toString('base64'),
        },
      ],
      'audit::with::colons::prod': [{ basicProperties: {}, redelivered: false, data: '' }],
    },
    ...overrides,
  };
}

describe('Amazon MQ events', () => {
  it('decodes base64 data, byte-array headers and the message properties, in order', () => {
    // Prepare
    const event = anAmazonMqEvent();
    // Act
    const deliveries = amazonMqDeliveries(event);
    // Assess
    expect(deliveries.map((d) => [d.queue, d.vhost])).toEqual([
      ['orders', '/'],
      ['orders', '/'],
      ['audit::with::colons', 'prod'],
    ]);
    const [first, second, third] = deliveries;
    expect(Buffer.from(first?.message.body ?? []).toString()).toBe('{"id":"o-1"}');
    expect(first?.message).toMatchObject({
      headers: { header1: 'value1', numberInHeader: '10', 'x-death': '[{"count":1,"queue":"q"}]' },
      messageId: 'm-1',
      type: 'order.created',
      correlationId: 'corr-1',
    });
    expect(second?.message).toEqual({
      body: Buffer.from('second'),
      headers: {},
      messageId: undefined,
      type: undefined,
      correlationId: undefined,
    });
    expect(third?.message.body.byteLength).toBe(0);
  });

  it('refuses an Amazon MQ for ActiveMQ event, and any event without rmqMessagesByQueue, storing nothing', async () => {
    // Prepare: the documented ActiveMQ event shape (https://docs.aws.amazon.com/lambda/latest/dg/with-mq.html).
    const activeMq = {
      eventSource: 'aws:mq',
      eventSourceArn: 'arn:aws:mq:us-east-2:111122223333:broker:test:b-9bcfa592-423a-4942-879d-eb284b418fc8',
      messages: [
        {
          messageID:
            'ID:b-9bcfa592-423a-4942-879d-eb284b418fc8-1.mq.us-east-2.amazonaws.com-37557-1234520418293-4:1:1:1:1',
          messageType: 'jms/text-message',
          deliveryMode: 1,
          data: 'QUJDOkFBQUE=',
          connectionId: 'myJMSCoID',
          redelivered: false,
          destination: { physicalName: 'testQueue' },
          timestamp: 1598827811958,
          brokerInTime: 1598827811958,
          brokerOutTime: 1598827811959,
          properties: { index: '1', doAlarm: 'false', myCustomProperty: 'value' },
        },
      ],
    } as unknown as AmazonMqRabbitEvent;
    const ingested: unknown[] = [];
    const ingestion: BrokerIngestionPort = {
      ingest: async (source, message) => {
        ingested.push({ source, message });
        throw new Error('not reached: nothing is stored from this event');
      },
    };
    const handle = createAmazonMqHandler({
      ingestion,
      sources: { orders: { type: 'amqp', queue: 'orders' } },
    });
    // Act / Assess
    expect(() => amazonMqDeliveries(activeMq)).toThrow(UnexpectedEventError);
    expect(() => amazonMqDeliveries(activeMq)).toThrow('"aws:mq"');
    await expect(handle(activeMq)).rejects.toThrow(UnexpectedEventError);
    const { rmqMessagesByQueue: _messages, ...withoutMessages } = anAmazonMqEvent();
    expect(() => amazonMqDeliveries(withoutMessages as AmazonMqRabbitEvent)).toThrow(UnexpectedEventError);
    expect(() =>
      amazonMqDeliveries({ ...anAmazonMqEvent(), rmqMessagesByQueue: { 'q::/': {} } } as never),
    ).toThrow(UnexpectedEventError);
    expect(ingested).toEqual([]);
  });

  it('splits queue keys at the last "::"', () => {
    expect(parseQueueKey('a::/')).toEqual({ queue: 'a', vhost: '/' });
    expect(parseQueueKey('plain')).toEqual({ queue: 'plain', vhost: '/' });
  });

  it('maps each queue to its AMQP source and refuses a queue named twice', () => {
    // Prepare
    const sources = {
      a: { type: 'amqp', queue: 'q1' },
      b: { type: 'kafka' },
      c: { type: 'amqp', queue: 'q2' },
    };
    // Act
    const byQueue = sourcesByQueue(sources);
    // Assess
    expect([...byQueue]).toEqual([
      ['q1', 'a'],
      ['q2', 'c'],
    ]);
    expect(() => sourcesByQueue({ ...sources, d: { type: 'amqp', queue: 'q1' } })).toThrow(
      /queue "q1" is already consumed by source a/,
    );
  });
});

describe('AMQP headers as text', () => {
  it('turns every AMQP field type into text', () => {
    // Act
    const headers = headersText({
      s: 'text',
      n: 7,
      big: 12345678901234567890n,
      t: true,
      bytes: Buffer.from('raw'),
      ts: { '!': 'timestamp', value: 1700000000 },
      table: { a: 1, b: Buffer.from('x') },
      list: [1, 'two'],
      none: null,
      missing: undefined,
    });
    // Assess
    expect(headers).toEqual({
      s: 'text',
      n: '7',
      big: '12345678901234567890',
      t: 'true',
      bytes: 'raw',
      ts: '1700000000',
      table: '{"a":1,"b":"x"}',
      list: '[1,"two"]',
    });
  });

  it('keeps byte arrays nested in tables and arrays losslessly, as at the top (Amazon MQ and amqplib alike)', () => {
    // Prepare: bytes that are not UTF-8 (c3 28) at the top, in an array and in a table, as x-death carries them.
    const bad = [0xc3, 0x28];
    // Act
    const lambda = headersText({ top: { bytes: bad }, list: [{ bytes: bad }], table: { k: { bytes: bad } } });
    const amqplib = headersText({
      list: [Buffer.from(bad), Buffer.from('ok')],
      table: { k: Buffer.from(bad), at: { '!': 'timestamp', value: 1700000000 } },
    });
    // Assess
    expect(lambda).toEqual({
      top: 'base64:wyg=',
      list: '["base64:wyg="]',
      table: '{"k":"base64:wyg="}',
    });
    expect(amqplib).toEqual({ list: '["base64:wyg=","ok"]', table: '{"k":"base64:wyg=","at":1700000000}' });
  });

  it('writes tables nested far deeper than the stack allows, and typed values in typed values, without recursion', () => {
    // Prepare: 20,000 levels (an Amazon MQ event's JSON.parse reads them; a recursive walk overflowed at ~2,000)
    let table: Record<string, unknown> = { leaf: Buffer.from([0xff]) };
    for (let i = 0; i < 20_000; i++) table = { a: table };
    let typed: unknown = 'inner';
    for (let i = 0; i < 20_000; i++) typed = { '!': 'timestamp', value: typed };
    // Act
    const headers = headersText({ deep: table, typed, list: [[[[]]]] });
    // Assess
    expect(headers.deep).toBe(`${'{"a":'.repeat(20_000)}{"leaf":"base64:/w=="}${'}'.repeat(20_000)}`);
    expect(headers.typed).toBe('inner');
    expect(headers.list).toBe('[[[[]]]]');
  });

  it('reads a table only as a byte array when it holds byte values, and never calls an inherited toJSON', () => {
    // Prepare: amqplib decodes a table by assignment, so a "__proto__" key makes its prototype a Buffer.
    const odd: Record<string, unknown> = { kept: 'yes' };
    Object.setPrototypeOf(odd, Buffer.from('bytes'));
    // Act
    const headers = headersText({
      odd,
      words: { bytes: ['a', 'b'] },
      numbers: { bytes: [1, 300] },
      real: { bytes: [104, 105] },
    });
    // Assess
    expect(headers).toEqual({
      odd: '{"kept":"yes"}',
      words: '{"bytes":["a","b"]}',
      numbers: '{"bytes":[1,300]}',
      real: 'hi',
    });
  });

  it('builds the inbox message of an amqplib delivery', () => {
    // Act
    const message = toBrokerMessage({
      content: Buffer.from('{}'),
      properties: {
        headers: { a: 'b' },
        messageId: 'id-1',
        type: '',
        correlationId: 'c',
      } as never,
    });
    // Assess
    expect(message).toEqual({
      body: Buffer.from('{}'),
      headers: { a: 'b' },
      messageId: 'id-1',
      type: undefined,
      correlationId: 'c',
    });
  });
});

describe('publisher options', () => {
  it('adds a heartbeat to the URL unless it has one', () => {
    expect(withHeartbeat('amqp://guest:guest@127.0.0.1:5672', 30)).toBe(
      'amqp://guest:guest@127.0.0.1:5672?heartbeat=30',
    );
    expect(withHeartbeat('amqp://h/vh?heartbeat=5', 30)).toBe('amqp://h/vh?heartbeat=5');
  });

  it('refuses a destination without url or exchange, naming both', () => {
    expect(() => rabbitmqPublisherFactory('events', { type: 'rabbitmq' })).toThrow(
      /destinations\.events\.url[\s\S]*destinations\.events\.exchange/,
    );
  });
});

describe('withLastDelivery', () => {
  const message = (count?: string): { headers: Record<string, string> } => ({
    headers: count === undefined ? {} : { 'x-delivery-count': count },
  });

  it('marks a redelivered message whose x-delivery-count reached the limit, and no other', () => {
    expect(withLastDelivery(message('3'), 3, true).lastDelivery).toBe(true);
    expect(withLastDelivery(message('2'), 3, true).lastDelivery).toBeUndefined();
    expect(withLastDelivery(message(), 3, true).lastDelivery).toBeUndefined();
    expect(withLastDelivery(message('x'), 3, true).lastDelivery).toBeUndefined();
  });

  it('marks nothing for a queue without a limit (0)', () => {
    expect(withLastDelivery(message('500'), 0, true).lastDelivery).toBeUndefined();
  });

  it("trusts no x-delivery-count on a first delivery (a publisher's, or a relayed one)", () => {
    expect(withLastDelivery(message('25'), 20, false).lastDelivery).toBeUndefined();
  });

  it('takes x-delivery-count out of the headers under any letter case, the other headers kept', () => {
    const forged = { headers: { 'x-delivery-count': '3', 'X-Delivery-Count': '9', kept: 'yes' } };
    expect(withLastDelivery(forged, 3, true)).toEqual({ headers: { kept: 'yes' }, lastDelivery: true });
    expect(withLastDelivery(forged, 3, false)).toEqual({ headers: { kept: 'yes' } });
    expect(forged.headers).toHaveProperty('x-delivery-count', '3');
  });
});
