import { getEventListeners } from 'node:events';
import type { OutgoingMessage } from '@queuebox/core';
import { requireServices } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafkaTestKit, type KafkaTestKit } from '../../../test/brokers/support/kafka.ts';
import { startTcpProxy } from '../../../test/brokers/support/tcp-proxy.ts';
import { createKafkaPublisher, kafkaPublisherFactory } from '../src/index.ts';

const needs = await requireServices('kafka publisher', ['kafka']);
const brokers = needs.available ? needs.url.kafka.split(',') : [];

let kit: KafkaTestKit;
let topic: string;

beforeAll(async () => {
  if (!needs.available) return;
  kit = await createKafkaTestKit(brokers);
  topic = await kit.topic('pub', 3);
});

afterAll(async () => {
  await kit?.cleanup();
});

let nextId = 1;
function aMessage(overrides: Partial<OutgoingMessage> = {}): OutgoingMessage {
  const id = String(nextId++);
  return {
    id,
    topic: 'ignored',
    key: 'k-1',
    payload: { id, note: 'ü' },
    headers: { 'x-trace': `t-${id}` },
    attempt: 0,
    ...overrides,
  };
}

describe.runIf(needs.available)(`Kafka publisher on ${needs.via.kafka}`, () => {
  it('sends concurrent publishes with key, value and headers; one partition per key', async () => {
    // Prepare
    const publisher = createKafkaPublisher({ brokers, topic });
    const keys = ['a', 'b', 'c', 'd', 'e'];
    const messages = Array.from({ length: 40 }, (_, i) => aMessage({ key: keys[i % keys.length] ?? 'a' }));
    // One long-lived signal for every publish: what settled leaves no listener on it.
    const lifetime = new AbortController();
    try {
      // Act
      const outcomes = await Promise.all(messages.map((m) => publisher.publish(m, lifetime.signal)));
      const withoutKey = await publisher.publish(aMessage({ key: null, payload: { keyless: true } }));
      // Assess
      expect(outcomes.every((o) => o.kind === 'sent')).toBe(true);
      expect(getEventListeners(lifetime.signal, 'abort')).toHaveLength(0);
      expect(withoutKey).toEqual({ kind: 'sent' });
      const records = await kit.read(topic, 41);
      const sent = new Map(messages.map((m) => [m.id, m]));
      for (const record of records.filter((r) => r.key !== null)) {
        const original = sent.get(record.headers['message-id'] ?? '');
        expect(original).toBeDefined();
        expect(record.key).toBe(original?.key);
        expect(JSON.parse(record.value ?? '')).toEqual(original?.payload);
        expect(record.headers).toMatchObject({
          'x-trace': `t-${original?.id}`,
          'content-type': 'application/json',
        });
      }
      for (const key of keys) {
        expect(new Set(records.filter((r) => r.key === key).map((r) => r.partition)).size).toBe(1);
      }
      expect(records.find((r) => r.key === null)?.value).toBe('{"keyless":true}');
    } finally {
      await publisher.close();
    }
  });

  it('dead-letters only the message the broker refuses as too large', async () => {
    // Prepare: the broker's default max.message.bytes is about 1 MiB
    const publisher = createKafkaPublisher({ brokers, topic });
    try {
      // Act
      const [small, large] = await Promise.all([
        publisher.publish(aMessage({ key: 'size' })),
        publisher.publish(aMessage({ key: 'size-2', payload: { blob: 'x'.repeat(2 * 1024 * 1024) } })),
      ]);
      const emptyTopic = await createKafkaPublisher({ brokers, topic: '{{ key }}' }).publish(
        aMessage({ key: null }),
      );
      // Assess
      expect(small).toEqual({ kind: 'sent' });
      expect(large).toMatchObject({ kind: 'dead' });
      expect(large.kind === 'dead' && large.error).toMatch(/MESSAGE_TOO_LARGE|too large/i);
      expect(emptyTopic).toMatchObject({ kind: 'dead', error: expect.stringMatching(/empty topic/) });
    } finally {
      await publisher.close();
    }
  });

  it('sends the rows of healthy topics when one row goes to a topic the broker refuses; only that row is retried', async () => {
    // Prepare: a topic that does not exist, with auto-creation off (as on most production clusters)
    const healthy = await kit.topic('iso', 1);
    const publisher = createKafkaPublisher({ brokers, topic: '{{ topic }}', allowAutoTopicCreation: false });
    const missing = `${healthy}-missing`;
    const good = Array.from({ length: 30 }, (_, i) => aMessage({ topic: healthy, key: `iso-${i % 3}` }));
    try {
      // Act: all publishes of one turn go out in one produce request
      const [poison, ...outcomes] = await Promise.all([
        publisher.publish(aMessage({ topic: missing, key: 'iso-poison' })),
        ...good.map((m) => publisher.publish(m)),
      ]);
      // Assess
      expect(outcomes.map((o) => o.kind)).toEqual(good.map(() => 'sent'));
      expect(poison).toMatchObject({ kind: 'retry' });
      expect(poison.kind === 'retry' && poison.error).toMatch(/UNKNOWN_TOPIC_OR_PARTITION/);
      const records = await kit.read(healthy, good.length);
      expect(new Set(records.map((r) => r.headers['message-id']))).toEqual(new Set(good.map((m) => m.id)));
    } finally {
      await publisher.close();
    }
  });

  it('retries while the bootstrap broker is unreachable and delivers once it answers', async () => {
    // Prepare: the bootstrap address is a proxy we control; the broker itself is the machine's, never stopped
    const [host, port] = (brokers[0] ?? '').split(':');
    const proxy = await startTcpProxy({ host: host ?? '127.0.0.1', port: Number(port) });
    const publisher = createKafkaPublisher({
      brokers: [`127.0.0.1:${proxy.port}`],
      topic,
      connectionTimeoutMs: 1000,
    });
    try {
      await proxy.stop();
      // Act
      const during = await publisher.publish(aMessage({ key: 'outage' }));
      await proxy.start();
      const after = await publisher.publish(aMessage({ key: 'outage', payload: { after: true } }));
      // Assess
      expect(during).toMatchObject({ kind: 'retry' });
      expect(during.kind === 'retry' && during.error).toMatch(/ECONNREFUSED|Connection error|connect/i);
      expect(after).toEqual({ kind: 'sent' });
    } finally {
      await publisher.close();
      await proxy.stop();
    }
  });

  it('answers retry when no broker listens at all', async () => {
    // Prepare
    const publisher = createKafkaPublisher({ brokers: ['127.0.0.1:1'], topic, connectionTimeoutMs: 500 });
    try {
      // Act
      const outcome = await publisher.publish(aMessage());
      // Assess
      expect(outcome).toMatchObject({ kind: 'retry' });
    } finally {
      await publisher.close();
    }
  });
  /** How many records `name` holds, all partitions together. */
  async function recordsIn(name: string): Promise<number> {
    const offsets = await kit.admin.fetchTopicOffsets(name);
    return offsets.reduce((sum, o) => sum + Number(o.high) - Number(o.low), 0);
  }

  it('dead-letters a message whose header value is not text; the messages of the same request are sent', async () => {
    // Prepare: what a transform function registered in code could hand over, next to healthy rows
    const target = await kit.topic('hdr', 2);
    const publisher = createKafkaPublisher({ brokers, topic: target });
    const good = Array.from({ length: 20 }, (_, i) => aMessage({ key: `hdr-${i}` }));
    try {
      // Act: all publishes of one turn go out in one produce request
      const [numeric, notANumber, ...outcomes] = await Promise.all([
        publisher.publish(aMessage({ key: 'hdr-poison', headers: { 'x-tenant': 7 as never } })),
        publisher.publish(aMessage({ key: 'hdr-nan', headers: { 'x-n': Number.NaN as never } })),
        ...good.map((m) => publisher.publish(m)),
      ]);
      // Assess: before the fix kafkajs's encoding error failed the whole request, every row a retry
      expect(numeric).toMatchObject({ kind: 'dead', error: expect.stringMatching(/"x-tenant".*not text/) });
      expect(notANumber).toMatchObject({ kind: 'dead', error: expect.stringMatching(/"x-n"/) });
      expect(outcomes.map((o) => o.kind)).toEqual(good.map(() => 'sent'));
      expect(await recordsIn(target)).toBe(good.length);
    } finally {
      await publisher.close();
    }
  });

  it('re-sends a request that failed for another reason than Kafka message by message: only the failing one is retried', async () => {
    // Prepare: a key kafkajs cannot encode (no row has one: the publisher's guard against what it does not foresee)
    const target = await kit.topic('enc', 2);
    const publisher = createKafkaPublisher({ brokers, topic: target });
    const good = Array.from({ length: 10 }, (_, i) => aMessage({ key: `enc-${i}` }));
    try {
      // Act
      const [odd, ...outcomes] = await Promise.all([
        publisher.publish(aMessage({ key: 5 as never })),
        ...good.map((m) => publisher.publish(m)),
      ]);
      // Assess
      expect(odd).toMatchObject({ kind: 'retry' });
      expect(outcomes.map((o) => o.kind)).toEqual(good.map(() => 'sent'));
      expect(await recordsIn(target)).toBe(good.length);
    } finally {
      await publisher.close();
    }
  });

  it('does not create a missing topic unless allowAutoTopicCreation is set (from the configuration too)', async () => {
    // Prepare: a healthy topic and two that do not exist (the broker allows auto-creation)
    const healthy = await kit.topic('auto', 1);
    const missing = `${healthy}-missing`;
    const created = `${healthy}-created`;
    const byDefault = createKafkaPublisher({ brokers, topic: '{{ topic }}' });
    const allowing = kafkaPublisherFactory('allowing', {
      type: 'kafka',
      brokers,
      allowAutoTopicCreation: true,
    } as never);
    try {
      // Act
      const [poison, ...outcomes] = await Promise.all([
        byDefault.publish(aMessage({ topic: missing, key: 'auto-poison' })),
        ...Array.from({ length: 5 }, (_, i) =>
          byDefault.publish(aMessage({ topic: healthy, key: `auto-${i}` })),
        ),
      ]);
      const allowed = await allowing.publish(aMessage({ topic: created, key: 'auto-created' }));
      const topics = await kit.admin.listTopics();
      // Assess: before the fix the missing topic was created and its row sent
      expect(poison).toMatchObject({
        kind: 'retry',
        error: expect.stringMatching(/UNKNOWN_TOPIC_OR_PARTITION/),
      });
      expect(outcomes.map((o) => o.kind)).toEqual(['sent', 'sent', 'sent', 'sent', 'sent']);
      expect(topics).not.toContain(missing);
      expect(allowed).toEqual({ kind: 'sent' });
      expect(topics).toContain(created);
    } finally {
      await byDefault.close();
      await allowing.close();
      await kit.admin.deleteTopics({ topics: [missing, created] }).catch(() => undefined);
    }
  });

  it('bounds the bytes of one produce request: rows that together exceed the broker request limit are all sent', async () => {
    // Prepare: 180 rows of 600 KiB published together make ~105 MiB, over the broker's socket.request.max.bytes
    // (100 MiB by default), which drops the connection of such a request
    const target = await kit.topic('big', 4);
    const publisher = createKafkaPublisher({ brokers, topic: target, requestTimeoutMs: 30_000 });
    const pad = 'x'.repeat(600 * 1024);
    try {
      // Act
      const outcomes = await Promise.all(
        Array.from({ length: 180 }, (_, i) =>
          publisher.publish(aMessage({ key: `big-${i}`, payload: { pad } })),
        ),
      );
      // Assess: before the fix every row was a retry (write EPIPE), round after round
      expect(outcomes.filter((o) => o.kind !== 'sent')).toEqual([]);
      expect(await recordsIn(target)).toBe(180);
    } finally {
      await publisher.close();
    }
  }, 120_000);
});
