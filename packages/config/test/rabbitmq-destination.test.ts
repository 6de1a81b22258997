/** `maxMessageBytes` of `type: rabbitmq` destinations: default, bounds, and refusals at their path. */
import type { ConfigIssue } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { configJsonSchema, parseConfig, validateConfig } from '../src/index.ts';
import {
  RABBITMQ_MAX_MESSAGE_BYTES_DEFAULT,
  RABBITMQ_MAX_MESSAGE_BYTES_LIMIT,
} from '../src/schema/destinations.ts';

function issuesOf(input: unknown): ConfigIssue[] {
  const result = validateConfig(input);
  return result.ok ? [] : result.issues;
}

const rabbit = (overrides: Record<string, unknown> = {}) => ({
  destinations: { rabbit: { type: 'rabbitmq', url: 'amqp://127.0.0.1', exchange: 'events', ...overrides } },
});

describe('rabbitmq destination maxMessageBytes', () => {
  it('defaults to 128 MiB, the max_message_size default of RabbitMQ 3.x and Amazon MQ', () => {
    // Act
    const config = parseConfig(rabbit());

    // Assess
    expect(RABBITMQ_MAX_MESSAGE_BYTES_DEFAULT).toBe(128 * 1024 * 1024);
    expect(config.destinations.rabbit).toEqual({
      type: 'rabbitmq',
      url: 'amqp://127.0.0.1',
      exchange: 'events',
      routingKey: '{{ topic }}',
      persistent: true,
      maxMessageBytes: 134_217_728,
    });
  });

  it('takes any whole number of bytes from 1 to 512 MiB, the highest max_message_size RabbitMQ allows', () => {
    expect(RABBITMQ_MAX_MESSAGE_BYTES_LIMIT).toBe(512 * 1024 * 1024);
    for (const value of [1, 1024, 134_217_728, 536_870_912]) {
      expect(issuesOf(rabbit({ maxMessageBytes: value })), String(value)).toEqual([]);
      expect(parseConfig(rabbit({ maxMessageBytes: value })).destinations.rabbit).toMatchObject({
        maxMessageBytes: value,
      });
    }
  });

  it('refuses anything else at its path', () => {
    for (const value of [0, -1, 1.5, 536_870_913, '16MB', null]) {
      expect(
        issuesOf(rabbit({ maxMessageBytes: value })).map((i) => i.path),
        JSON.stringify(value),
      ).toEqual(['destinations.rabbit.maxMessageBytes']);
    }
  });

  it('describes the key for editors', () => {
    // Act
    const text = JSON.stringify(configJsonSchema());

    // Assess
    expect(text).toContain('max_message_size');
  });
});
