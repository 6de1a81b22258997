/** `maxMessageBytes` of the RabbitMQ publisher: its bounds, and the broker's limit read from a channel close. */
import { ConfigError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import {
  brokerMaxMessageSize,
  createRabbitMqPublisher,
  DEFAULT_MAX_MESSAGE_BYTES,
  MAX_MESSAGE_BYTES_LIMIT,
  rabbitmqPublisherFactory,
} from '../src/index.ts';

/** An error as amqplib closes a channel with (`lib/channel.js`). */
function channelClosed(text: string): Error {
  return Object.assign(
    new Error(`Channel closed by server: 406 (PRECONDITION-FAILED) with message "${text}"`),
    {
      code: 406,
    },
  );
}

describe('maxMessageBytes', () => {
  it('defaults to 128 MiB (RabbitMQ 3.x) and goes up to 512 MiB, the highest max_message_size RabbitMQ allows', () => {
    expect(DEFAULT_MAX_MESSAGE_BYTES).toBe(128 * 1024 * 1024);
    expect(MAX_MESSAGE_BYTES_LIMIT).toBe(512 * 1024 * 1024);
  });

  it('is refused by the factory and the publisher unless a whole number of bytes from 1 to 512 MiB', async () => {
    const fields = { type: 'rabbitmq' as const, url: 'amqp://127.0.0.1', exchange: 'events' };
    for (const value of [0, -5, 1.5, Number.NaN, MAX_MESSAGE_BYTES_LIMIT + 1, '1024']) {
      expect(() =>
        rabbitmqPublisherFactory('events', { ...fields, maxMessageBytes: value } as never),
      ).toThrow(ConfigError);
      expect(() =>
        rabbitmqPublisherFactory('events', { ...fields, maxMessageBytes: value } as never),
      ).toThrow(/destinations\.events\.maxMessageBytes/);
      expect(() =>
        createRabbitMqPublisher({ ...fields, name: 'events', maxMessageBytes: value as number }),
      ).toThrow(/destinations\.events\.maxMessageBytes.*must be an integer from 1 to 536870912/);
    }
    for (const value of [1, 1024, MAX_MESSAGE_BYTES_LIMIT, undefined]) {
      await rabbitmqPublisherFactory('events', { ...fields, maxMessageBytes: value } as never).close();
    }
  });

  it('dead-letters a body over it before connecting, counting bytes, not characters', async () => {
    // Prepare: no broker listens there; a message that is sent would answer retry
    const publisher = createRabbitMqPublisher({
      name: 'events',
      url: 'amqp://guest:guest@127.0.0.1:1',
      exchange: 'events',
      maxMessageBytes: 100,
    });
    const message = { id: '1', topic: 't', key: null, headers: {}, attempt: 0 };
    try {
      // Act: 60 characters, 122 bytes of JSON
      const outcome = await publisher.publish({ ...message, payload: 'ü'.repeat(60) });
      // Assess
      expect(outcome).toEqual({
        kind: 'dead',
        error: 'message of 122 bytes is over maxMessageBytes 100 of destination "events"',
      });
    } finally {
      await publisher.close();
    }
  });
});

describe('brokerMaxMessageSize', () => {
  it("reads the broker's limit from a channel it closed over a message too large", () => {
    expect(
      brokerMaxMessageSize(
        channelClosed(
          'PRECONDITION_FAILED - message size 141557762 is larger than configured max size 134217728',
        ),
      ),
    ).toBe(134_217_728);
    expect(
      brokerMaxMessageSize(
        channelClosed('PRECONDITION_FAILED - message size 536870913 is larger than max size 536870912'),
      ),
    ).toBe(536_870_912);
  });

  it('says nothing of any other reason', () => {
    expect(brokerMaxMessageSize(undefined)).toBeUndefined();
    expect(brokerMaxMessageSize('message size 5 is larger than max size 4')).toBeUndefined();
    expect(
      brokerMaxMessageSize(
        channelClosed('PRECONDITION_FAILED - invalid message: {unacceptable_type_in_header,"CC",longstr}'),
      ),
    ).toBeUndefined();
    expect(brokerMaxMessageSize(new Error("NOT_FOUND - no exchange 'x' in vhost '/'"))).toBeUndefined();
  });
});
