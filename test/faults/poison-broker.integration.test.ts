/**
 * Poison broker messages (issue 13): a Kafka record or an Amazon MQ message whose header bytes hold 0x00, or are not
 * UTF-8, used to make PostgreSQL refuse the row ("unsupported Unicode escape sequence") on every retry, so Lambda's
 * Kafka mapping retried the batch for ever (the partition stalled) and RabbitMQ redelivered it for ever. Each batch
 * here is [good, poison…, good] through the real entry points against the real PostgreSQL: the kafka-source and
 * amqp-source functions with real-shaped events, the local consumers' record mapping through the shared broker
 * ingestion, and nats-source-tick pulling from the machine's NATS. Every message is stored (the poison header as
 * `base64:`), the batch never fails, and a redelivery is all duplicates.
 */
import { randomBytes } from 'node:crypto';
import { type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection, headers as natsHeaders } from '@nats-io/transport-node';
import { ingestInOrder } from '@queuebox/core';
import { createBrokerIngestion } from '@queuebox/inbox';
import { consumedRecordMessage } from '@queuebox/kafka';
import { headersText } from '@queuebox/rabbitmq';
import { openPostgresStore } from '@queuebox/store-postgres';
import { findNats, requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler as createAmqpSource } from '../../functions/amqp-source.ts';
import { createHandler as createKafkaSource } from '../../functions/kafka-source.ts';
import { createHandler as createNatsSourceTick } from '../../functions/nats-source-tick.ts';
import {
  aLambdaContext,
  aManualClock,
  anAmazonMqEvent,
  anInvokeRecorder,
  anMskEvent,
  aTickEvent,
  brokerSourcesYaml,
  useMigratedFunctions,
} from '../functions/support.ts';

const needs = await requireServices('faults: poison broker', ['postgres']);
const nats = await findNats();

const run = randomBytes(4).toString('hex');
const stream = `QB_POISON_${run}`;
const subjectPrefix = `qb.poison.${run}`;
const NUL_VALUE = [0x61, 0x00, 0x62]; // "a\0b"
const NOT_UTF8 = [0xff, 0xfe, 0x41]; // not UTF-8 at all

