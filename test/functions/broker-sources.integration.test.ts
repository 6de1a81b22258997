/**
 * The broker entry points with real-shaped events against the real PostgreSQL: kafka-source with an MSK event,
 * amqp-source with an Amazon MQ for RabbitMQ event (Lambda's event source mappings deliver those, so no broker is
 * involved), and nats-source-tick pulling from a JetStream stream on the machine's NATS server.
 */
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import { findNats, requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler as createAmqpSource } from '../../functions/amqp-source.ts';
import { createHandler as createKafkaSource } from '../../functions/kafka-source.ts';
import { CONFIG_MAX_AGE_MS } from '../../functions/lambda-shell/lambda.ts';
import { createHandler as createNatsSourceTick } from '../../functions/nats-source-tick.ts';
import {
  aLambdaContext,
  aManualClock,
  anAmazonMqEvent,
  anInvokeRecorder,
  anMskEvent,
  aTickEvent,
  brokerSourcesYaml,
  RecordingMetrics,
  type testShell,
  useMigratedFunctions,
} from './support.ts';

const needs = await requireServices('function tests: broker-sources', ['postgres']);
const nats = await findNats();
if (!nats.available) console.info(`[function tests] nats-source-tick skipped: ${nats.reason}`);

const run = randomBytes(4).toString('hex');
const stream = `QB_FN_${run}`;
const subjectPrefix = `qb.fn.${run}`;
const RELAY = 'queuebox-test-RelayTick';

