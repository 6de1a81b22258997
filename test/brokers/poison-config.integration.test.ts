/**
 * A broker source's deadAfterFailures and deadAfterMs go from the configuration, as it is validated, into the broker
 * ingestion that createServices builds for both shells (the local runtime and the Lambda functions).
 */
import { randomUUID } from 'node:crypto';
import { parseConfig } from '@queuebox/config';
import { ConfigError, MessageState } from '@queuebox/core';
import { requireServices } from '@queuebox/testing';
import { createServices } from '@queuebox/use-cases';
import { describe, expect, it } from 'vitest';
import { useBrokerTestStore } from './support/store.ts';

const needs = await requireServices('broker poison config', ['postgres']);
const db = useBrokerTestStore('poison_config', needs.available ? needs.url.postgres : undefined);

const kafka = {
  type: 'kafka',
  brokers: ['127.0.0.1:9092'],
  topics: ['t'],
  transform: { function: 'strict' },
};

function problems(source: Record<string, unknown>): string[] {
  try {
    parseConfig({ database: { url: 'postgres://u@127.0.0.1/db' }, sources: { s: source } });
    return [];
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return error.issues.map((i) => `${i.path}: ${i.message}`);
  }
}

describe('deadAfterFailures and deadAfterMs', () => {
  it('are broker-source keys with bounds', () => {
    expect(problems({ ...kafka, deadAfterFailures: 1, deadAfterMs: 0 })).toEqual([]);
    expect(
      problems({ type: 'nats', servers: ['nats://h:4222'], stream: 'S', deadAfterFailures: 1000 }),
    ).toEqual([]);
    expect(problems({ type: 'amqp', url: 'amqp://h', queue: 'q', deliveryLimit: 3 })).toEqual([]);
    expect(problems({ type: 'amqp', url: 'amqp://h', queue: 'q', deliveryLimit: 0 })).toEqual([]);
    expect(problems({ type: 'amqp', url: 'amqp://h', queue: 'q', deliveryLimit: -1 })).toEqual([
      'sources.s.deliveryLimit: must be at least 0',
    ]);
    expect(problems({ ...kafka, deadAfterFailures: 0 })).toEqual([
      'sources.s.deadAfterFailures: must be at least 1',
    ]);
    expect(problems({ ...kafka, deadAfterMs: 86_400_001 })).toEqual([
      'sources.s.deadAfterMs: must be at most 86400000 ms (24 h)',
    ]);
    // An HTTP source answers its sender instead: the sender retries.
    expect(
      problems({ type: 'http', auth: { scheme: 'none' }, eventTypePath: '$.t', deadAfterFailures: 3 }),
    ).toEqual(['sources.s.deadAfterFailures: unknown key "deadAfterFailures"']);
  });

  it.skipIf(needs.skipReason)('reach the broker ingestion the services build', async () => {
    // Prepare
    const config = parseConfig({
      database: { url: needs.url.postgres },
      sources: { strict: { ...kafka, deadAfterFailures: 2, deadAfterMs: 0 } },
    });
    const services = createServices(config, db.store, {
      inboxTransforms: {
        strict: () => {
          throw new Error('always');
        },
      },
    });
    const message = {
      body: new TextEncoder().encode('{}'),
      headers: {},
      defaultIdempotencyKey: randomUUID(),
    };
    try {
      // Act / Assess
      await expect(services.brokerIngestion.ingest('strict', message)).rejects.toThrow('always');
      const result = await services.brokerIngestion.ingest('strict', message);
      expect(result.status).toBe('dead');
      expect((await db.store.inbox.get(result.id))?.state).toBe(MessageState.Dead);
    } finally {
      await services.close();
    }
  });
});
