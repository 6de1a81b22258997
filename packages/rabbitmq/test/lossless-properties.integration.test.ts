/**
 * The consumer on the machine's RabbitMQ and a real PostgreSQL, with messages whose AMQP strings are not UTF-8
 * (RabbitMQ passes any bytes in a shortstr or a longstr) and int64 header values past 2^53. amqplib decodes every
 * string with `toString('utf8')` (invalid bytes become U+FFFD) and every int64 as a Number: two message-ids that
 * differ only in such bytes became one idempotency key, and the second message was acknowledged as a duplicate and
 * lost without a log line (outside encodings audit). The consumer decodes content headers itself (amqp-lossless.ts):
 * a string whose bytes are not UTF-8 is `base64:` + their base64, an int64 keeps every digit.
 */
import type { InboxRow } from '@queuebox/core';
import { createBrokerIngestion, type Sources } from '@queuebox/inbox';
import { requireServices } from '@queuebox/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import { useAmqpAdmin } from '../../../test/brokers/support/amqp-admin.ts';
import { eventually, useBrokerTestStore } from '../../../test/brokers/support/store.ts';
import { createRabbitMqConsumer } from '../src/index.ts';
import { raw, sendRaw as sendRawTo } from './support/raw-publish.ts';

const needs = await requireServices('rabbitmq lossless properties', ['postgres', 'rabbitmq']);
const url = needs.url.rabbitmq;
const db = useBrokerTestStore('rabbitmq_lossless', needs.available ? needs.url.postgres : undefined);

const rabbit = useAmqpAdmin(needs.available ? url : undefined, 'qb.test.lossless');
const queue = rabbit.queue('q');

beforeAll(async () => {
  if (!needs.available) return;
  await rabbit.channel.assertQueue(queue, { durable: false });
});

const sources: Sources = { lossless: { type: 'amqp', eventTypeFromHeader: true } };

const sendRaw = (content: object, properties: Parameters<typeof sendRawTo>[3]) =>
  sendRawTo(rabbit.channel, queue, content, properties);
const base64 = (bytes: Buffer) => `base64:${bytes.toString('base64')}`;

async function rowsOf(count: number): Promise<InboxRow[]> {
  return eventually(`${count} inbox rows`, async () => {
    const rows = await db.inboxRows('lossless');
    return rows.length >= count ? rows : undefined;
  });
}

describe.skipIf(needs.skipReason)('RabbitMQ consumer: strings that are not UTF-8, int64 past 2^53', () => {
  it('stores two messages whose ids, types and header values differ only in bytes that are not UTF-8 as two rows, and keeps an int64 header exact', async () => {
    // Prepare: Latin-1 ids "…café" / "…cafè" (0xE9 / 0xE8), binary ids, header values 'A\xFFB' / 'A\xFEB', a header
    // name that is not UTF-8, int64 values past 2^53 at the top and in a nested table, and a valid UTF-8 id with a
    // byte-order mark and U+FFFD of its own, which stays the text it is.
    const failures: unknown[] = [];
    const consumer = createRabbitMqConsumer({
      source: 'lossless',
      url,
      queue,
      ingestion: createBrokerIngestion({ store: db.store.inbox, sources }),
      onError: (error) => failures.push(error),
    });
    const latin1 = (last: number) =>
      Buffer.concat([Buffer.from(`order-${rabbit.run}-caf`), Buffer.from([last])]);
    const binary = (a: number, b: number) => Buffer.from([0x00, a, 0xff, b, 0x80]);
    const text = `\uFEFFtext-${rabbit.run}-café-\uFFFD`;
    try {
      await consumer.start();
      // Act
      sendRaw(
        { n: 1 },
        {
          messageId: raw(latin1(0xe9)),
          type: raw(Buffer.from([0x74, 0xe9])),
          correlationId: raw(Buffer.from([0xc3, 0x28])),
          headers: {
            'x-city': raw(Buffer.from([0x4d, 0xfc, 0x6e])),
            'x-raw': raw(Buffer.from([0x41, 0xff, 0x42])),
            [raw(Buffer.from([0x78, 0xff]))]: 'name',
            big: { '!': 'long', value: 9007199254740993n },
            small: { '!': 'long', value: -9007199254740993n },
            nested: { deep: [{ '!': 'long', value: 9223372036854775807n }, raw(Buffer.from([0xfe]))] },
          },
        },
      );
      sendRaw(
        { n: 2 },
        {
          messageId: raw(latin1(0xe8)),
          type: raw(Buffer.from([0x74, 0xe8])),
          headers: {
            'x-city': raw(Buffer.from([0x4d, 0xe4, 0x6e])),
            'x-raw': raw(Buffer.from([0x41, 0xfe, 0x42])),
          },
        },
      );
      sendRaw({ n: 3 }, { messageId: raw(binary(0x80, 0x01)) });
      sendRaw({ n: 4 }, { messageId: raw(binary(0x81, 0x01)) });
      sendRaw({ n: 5 }, { messageId: text, headers: { 'x-text': 'caf\u00e9' } });
      const rows = await rowsOf(5);
      // Assess
      expect(rows).toHaveLength(5);
      const byN = new Map(rows.map((r) => [(r.payload as { n: number }).n, r]));
      expect(byN.get(1)?.idempotencyKey).toBe(base64(latin1(0xe9)));
      expect(byN.get(2)?.idempotencyKey).toBe(base64(latin1(0xe8)));
      expect(byN.get(3)?.idempotencyKey).toBe(base64(binary(0x80, 0x01)));
      expect(byN.get(4)?.idempotencyKey).toBe(base64(binary(0x81, 0x01)));
      expect(byN.get(5)?.idempotencyKey).toBe(text);
      expect(byN.get(1)?.eventType).toBe(base64(Buffer.from([0x74, 0xe9])));
      expect(byN.get(2)?.eventType).toBe(base64(Buffer.from([0x74, 0xe8])));
      expect(byN.get(1)?.headers).toMatchObject({
        'x-city': base64(Buffer.from([0x4d, 0xfc, 0x6e])),
        'x-raw': base64(Buffer.from([0x41, 0xff, 0x42])),
        big: '9007199254740993',
        small: '-9007199254740993',
        nested: `{"deep":["9223372036854775807","${base64(Buffer.from([0xfe]))}"]}`,
      });
      // A header name that is not UTF-8 is base64 too, its case kept (the inbox lower-cases other names).
      const named = Object.entries(byN.get(1)?.headers ?? {}).filter(([, value]) => value === 'name');
      expect(named.map(([name]) => name)).toEqual([base64(Buffer.from([0x78, 0xff]))]);
      expect(byN.get(2)?.headers).toMatchObject({
        'x-city': base64(Buffer.from([0x4d, 0xe4, 0x6e])),
        'x-raw': base64(Buffer.from([0x41, 0xfe, 0x42])),
      });
      expect(byN.get(5)?.headers['x-text']).toBe('caf\u00e9');
      expect(byN.get(1)?.correlationId).toBe(base64(Buffer.from([0xc3, 0x28])));
      expect(failures).toEqual([]);
      await eventually('the queue to drain', async () =>
        (await rabbit.channel.checkQueue(queue)).messageCount === 0 ? true : undefined,
      );
    } finally {
      await consumer.close();
    }
  });
});
