/** The pure rules of packages/aws: attribute names and values, group ids, ARNs, SQS messages, entry outcomes. */
import { describe, expect, it } from 'vitest';
import {
  attributedMessage,
  attributeName,
  eventBridgeEntryResult,
  messageAttributes,
  messageGroupIdOf,
  queueArnOfUrl,
  regionOfArn,
  regionOfQueueUrl,
  sqsEntryResult,
  sqsInboxMessage,
} from '../src/index.ts';

describe('attribute names', () => {
  it.each([
    ['x-trace', 'x-trace'],
    ['Content Type', 'Content_Type'],
    ['ünï', '_n_'],
    ['..a..b..', 'a.b'],
    ['AWS.thing', undefined],
    ['amazon.Thing', undefined],
    ['...', undefined],
    ['a'.repeat(257), undefined],
  ])('%s → %s', (header, expected) => {
    expect(attributeName(header)).toBe(expected);
  });
});

describe('message attributes', () => {
  it('puts message-id first, drops empty, non-XML, reserved and repeated names, and stops at 10', () => {
    // Prepare
    const headers: Record<string, string> = { a: '1', empty: '', bad: 'x\uFFFFy', 'AWS.x': 'r', 'a ': 'dup' };
    for (let n = 0; n < 12; n++) headers[`h${n}`] = `v${n}`;
    headers['message-id'] = '42';

    // Act
    const mapped = messageAttributes(headers, 'message-id');

    // Assess
    expect(Object.keys(mapped.attributes)).toEqual([
      'message-id',
      'a',
      'a_',
      'h0',
      'h1',
      'h2',
      'h3',
      'h4',
      'h5',
      'h6',
    ]);
    expect(mapped.dropped).toEqual(['empty', 'bad', 'AWS.x', 'h7', 'h8', 'h9', 'h10', 'h11']);
    expect(mapped.bytes).toBe(
      Object.entries(mapped.attributes).reduce(
        (sum, [k, v]) => sum + k.length + 'String'.length + v.length,
        0,
      ),
    );
  });

  it('sizes a message as body plus attributes and refuses one over the limit', () => {
    // Prepare
    const message = { id: '7', key: 'k', payload: { a: 'b' }, headers: { 'x-y': 'z' } };

    // Act
    const fits = attributedMessage(message, {
      service: 'SQS',
      name: 'q',
      maxMessageBytes: 1024,
      fifoDefaultGroup: 'g',
    });
    const tooBig = attributedMessage(message, { service: 'SNS', name: 't', maxMessageBytes: 20 });

    // Assess
    expect(fits).toMatchObject({
      body: '{"a":"b"}',
      bytes: 9 + ('message-id' + 'String' + '7').length + ('x-y' + 'String' + 'z').length,
      fifo: { MessageGroupId: 'k', MessageDeduplicationId: '7' },
    });
    expect(tooBig).toEqual({
      dead: 'the message is 36 bytes (payload 9 + attributes 27); SNS destination "t" accepts at most 20 bytes per message, so it can never be sent',
    });
  });
});

describe('FIFO group ids', () => {
  it('keeps a key SQS accepts and hashes one it does not, the same way every time', () => {
    expect(messageGroupIdOf('order-7/line:2')).toBe('order-7/line:2');
    expect(messageGroupIdOf('clé')).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(messageGroupIdOf('clé')).toBe(messageGroupIdOf('clé'));
    expect(messageGroupIdOf('x'.repeat(129))).not.toBe('x'.repeat(129));
  });
});

