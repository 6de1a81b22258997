import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler as createInboxHttp } from '../../functions/inbox-http.ts';
import { createHandler as createMigrate } from '../../functions/migrate.ts';
import { createHandler as createOutboxTick } from '../../functions/outbox-tick.ts';
import { createHandler as createRelayTick } from '../../functions/relay-tick.ts';
import {
  cleanup,
  hasValidSignature,
  type Receiver,
  signStandardWebhook,
  startReceiver,
  TEST_SECRET,
} from '../local/support.ts';
import {
  aLambdaContext,
  aManualClock,
  anApiGatewayEvent,
  anInvokeRecorder,
  aScheduledEvent,
  aTickEvent,
  captureEmf,
  emfValue,
  functionConfigYaml,
  type TestShell,
  testShell,
  writeConfigFile,
} from './support.ts';

const needs = await requireServices('function tests: webhook-to-delivery', ['postgres']);

const WAKE_ENV = {
  RELAY_TICK_FUNCTION_NAME: 'queuebox-test-RelayTick',
  OUTBOX_TICK_FUNCTION_NAME: 'queuebox-test-OutboxTick',
};

describe.skipIf(needs.skipReason)('inbox-http → relay-tick → outbox-tick', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'functions_e2e', 1);
  const recorder = anInvokeRecorder();
  const clock = aManualClock();
  let receiver: Receiver;
  let inboxHttp: ReturnType<typeof createInboxHttp>;
  let relayTick: ReturnType<typeof createRelayTick>;
  let outboxTick: ReturnType<typeof createOutboxTick>;
  const shells: TestShell[] = [];

  beforeAll(async () => {
    receiver = await startReceiver();
    const configFile = await writeConfigFile(
      functionConfigYaml({ databaseUrl: needs.url.postgres, schema: schema.name, receiverUrl: receiver.url }),
    );
    const shell = () => {
      const options = testShell(configFile, { invoker: recorder, env: WAKE_ENV, clock });
      shells.push(options);
      return options;
    };
    await createMigrate(shell())(undefined, aLambdaContext());
    inboxHttp = createInboxHttp(shell());
    relayTick = createRelayTick(shell());
    outboxTick = createOutboxTick(shell());
  });

  afterAll(async () => {
    for (const shell of shells) for (const cache of shell.caches) await cache.close();
    await receiver?.close();
    await cleanup();
  });

  const s = () => `"${schema.name}"`;
  const countRows = async (table: 'inbox' | 'outbox', state: string) =>
    Number(
      (await pool.query(`SELECT count(*) AS n FROM ${s()}.${table} WHERE state = $1`, [state])).rows[0]?.n,
    );

  const signedEvent = (id: string, payload: unknown, extra: { cookies?: string[]; secret?: string } = {}) => {
    const body = JSON.stringify(payload);
    const signed = signStandardWebhook(id, body, extra.secret ?? TEST_SECRET);
    // Mixed-case names, as some clients send them (API Gateway passes whatever arrives).
    const headers: Record<string, string> = {
      'Content-Type': signed['content-type'] ?? 'application/json',
      'Webhook-Id': signed['webhook-id'] ?? '',
      'WEBHOOK-TIMESTAMP': signed['webhook-timestamp'] ?? '',
      'webhook-Signature': signed['webhook-signature'] ?? '',
      'X-Correlation-Id': `corr-${id}`,
    };
    return anApiGatewayEvent({ headers, body, ...(extra.cookies ? { cookies: extra.cookies } : {}) });
  };

  it('accepts a signed webhook (base64 body, mixed-case headers, cookies), wakes the relay, and it is delivered signed', async () => {
    const payload = { type: 'order.created', data: { id: 'ord-1', total: 42 } };

    const { result: answer, emf } = await captureEmf(() =>
      inboxHttp(signedEvent('msg-1', payload, { cookies: ['session=abc', 'theme=dark'] }), aLambdaContext()),
    );

    expect(answer.statusCode).toBe(202);
    expect(JSON.parse(String(answer.body))).toEqual({ status: 'accepted', id: expect.any(String) });
    expect(answer.headers?.['content-type']).toBe('application/json');
    expect(emfValue(emf, 'Accepted')).toBe(1);
    expect(emf[0]?._aws.CloudWatchMetrics[0]?.Namespace).toBe('QueueBox');
    expect(recorder.invokes).toEqual([
      { functionName: WAKE_ENV.RELAY_TICK_FUNCTION_NAME, payload: { trigger: 'wakeup' } },
    ]);
    const stored = await pool.query(`SELECT headers, correlation_id FROM ${s()}.inbox`);
    expect(stored.rows[0]?.correlation_id).toBe('corr-msg-1');
    expect(Object.keys(stored.rows[0]?.headers ?? {})).not.toContain('cookie');

    const relayed = await relayTick(aTickEvent('wakeup'), aLambdaContext());

    expect(relayed).toMatchObject({ forwarded: 1, dead: 0, wokeOutbox: true });
    expect(recorder.invokes.at(-1)).toEqual({
      functionName: WAKE_ENV.OUTBOX_TICK_FUNCTION_NAME,
      payload: { trigger: 'wakeup' },
    });

    const { result: delivered, emf: outboxEmf } = await captureEmf(() =>
      outboxTick(aTickEvent('wakeup'), aLambdaContext()),
    );

    expect(delivered).toMatchObject({ claimed: 1, sent: 1, retried: 0, dead: 0, stoppedFor: 'empty' });
    expect(emfValue(outboxEmf, 'Sent')).toBe(1);
    // The gauges sampled before the drain (the oldest pending age, the dead rows), the gauges after it (dead rows
    // first there); counters that did not move are not emitted (each would be a billed custom metric saying 0).
    expect(
      outboxEmf.flatMap((d) => d._aws.CloudWatchMetrics.flatMap((m) => m.Metrics.map((x) => x.Name))),
    ).toEqual([
      'OldestPendingAgeSeconds',
      'DeadRows',
      'DeadRows',
      'OldestPendingAgeSeconds',
      'Sent',
      'DeliveryLatency',
    ]);
    // One DeliveryLatency value per sent row (the dashboard's p50/p99), in milliseconds, in the counters' document
    // (dimension service only), not in a gauge document (which also carries Table).
    const latency = outboxEmf.find((doc) => doc.DeliveryLatency !== undefined);
    expect(latency?.DeliveryLatency).toEqual(expect.any(Number));
    expect(latency?.Table).toBeUndefined();
    expect(latency?._aws.CloudWatchMetrics[0]?.Metrics).toContainEqual({
      Name: 'DeliveryLatency',
      Unit: 'Milliseconds',
    });
    // The drain changed the outbox, so it published the outbox gauges itself.
    // (The last such document: the first is the sample before the drain, when the row waited for it.)
    expect(outboxEmf.filter((d) => d.Table === 'outbox' && d.DeadRows !== undefined).at(-1)).toMatchObject({
      DeadRows: 0,
      OldestPendingAgeSeconds: 0,
    });
    const { result: idle, emf: idleEmf } = await captureEmf(() =>
      outboxTick(aTickEvent('schedule'), aLambdaContext()),
    );
    // An idle tick publishes the gauges it sampled (0: nothing waits, none dead) and no counter.
    expect(idle).toMatchObject({ claimed: 0, gauges: {} });
    expect(idleEmf.flatMap((d) => d._aws.CloudWatchMetrics.flatMap((m) => m.Metrics))).toEqual([
      { Name: 'OldestPendingAgeSeconds', Unit: 'Seconds' },
      { Name: 'DeadRows', Unit: 'Count' },
    ]);
    expect(idleEmf[0]).toMatchObject({ Table: 'outbox', OldestPendingAgeSeconds: 0, DeadRows: 0 });
    expect(receiver.deliveries).toHaveLength(1);
    const [delivery] = receiver.deliveries;
    expect(JSON.parse(delivery?.body ?? '')).toEqual(payload);
    expect(hasValidSignature(delivery?.headers ?? {}, delivery?.body ?? '')).toBe(true);
    expect(delivery?.headers['x-idempotency-key']).toBe('msg-1');
    expect(delivery?.headers['x-correlation-id']).toBe('corr-msg-1');
    expect(await countRows('outbox', 'sent')).toBe(1);
    expect(await countRows('inbox', 'processed')).toBe(1);
  });

  it('answers 200 duplicate for the same webhook-id, stores nothing and wakes nobody', async () => {
    const invokesBefore = recorder.invokes.length;
    clock.advance(5_000);

    const answer = await inboxHttp(
      signedEvent('msg-1', { type: 'order.created', data: { id: 'ord-1' } }),
      aLambdaContext(),
    );

    expect(answer.statusCode).toBe(200);
    expect(JSON.parse(String(answer.body))).toEqual({ status: 'duplicate' });
    expect(recorder.invokes).toHaveLength(invokesBefore);
    expect(await countRows('inbox', 'processed')).toBe(1);
    expect(await countRows('inbox', 'pending')).toBe(0);
  });

  it('refuses a bad signature with 401 and stores nothing', async () => {
    const answer = await inboxHttp(
      signedEvent(
        'msg-bad',
        { type: 'order.created', data: { id: 'x' } },
        {
          secret: `whsec_${Buffer.from('some-other-secret').toString('base64')}`,
        },
      ),
      aLambdaContext(),
    );

    expect(answer.statusCode).toBe(401);
    expect(JSON.parse(String(answer.body))).toMatchObject({ error: 'unauthorized' });
    const rows = await pool.query(`SELECT 1 FROM ${s()}.inbox WHERE idempotency_key = 'msg-bad'`);
    expect(rows.rowCount).toBe(0);
  });

  it('answers 404 unknown_source for a path no source answers at, also behind a named stage', async () => {
    const unknown = await inboxHttp(
      anApiGatewayEvent({ path: '/inbox/nobody', body: '{}' }),
      aLambdaContext(),
    );
    const staged = await inboxHttp(
      {
        ...signedEvent('msg-stage', { type: 'order.created', data: { id: 's' } }),
        rawPath: '/prod/inbox/demo',
        requestContext: { ...anApiGatewayEvent().requestContext, stage: 'prod' },
      },
      aLambdaContext(),
    );

    expect(unknown.statusCode).toBe(404);
    expect(JSON.parse(String(unknown.body))).toMatchObject({ error: 'unknown_source' });
    expect(staged.statusCode).toBe(202);
  });

  it('debounces wake-ups per container: one relay invoke per second however many rows arrive', async () => {
    clock.advance(5_000);
    const before = recorder.invokes.length;

    for (const id of ['burst-1', 'burst-2', 'burst-3']) {
      const answer = await inboxHttp(
        signedEvent(id, { type: 'order.created', data: { id } }),
        aLambdaContext(),
      );
      expect(answer.statusCode).toBe(202);
    }
    clock.advance(1_000);
    await inboxHttp(signedEvent('burst-4', { type: 'order.created', data: { id: 'b4' } }), aLambdaContext());

    expect(recorder.invokes.slice(before).map((i) => i.functionName)).toEqual([
      WAKE_ENV.RELAY_TICK_FUNCTION_NAME,
      WAKE_ENV.RELAY_TICK_FUNCTION_NAME,
    ]);
  });

  it('delivers without any wake-up: scheduled ticks (EventBridge envelope) find the rows', async () => {
    const relayed = await relayTick(aScheduledEvent(), aLambdaContext());
    const delivered = await outboxTick(aScheduledEvent(), aLambdaContext());

    expect(relayed.forwarded).toBe(5);
    expect(delivered).toMatchObject({ sent: 5, stoppedFor: 'empty' });
    expect(await countRows('outbox', 'sent')).toBe(6);
    expect(await countRows('inbox', 'pending')).toBe(0);
  });
});
