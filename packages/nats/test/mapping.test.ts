import { headers } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { jetStreamMessage, natsPublisherFactory } from '../src/index.ts';

describe('JetStream messages for the inbox', () => {
  it('uses Nats-Msg-Id as the message id and stream:sequence as the default key', () => {
    // Prepare
    const hdrs = headers();
    hdrs.set('Nats-Msg-Id', 'm-1');
    hdrs.set('x-tag', 'a');
    hdrs.append('x-tag', 'b');
    const data = new TextEncoder().encode('{"a":1}');
    // Act
    const message = jetStreamMessage('ORDERS', { data, headers: hdrs, seq: 42 });
    const bare = jetStreamMessage('ORDERS', { data, headers: undefined, seq: 43 });
    // Assess
    expect(message).toEqual({
      body: data,
      headers: { 'Nats-Msg-Id': 'm-1', 'x-tag': 'a, b' },
      messageId: 'm-1',
      defaultIdempotencyKey: 'ORDERS:42',
    });
    expect(bare).toEqual({
      body: data,
      headers: {},
      messageId: undefined,
      defaultIdempotencyKey: 'ORDERS:43',
    });
  });
});

describe('publisher options', () => {
  it('refuses a destination without servers', () => {
    expect(() => natsPublisherFactory('events', { type: 'nats' })).toThrow(/destinations\.events\.servers/);
  });
});
