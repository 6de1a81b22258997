/**
 * The consumer when the lossless decoding cannot be installed (an amqplib whose internals changed shape, simulated
 * here): it says so at connect, and a message-id that amqplib decoded with U+FFFD is not used as the idempotency key
 * (two ids that differ only in bytes that are not UTF-8 would be one key, the second message dropped as a
 * duplicate): each such message is stored under a key of its own, and reported.
 */
import { createBrokerIngestion } from '@queuebox/inbox';
import { requireServices } from '@queuebox/testing';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { useAmqpAdmin } from '../../../test/brokers/support/amqp-admin.ts';
import { eventually, useBrokerTestStore } from '../../../test/brokers/support/store.ts';
import { createRabbitMqConsumer, LossyMessageIdError } from '../src/index.ts';
import { raw, sendRaw } from './support/raw-publish.ts';

vi.mock('../src/amqp-lossless.ts', async (importOriginal) => {
  const original = await importOriginal<typeof import('../src/amqp-lossless.ts')>();
  return {
    ...original,
    installLosslessDecoding: () => {
      throw new original.LosslessDecodingUnavailableError('simulated: amqplib internals changed');
    },
  };
});

const needs = await requireServices('rabbitmq lossless fallback', ['postgres', 'rabbitmq']);
const url = needs.url.rabbitmq;
const db = useBrokerTestStore('rabbitmq_lossy', needs.available ? needs.url.postgres : undefined);

const rabbit = useAmqpAdmin(needs.available ? url : undefined, 'qb.test.lossy');
const queue = rabbit.queue('q');

beforeAll(async () => {
  if (!needs.available) return;
  await rabbit.channel.assertQueue(queue, { durable: false });
});

describe.skipIf(needs.skipReason)('RabbitMQ consumer without lossless decoding', () => {
  it('reports it, and stores two messages whose ids differ only in bytes that are not UTF-8 as two rows', async () => {
    // Prepare
    const failures: unknown[] = [];
    const consumer = createRabbitMqConsumer({
      source: 'lossy',
      url,
      queue,
      ingestion: createBrokerIngestion({ store: db.store.inbox, sources: { lossy: { type: 'amqp' } } }),
      onError: (error) => failures.push(error),
    });
    try {
      await consumer.start();
      // Act
      sendRaw(rabbit.channel, queue, { n: 1 }, { messageId: raw(Buffer.from([0x63, 0x61, 0x66, 0xe9])) });
      sendRaw(rabbit.channel, queue, { n: 2 }, { messageId: raw(Buffer.from([0x63, 0x61, 0x66, 0xe8])) });
      sendRaw(rabbit.channel, queue, { n: 3 }, { messageId: 'plain-id' });
      const rows = await eventually('3 inbox rows', async () => {
        const found = await db.inboxRows('lossy');
        return found.length >= 3 ? found : undefined;
      });
      // Assess
      const byN = new Map(rows.map((r) => [(r.payload as { n: number }).n, r.idempotencyKey]));
      expect(byN.get(1)).toMatch(/^random:/);
      expect(byN.get(2)).toMatch(/^random:/);
      expect(byN.get(3)).toBe('plain-id');
      const names = failures.map((f) => (f as Error).name);
      expect(names).toContain('LosslessDecodingUnavailableError');
      expect(failures.filter((f) => f instanceof LossyMessageIdError)).toHaveLength(2);
    } finally {
      await consumer.close();
    }
  });
});