describe('regions and ARNs', () => {
  it('reads them from AWS queue URLs and ARNs, and nothing from a local endpoint', () => {
    expect(regionOfQueueUrl('https://sqs.eu-west-1.amazonaws.com/123456789012/orders')).toBe('eu-west-1');
    expect(regionOfQueueUrl('https://eu-central-1.queue.amazonaws.com/123456789012/orders')).toBe(
      'eu-central-1',
    );
    expect(regionOfQueueUrl('http://127.0.0.1:9324/000000000000/orders')).toBeUndefined();
    expect(regionOfArn('arn:aws:sns:us-east-2:123456789012:t')).toBe('us-east-2');
    expect(queueArnOfUrl('https://sqs.eu-west-1.amazonaws.com/123456789012/jobs.fifo')).toBe(
      'arn:aws:sqs:eu-west-1:123456789012:jobs.fifo',
    );
    expect(queueArnOfUrl('https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q')).toBe(
      'arn:aws-cn:sqs:cn-north-1:123456789012:q',
    );
    expect(queueArnOfUrl('https://sqs.us-gov-west-1.amazonaws.com/123456789012/q')).toBe(
      'arn:aws-us-gov:sqs:us-gov-west-1:123456789012:q',
    );
    expect(queueArnOfUrl('http://127.0.0.1:9324/000000000000/orders')).toBeUndefined();
  });

  it('takes queue names up to 80 characters, the .fifo suffix counted, and refuses longer ones', () => {
    // Prepare
    const url = (name: string) => `https://sqs.eu-west-1.amazonaws.com/123456789012/${name}`;
    const arn = (name: string) => `arn:aws:sqs:eu-west-1:123456789012:${name}`;
    const standard80 = 's'.repeat(80);
    const fifo80 = `${'f'.repeat(75)}.fifo`;

    // Act / Assess
    expect(queueArnOfUrl(url(standard80))).toBe(arn(standard80));
    expect(queueArnOfUrl(url('s'.repeat(81)))).toBeUndefined();
    expect(queueArnOfUrl(url(fifo80))).toBe(arn(fifo80));
    expect(queueArnOfUrl(url(`${'f'.repeat(76)}.fifo`))).toBeUndefined();
    expect(queueArnOfUrl(url('a'))).toBe(arn('a'));
    expect(queueArnOfUrl(url('a.fifo'))).toBe(arn('a.fifo'));
    expect(queueArnOfUrl(url('orders.fifo.fifo'))).toBeUndefined();
  });
});

describe('SQS messages in the inbox', () => {
  it('takes attributes as headers and the SQS id as key, never an attribute of its own accord', () => {
    // Act
    const message = sqsInboxMessage({
      messageId: 'sqs-1',
      body: '{"a":1}',
      groupId: 'g-1',
      attributes: {
        'message-id': { dataType: 'String', stringValue: 'out-9' },
        n: { DataType: 'Number', StringValue: '3' },
        bin: { dataType: 'Binary', binaryValue: 'AAE=' },
      },
    });
    // Assess
    expect(Buffer.from(message.body).toString()).toBe('{"a":1}');
    expect(message.headers).toEqual({
      'message-id': 'out-9',
      n: '3',
      bin: 'AAE=',
      'sqs-message-group-id': 'g-1',
    });
    expect(message.messageId).toBeUndefined();
    expect(message.defaultIdempotencyKey).toBe('sqs-1');
  });

  it('keys a message without a message-id attribute by its SQS id alone', () => {
    const message = sqsInboxMessage({ messageId: 'sqs-2', body: '{}', groupId: 'g-1', attributes: {} });

    expect(message.messageId).toBeUndefined();
    expect(message.defaultIdempotencyKey).toBe('sqs-2');
  });
});

describe('per-entry outcomes', () => {
  it('dies on a sender fault, retries on throttling or a service fault', () => {
    expect(sqsEntryResult({ Code: 'InvalidParameterValue', SenderFault: true })).toMatchObject({
      retryable: false,
    });
    expect(sqsEntryResult({ Code: 'KMS.ThrottlingException', SenderFault: true })).toMatchObject({
      retryable: true,
    });
    expect(sqsEntryResult({ Code: 'InternalError', SenderFault: false })).toMatchObject({ retryable: true });
    expect(eventBridgeEntryResult({ ErrorCode: 'MalformedDetail' })).toMatchObject({ retryable: false });
    expect(eventBridgeEntryResult({ ErrorCode: 'ThrottlingException' })).toMatchObject({ retryable: true });
  });
});
