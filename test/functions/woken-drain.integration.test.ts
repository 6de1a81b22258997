/**
 * Wake-ups that a process drops (at most one per second is sent: `createWakeUp`) must not leave their rows to the
 * periodic safety tick: the tick the sent wake-up started keeps its drain open until a second after its start
 * (`drainCoveringWakeUps`). Real PostgreSQL, the real handlers, an in-memory invoke recorder and a real receiver.
 */
import { FUNCTION_ENV } from '@queuebox/deploy-contract';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler as createInboxHttp } from '../../functions/inbox-http.ts';
import { createHandler as createMigrate } from '../../functions/migrate.ts';
import { createHandler as createOutboxTick } from '../../functions/outbox-tick.ts';
import { createHandler as createRelayTick } from '../../functions/relay-tick.ts';
import { cleanup, type Receiver, signStandardWebhook, startReceiver, TEST_SECRET } from '../local/support.ts';
import {
  aLambdaContext,
  anApiGatewayEvent,
  anInvokeRecorder,
  aTickEvent,
  functionConfigYaml,
  type TestShell,
  testShell,
  writeConfigFile,
} from './support.ts';

const needs = await requireServices('function tests: woken drains', ['postgres']);

const WAKE_ENV = {
  RELAY_TICK_FUNCTION_NAME: 'queuebox-test-RelayTick',
  OUTBOX_TICK_FUNCTION_NAME: 'queuebox-test-OutboxTick',
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(needs.skipReason)('a woken tick covers the wake-ups its sender dropped', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'functions_woken', 1);
  const recorder = anInvokeRecorder();
  let receiver: Receiver;
  let inboxHttp: ReturnType<typeof createInboxHttp>;
  let relayTick: ReturnType<typeof createRelayTick>;
  let outboxTick: ReturnType<typeof createOutboxTick>;
  let configFile: string;
  const shells: TestShell[] = [];

  beforeAll(async () => {
    receiver = await startReceiver();
    configFile = await writeConfigFile(
      functionConfigYaml({ databaseUrl: needs.url.postgres, schema: schema.name, receiverUrl: receiver.url }),
    );
    const shell = () => {
      const options = testShell(configFile, { invoker: recorder, env: WAKE_ENV });
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

  const stateOf = async (table: 'inbox' | 'outbox', where: string, value: string) =>
    (await pool.query(`SELECT state FROM "${schema.name}".${table} WHERE ${where} = $1`, [value])).rows[0]
      ?.state as string | undefined;

  const webhook = (id: string) => {
    const body = JSON.stringify({ type: 'order.created', data: { id: `ord-${id}` } });
    const signed = signStandardWebhook(id, body, TEST_SECRET);
    return anApiGatewayEvent({ headers: signed, body });
  };

  const until = async (what: () => Promise<boolean>) => {
    for (let i = 0; i < 200 && !(await what()); i++) await sleep(10);
  };

  it('relay-tick: a webhook stored 400 ms after the first, whose wake-up was dropped, is forwarded by the same invocation', async () => {
    // Act: webhook A wakes relay-tick, which runs at once; A is forwarded; 400 ms later webhook B arrives at the
    // same inbox-http container, which sends no wake-up (one was sent less than a second ago).
    expect((await inboxHttp(webhook('a-1'), aLambdaContext())).statusCode).toBe(202);
    const wakesAfterA = recorder.invokes.filter((i) => i.functionName === WAKE_ENV.RELAY_TICK_FUNCTION_NAME);
    const relayed = relayTick(aTickEvent('wakeup'), aLambdaContext());
    await until(async () => (await stateOf('inbox', 'idempotency_key', 'a-1')) === 'processed');
    await sleep(400);
    expect((await inboxHttp(webhook('b-1'), aLambdaContext())).statusCode).toBe(202);
    const report = await relayed;

    // Assess: one wake-up for both; the one invocation forwarded both.
    expect(wakesAfterA).toHaveLength(1);
    expect(recorder.invokes.filter((i) => i.functionName === WAKE_ENV.RELAY_TICK_FUNCTION_NAME)).toHaveLength(
      1,
    );
    expect(report).toMatchObject({ forwarded: 2, stoppedFor: 'empty' });
    expect(await stateOf('inbox', 'idempotency_key', 'b-1')).toBe('processed');
  });

  it('outbox-tick: a row written 400 ms after the drain began, with no wake-up of its own, is delivered by it', async () => {
    // Prepare: the rows the relay forwarded above are delivered first, by a woken tick.
    const before = receiver.deliveries.length;
    const first = outboxTick(aTickEvent('wakeup'), aLambdaContext());
    await until(async () => receiver.deliveries.length >= before + 2);
    await sleep(400);
    // Act: a row written now (as by a relay whose wake-up of outbox-tick was dropped).
    await pool.query(
      `INSERT INTO "${schema.name}".outbox (topic, key, payload, headers, max_attempts) VALUES ('demo.late', 'late', '{"late":true}', '{}', 5)`,
    );
    const report = await first;

    // Assess
    expect(report).toMatchObject({ sent: 3, stoppedFor: 'empty' });
    expect(await stateOf('outbox', 'key', 'late')).toBe('sent');
    expect(receiver.deliveries).toHaveLength(before + 3);
  });
  it('outbox-tick: a row written during a slow delivery, which ends the first drain after the hold, is delivered too', async () => {
    // Prepare: the receiver holds the first row's answer for 1.2 s, so the first drain's last claim comes before the
    // hold's end and the drain reports only after it (an outside review). Unkeyed: a keyed row's settle makes the
    // drain claim again, which would hide the case.
    const before = receiver.deliveries.length;
    await pool.query(
      `INSERT INTO "${schema.name}".outbox (topic, key, payload, headers, max_attempts) VALUES ('demo.slow', NULL, '{"slow":true}', '{}', 5)`,
    );
    const held = receiver.hold((d) => d.body.includes('"slow"'));
    setTimeout(() => held.release(), 1_200);
    const tick = outboxTick(aTickEvent('wakeup'), aLambdaContext());
    await sleep(400);
    // Act: a row with no wake-up of its own (its sender's was dropped within the second).
    await pool.query(
      `INSERT INTO "${schema.name}".outbox (topic, key, payload, headers, max_attempts) VALUES ('demo.after', 'after', '{"after":true}', '{}', 5)`,
    );
    const report = await tick;

    // Assess
    expect(report).toMatchObject({ sent: 2, stoppedFor: 'empty' });
    expect(await stateOf('outbox', 'key', 'after')).toBe('sent');
    expect(receiver.deliveries).toHaveLength(before + 2);
  });

  it('relay-tick wakes outbox-tick as soon as its first drain forwarded, not after the hold', async () => {
    const recorded = recorder.invokes.length;
    expect((await inboxHttp(webhook('d-1'), aLambdaContext())).statusCode).toBe(202);
    // (inbox-http's own wake of relay-tick may be dropped: one was sent less than a second ago.)
    const started = Date.now();
    const relayed = relayTick(aTickEvent('wakeup'), aLambdaContext());
    await until(async () =>
      recorder.invokes.slice(recorded).some((i) => i.functionName === WAKE_ENV.OUTBOX_TICK_FUNCTION_NAME),
    );
    const wokenAfterMs = Date.now() - started;
    const report = await relayed;
    expect(report).toMatchObject({ forwarded: 1, wokeOutbox: true });
    expect(wokenAfterMs).toBeLessThan(900);
  });

  it('relay-tick: a drain its deadline stopped, with push rows still due, books a deferred tick in the next minute', async () => {
    // Prepare: a pending push row, and an invocation with no time left for a claim (the deadline is now).
    const bookings: string[] = [];
    const options = testShell(configFile, {
      invoker: recorder,
      env: {
        ...WAKE_ENV,
        [FUNCTION_ENV.wakeScheduleGroup]: 'queuebox-test-deferred',
        [FUNCTION_ENV.wakeSchedulerRoleArn]:
          'arn:aws:iam::123456789012:role/queuebox-test-DeferredTickSchedulerRole',
      },
      scheduler: {
        createSchedule: async (input) => {
          bookings.push(String(input.ScheduleExpression));
        },
      },
    });
    shells.push(options);
    const tick = createRelayTick(options);
    expect((await inboxHttp(webhook('c-1'), aLambdaContext())).statusCode).toBe(202);
    const started = Date.now();

    // Act
    const report = await tick(aTickEvent('wakeup'), aLambdaContext({ remainingMs: 3_000 }));

    // Assess: nothing forwarded, the row still pending, and a tick booked within the next minute.
    expect(report).toMatchObject({ forwarded: 0, stoppedFor: 'time', deferred: { booked: true } });
    expect(await stateOf('inbox', 'idempotency_key', 'c-1')).toBe('pending');
    const at = /^at\((.+)\)$/.exec(bookings[0] ?? '')?.[1] ?? '';
    const inMs = Date.parse(`${at}Z`) - started;
    expect(inMs).toBeGreaterThan(0);
    expect(inMs).toBeLessThanOrEqual(61_000);
  });
});