describe.skipIf(needs.skipReason)('poison broker messages become rows, never a stuck batch', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'faults_poison', 1);
  const recorder = anInvokeRecorder();
  const clock = aManualClock();
  const install = useMigratedFunctions({
    databaseUrl: needs.url.postgres,
    schema,
    yaml: () =>
      brokerSourcesYaml({
        databaseUrl: needs.url.postgres,
        schema: schema.name,
        natsUrl: nats.available ? nats.url : 'nats://127.0.0.1:4222',
        stream,
        subjectPrefix,
      }),
  });
  const shell = () =>
    install.shell(install.configFile(), {
      invoker: recorder,
      env: { RELAY_TICK_FUNCTION_NAME: 'relay' },
      clock,
    });
  const sources = {
    clicks: { type: 'kafka' as const, eventTypeFromHeader: 'event-type' },
    'orders-in': {
      type: 'amqp' as const,
      eventTypeFromHeader: true as const,
      topic: 'orders.{{ eventType }}',
    },
  };

  const rows = async (source: string) =>
    (
      await pool.query<{
        idempotency_key: string;
        event_type: string | null;
        state: string;
        headers: Record<string, string>;
        last_error: string | null;
      }>(
        `SELECT idempotency_key, event_type, state, headers, last_error FROM "${schema.name}".inbox WHERE source = $1 ORDER BY id`,
        [source],
      )
    ).rows;

  it('kafka-source (MSK event): a header with 0x00 or bytes that are not UTF-8 is stored as base64, and the batch completes', async () => {
    const kafkaSource = createKafkaSource(shell());
    const event = anMskEvent([
      { offset: 1, value: { n: 1 }, headers: { 'event-type': 'click' } },
      { offset: 2, value: { n: 2 }, headers: { 'event-type': 'click', trace: NUL_VALUE } },
      { offset: 3, value: { n: 3 }, headers: { 'event-type': 'click', blob: NOT_UTF8 } },
      { offset: 4, value: { n: 4 }, headers: { 'event-type': [0x63, 0x00] } },
      { offset: 5, value: { n: 5 }, headers: { 'event-type': 'click' } },
    ]);

    const first = await kafkaSource(event, aLambdaContext());
    const redelivered = await kafkaSource(event, aLambdaContext());

    expect(first).toMatchObject({ stored: 5, duplicate: 0, dead: 0 });
    expect(redelivered).toMatchObject({ stored: 0, duplicate: 5, dead: 0 });
    const stored = await rows('clicks');
    expect(stored.map((r) => [r.idempotency_key, r.state])).toEqual([
      [`clicks:0:1@${1_796_000_000_000 + 1}`, 'pending'],
      [`clicks:0:2@${1_796_000_000_000 + 2}`, 'pending'],
      [`clicks:0:3@${1_796_000_000_000 + 3}`, 'pending'],
      [`clicks:0:4@${1_796_000_000_000 + 4}`, 'pending'],
      [`clicks:0:5@${1_796_000_000_000 + 5}`, 'pending'],
    ]);
    expect(stored[1]?.headers.trace).toBe(`base64:${Buffer.from(NUL_VALUE).toString('base64')}`);
    expect(stored[2]?.headers.blob).toBe(`base64:${Buffer.from(NOT_UTF8).toString('base64')}`);
    // A header read as the event type is the same header: its bytes as base64.
    expect(stored[3]?.event_type).toBe(`base64:${Buffer.from([0x63, 0x00]).toString('base64')}`);
  });

  it('amqp-source (Amazon MQ event): NUL in a header, the message id and the type property never fails the batch', async () => {
    clock.advance(5_000);
    const amqpSource = createAmqpSource(shell());
    const event = anAmazonMqEvent([
      { messageId: 'm-1', type: 'created', body: { order: 1 }, headers: {} },
      { messageId: 'm-2', type: 'paid', body: { order: 2 }, headers: { 'x-trace': NUL_VALUE } },
      { messageId: 'm-\u0000-3', type: 'paid', body: { order: 3 }, headers: {} },
      { messageId: 'm-4', type: 'pa\u0000id', body: { order: 4 }, headers: {} },
      { messageId: 'm-5', type: 'shipped', body: { order: 5 }, headers: { 'x-\u0000name': 'v' } },
    ]);

    const first = await amqpSource(event, aLambdaContext());
    const redelivered = await amqpSource(event, aLambdaContext());

    expect(first).toMatchObject({ stored: 4, duplicate: 0, dead: 1 });
    expect(redelivered).toMatchObject({ stored: 0, duplicate: 5, dead: 0 });
    const stored = await rows('orders-in');
    expect(stored.map((r) => r.state)).toEqual(['pending', 'pending', 'pending', 'dead', 'pending']);
    expect(stored[1]?.headers['x-trace']).toBe(`base64:${Buffer.from(NUL_VALUE).toString('base64')}`);
    expect(stored[2]?.idempotency_key).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(Object.keys(stored[4]?.headers ?? {})).toEqual([
      `base64:${Buffer.from('x-\u0000name').toString('base64')}`,
    ]);
  });

  it('the local consumers share the ingestion: kafkajs records and amqplib header tables with poison bytes', async () => {
    const store = await openPostgresStore({ url: needs.url.postgres, schema: schema.name });
    try {
      const ingestion = createBrokerIngestion({ store: store.inbox, sources });
      const kafka = [1, 2, 3].map((offset) =>
        consumedRecordMessage('local-clicks', 0, {
          offset: String(offset),
          timestamp: String(1_796_000_000_000 + offset),
          value: Buffer.from(JSON.stringify({ offset })),
          headers: { 'event-type': 'click', ...(offset === 2 ? { trace: Buffer.from(NUL_VALUE) } : {}) },
        }),
      );
      const report = await ingestInOrder(
        ingestion,
        kafka.map((message) => ({ message })),
        () => 'clicks',
      );
      expect(report).toMatchObject({ stored: 3, duplicate: 0, dead: 0 });

      // amqplib hands byte-array headers over as Buffers, long strings as text (NUL included).
      const amqp = [
        {
          body: Buffer.from('{"o":1}'),
          headers: headersText({ a: Buffer.from(NOT_UTF8) }),
          messageId: 'l-1',
          type: 't',
        },
        {
          body: Buffer.from('{"o":2}'),
          headers: headersText({ b: 'x\u0000y' }),
          messageId: 'l-2',
          type: 't',
        },
      ];
      const amqpReport = await ingestInOrder(
        ingestion,
        amqp.map((message) => ({ message })),
        () => 'orders-in',
      );
      expect(amqpReport).toMatchObject({ stored: 2, duplicate: 0, dead: 0 });
      const stored = await rows('orders-in');
      expect(stored.find((r) => r.idempotency_key === 'l-2')?.headers.b).toBe(
        `base64:${Buffer.from('x\u0000y').toString('base64')}`,
      );
    } finally {
      await store.close();
    }
  });

  describe.runIf(nats.available)('nats-source-tick', () => {
    let nc: NatsConnection;
    let jsm: JetStreamManager;

    beforeAll(async () => {
      nc = await connect({ servers: nats.available ? nats.url : '' });
      jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: stream, subjects: [`${subjectPrefix}.>`] });
    });

    afterAll(async () => {
      await jsm?.streams.delete(stream).catch(() => undefined);
      await nc?.close();
    });

    it('pulls a message whose header value holds U+0000 between good ones, and stores all three', async () => {
      const js = jetstream(nc);
      for (const n of [1, 2, 3]) {
        const h = natsHeaders();
        h.set('Nats-Msg-Id', `audit-${n}`);
        if (n === 2) h.set('X-Trace', 'a\u0000b');
        await js.publish(`${subjectPrefix}.login`, JSON.stringify({ n }), { headers: h });
      }
      clock.advance(5_000);
      const natsSourceTick = createNatsSourceTick(shell());

      const first = await natsSourceTick(aTickEvent('schedule'), aLambdaContext({ remainingMs: 30_000 }));

      expect(first.audit).toMatchObject({ fetched: 3, stored: 3, stoppedFor: 'empty' });
      const stored = await rows('audit');
      expect(stored.map((r) => r.idempotency_key)).toEqual(['audit-1', 'audit-2', 'audit-3']);
      expect(stored[1]?.headers['x-trace']).toBe(`base64:${Buffer.from('a\u0000b').toString('base64')}`);
    });
  });
});
