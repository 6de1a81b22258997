import { headers } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { jetStreamMessage, natsPublisherFactory, natsServerCredentials } from '../src/index.ts';

describe('JetStream messages for the inbox', () => {
  it('uses Nats-Msg-Id as the message id and stream:sequence@stored-time as the default key', () => {
    // Prepare
    const hdrs = headers();
    hdrs.set('Nats-Msg-Id', 'm-1');
    hdrs.set('x-tag', 'a');
    hdrs.append('x-tag', 'b');
    const data = new TextEncoder().encode('{"a":1}');
    const stored = 1_796_527_397_585_835_489n;
    // Act
    const message = jetStreamMessage('ORDERS', { data, headers: hdrs, seq: 42, timestampNanos: stored });
    const bare = jetStreamMessage('ORDERS', {
      data,
      headers: undefined,
      seq: 43,
      timestampNanos: stored + 1n,
    });
    // Assess: the stored time in full nanoseconds (beyond what a JS number holds exactly)
    expect(message).toEqual({
      body: data,
      headers: { 'Nats-Msg-Id': 'm-1', 'x-tag': 'a, b' },
      messageId: 'm-1',
      defaultIdempotencyKey: 'ORDERS:42@1796527397585835489',
    });
    expect(bare).toEqual({
      body: data,
      headers: {},
      messageId: undefined,
      defaultIdempotencyKey: 'ORDERS:43@1796527397585835490',
    });
  });

  it('gives the same sequence of a stream created again another default key', () => {
    // Prepare: sequence 1 of a stream, and sequence 1 of the stream of the same name created after it was deleted
    const data = new TextEncoder().encode('{}');
    const old = { data, headers: undefined, seq: 1, timestampNanos: 1_796_527_397_585_835_489n };
    const recreated = { ...old, timestampNanos: 1_796_527_460_000_000_001n };
    // Act
    const before = jetStreamMessage('ORDERS', old).defaultIdempotencyKey;
    const redelivered = jetStreamMessage('ORDERS', { ...old }).defaultIdempotencyKey;
    const after = jetStreamMessage('ORDERS', recreated).defaultIdempotencyKey;
    // Assess
    expect(redelivered).toBe(before);
    expect(after).not.toBe(before);
  });
});

describe('publisher options', () => {
  it('refuses a destination without servers', () => {
    expect(() => natsPublisherFactory('events', { type: 'nats' })).toThrow(/destinations\.events\.servers/);
  });
});

describe('credentials in NATS server URLs', () => {
  it('takes user and password, or a token, out of the URLs, percent-decoded', () => {
    // Act
    const user = natsServerCredentials(['nats://qb:p%40ss%3Aw@h1:4222', 'nats://h2:4222']);
    const token = natsServerCredentials(['tls://s3cr%23t@h1:4222', 'h2:4222']);
    const none = natsServerCredentials(['nats://h1:4222']);
    // Assess: nats.js reads none from a URL, so they become its options and leave the URLs
    expect(user).toEqual({ servers: ['nats://h1:4222', 'nats://h2:4222'], user: 'qb', pass: 'p@ss:w' });
    expect(token).toEqual({ servers: ['tls://h1:4222', 'h2:4222'], token: 's3cr#t' });
    expect(none).toEqual({ servers: ['nats://h1:4222'] });
  });

  it('refuses URLs with different credentials, naming them by position and never showing a secret', () => {
    // Act
    const refusal = (() => {
      try {
        natsServerCredentials(['nats://qb:one-secret@h1:4222', 'nats://qb:other-secret@h2:4222']);
        return undefined;
      } catch (error) {
        return error as Error;
      }
    })();
    // Assess
    expect(refusal?.message).toMatch(/servers\[1\].*other credentials than servers\[0\]/);
    expect(refusal?.message).not.toMatch(/secret/);
  });

  it("names the destination's servers in that refusal", () => {
    // Act
    const refusal = (() => {
      try {
        natsPublisherFactory('orders', {
          type: 'nats',
          servers: ['nats://qb:one-secret@h1:4222', 'nats://qb:other-secret@h2:4222'],
        } as { type: string });
        return undefined;
      } catch (error) {
        return error as Error;
      }
    })();
    // Assess
    expect(refusal?.message).toMatch(/destinations\.orders\.servers\[1\]/);
    expect(refusal?.message).not.toMatch(/secret/);
  });
});