describe.skipIf(needs.skipReason)('broker source functions', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'functions_brokers', 1);
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
  const shell = (extra: Parameters<typeof testShell>[1] = {}) =>
    install.shell(install.configFile(), {
      invoker: recorder,
      env: { RELAY_TICK_FUNCTION_NAME: RELAY },
      clock,
      ...extra,
    });

  const rows = async (source: string) =>
    (
      await pool.query(
        `SELECT idempotency_key, event_type, state, payload, last_error FROM "${schema.name}".inbox WHERE source = $1 ORDER BY id`,
        [source],
      )
    ).rows;

  it('kafka-source stores each record of an MSK event once (a body that is not JSON as a dead row) and wakes the relay', async () => {
    const kafkaSource = createKafkaSource(shell());
    const event = anMskEvent([
      { offset: 15, value: { id: 'c1', page: '/home' }, headers: { 'event-type': 'click' } },
      { offset: 16, value: 'not json at all' },
    ]);

    const first = await kafkaSource(event, aLambdaContext());
    const redelivered = await kafkaSource(event, aLambdaContext());

    expect(first).toEqual({ stored: 1, duplicate: 0, dead: 1, wakeRelay: true });
    expect(redelivered).toEqual({ stored: 0, duplicate: 2, dead: 0, wakeRelay: false });
    expect(recorder.invokes).toEqual([{ functionName: RELAY, payload: { trigger: 'wakeup' } }]);
    expect(await rows('clicks')).toEqual([
      expect.objectContaining({
        idempotency_key: `clicks:0:15@${1_796_000_000_000 + 15}`,
        event_type: 'click',
        state: 'pending',
      }),
      expect.objectContaining({
        idempotency_key: `clicks:0:16@${1_796_000_000_000 + 16}`,
        state: 'dead',
        payload: 'not json at all',
      }),
    ]);
  });

  it('amqp-source stores each message of an Amazon MQ event under its message id and type', async () => {
    clock.advance(5_000);
    const amqpSource = createAmqpSource(shell());

    const report = await amqpSource(
      anAmazonMqEvent([
        { messageId: 'm-1', type: 'created', body: { order: 1 } },
        { messageId: 'm-2', type: 'paid', body: { order: 1 } },
      ]),
      aLambdaContext(),
    );

    expect(report).toEqual({ stored: 2, duplicate: 0, dead: 0, wakeRelay: true });
    expect(recorder.invokes).toHaveLength(2);
    expect(await rows('orders-in')).toEqual([
      expect.objectContaining({ idempotency_key: 'm-1', event_type: 'created', state: 'pending' }),
      expect.objectContaining({ idempotency_key: 'm-2', event_type: 'paid', state: 'pending' }),
    ]);
  });

  it('kafka-source publishes the inbox gauges in the invocation that stored a dead row, and not in one that stored none', async () => {
    // Prepare
    const metrics = new RecordingMetrics();
    const kafkaSource = createKafkaSource(shell({ metrics }));
    const poison = anMskEvent([{ offset: 41, value: 'still not json' }]);
    const fine = anMskEvent([{ offset: 42, value: { id: 'c42' }, headers: { 'event-type': 'click' } }]);

    // Act
    const first = await kafkaSource(poison, aLambdaContext());
    const gaugesAfterFirst = metrics.gauges('inbox').length;
    const second = await kafkaSource(fine, aLambdaContext());

    // Assess: the DeadRows alarm moves at once, not at the next maintenance tick (an outside mutation audit)
    expect(first).toMatchObject({ dead: 1 });
    expect(second).toMatchObject({ stored: 1, dead: 0 });
    const dead = await pool.query(
      `SELECT count(*)::int AS n FROM "${schema.name}".inbox WHERE state = 'dead'`,
    );
    expect(gaugesAfterFirst).toBe(1);
    expect(metrics.gauges('inbox')).toEqual([
      expect.objectContaining({ metrics: expect.objectContaining({ DeadRows: dead.rows[0].n }) }),
    ]);
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

    it('pulls the stream into the inbox, acks, and finds nothing on the next tick; a pull source wakes nobody', async () => {
      const js = jetstream(nc);
      for (const n of [1, 2, 3]) {
        const h = headers();
        h.set('Nats-Msg-Id', `audit-${n}`);
        await js.publish(`${subjectPrefix}.login`, JSON.stringify({ n }), { headers: h });
      }
      const invokesBefore = recorder.invokes.length;
      clock.advance(5_000);
      const natsSourceTick = createNatsSourceTick(shell());

      const first = await natsSourceTick(aTickEvent('schedule'), aLambdaContext({ remainingMs: 30_000 }));
      const second = await natsSourceTick(aTickEvent('schedule'), aLambdaContext({ remainingMs: 30_000 }));

      expect(first.audit).toMatchObject({ fetched: 3, stored: 3, stoppedFor: 'empty' });
      expect(second.audit).toMatchObject({ fetched: 0, stored: 0, stoppedFor: 'empty' });
      expect((await rows('audit')).map((r) => r.idempotency_key)).toEqual(['audit-1', 'audit-2', 'audit-3']);
      expect(recorder.invokes).toHaveLength(invokesBefore);
    });

    it('publishes the inbox gauges when a pulled message is stored dead, and not on a tick that stored none', async () => {
      // Prepare
      const h = headers();
      h.set('Nats-Msg-Id', 'audit-poison');
      await jetstream(nc).publish(`${subjectPrefix}.login`, 'not json at all', { headers: h });
      clock.advance(5_000);
      const metrics = new RecordingMetrics();
      const natsSourceTick = createNatsSourceTick(shell({ metrics }));

      // Act
      const first = await natsSourceTick(aTickEvent('schedule'), aLambdaContext({ remainingMs: 30_000 }));
      const gaugesAfterFirst = metrics.gauges('inbox').length;
      const second = await natsSourceTick(aTickEvent('schedule'), aLambdaContext({ remainingMs: 30_000 }));

      // Assess
      expect(first.audit).toMatchObject({ fetched: 1, dead: 1 });
      expect(second.audit).toMatchObject({ fetched: 0, dead: 0 });
      const dead = await pool.query(
        `SELECT count(*)::int AS n FROM "${schema.name}".inbox WHERE state = 'dead'`,
      );
      expect(metrics.gauges('inbox')).toEqual([
        {
          metrics: { DeadRows: dead.rows[0].n, OldestPendingAgeSeconds: expect.any(Number) },
          dimensions: { Table: 'inbox', service: 'queuebox-test' },
        },
      ]);
      expect(gaugesAfterFirst).toBe(1);
      expect(metrics.gauges('outbox')).toEqual([]);
      // The counters stay in their own series, without the gauges' Table dimension.
      expect(metrics.published.filter((d) => 'Dead' in d.metrics)).toEqual([
        { metrics: { Dead: 1 }, dimensions: { service: 'queuebox-test' } },
      ]);
      // The dimension sets the alarms match exactly: new-dead-rows on { service }, dead-rows on { service, Table }.
      const deadDocument = metrics.published.find((d) => 'Dead' in d.metrics);
      expect(deadDocument && metrics.dimensionSetsOf(deadDocument)).toEqual([['service']]);
      const gauge = metrics.gauges('inbox')[0];
      expect(gauge && metrics.dimensionSetsOf(gauge)).toEqual([['Table', 'service']]);
    });

    it('follows a configuration read again with other settings: the changed source pulls from its new stream', async () => {
      // Prepare: one container pulls with the file's settings
      const natsSourceTick = createNatsSourceTick(shell());
      await natsSourceTick(aTickEvent('schedule'), aLambdaContext({ remainingMs: 30_000 }));
      const movedStream = `${stream}_MOVED`;
      const movedPrefix = `${subjectPrefix}-moved`;
      await jsm.streams.add({ name: movedStream, subjects: [`${movedPrefix}.>`] });
      const original = await readFile(install.configFile(), 'utf8');
      try {
        await writeFile(
          install.configFile(),
          original
            .replace(`stream: ${stream}\n`, `stream: ${movedStream}\n`)
            .replace(`subject: ${subjectPrefix}.>`, `subject: ${movedPrefix}.>`),
        );
        const h = headers();
        h.set('Nats-Msg-Id', 'audit-moved-1');
        await jetstream(nc).publish(`${movedPrefix}.login`, JSON.stringify({ n: 'moved' }), { headers: h });

        // Act: the same container, once its configuration is old enough to be read again
        clock.advance(CONFIG_MAX_AGE_MS + 1_000);
        const report = await natsSourceTick(aTickEvent('schedule'), aLambdaContext({ remainingMs: 30_000 }));

        // Assess: the source was made anew from the new settings (the old one kept pulling the old stream)
        expect(report.audit).toMatchObject({ fetched: 1, stored: 1, stoppedFor: 'empty' });
        expect((await rows('audit')).map((r) => r.idempotency_key)).toContain('audit-moved-1');
      } finally {
        await writeFile(install.configFile(), original);
        await jsm.streams.delete(movedStream).catch(() => undefined);
      }
    });
  });
});
