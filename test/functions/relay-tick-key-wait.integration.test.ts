/**
 * relay-tick warns when its relay's forward waited for outbox key locks an application's open transaction held
 * (`RelayDrainReport.keyWaitMs`, at least a second): one WARN per invocation with the wait and a hint, and the wait
 * in its `relay drain` line and its answer. Before, nothing said so: an operator saw only an advisory-lock wait in
 * pg_stat_activity.
 */
import { KEY_WAIT_WARNING } from '@queuebox/inbox';
import { createPgExecutor, createPostgresOutboxStore } from '@queuebox/store-postgres';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { createHandler as createRelayTick } from '../../functions/relay-tick.ts';
import { aLambdaContext, anInvokeRecorder, aTickEvent, useMigratedFunctions } from './support.ts';

const needs = await requireServices('function tests: relay-tick key wait', ['postgres']);

const WAKE_ENV = { OUTBOX_TICK_FUNCTION_NAME: 'queuebox-test-OutboxTick' };

describe.skipIf(needs.skipReason)(
  'relay-tick after a forward held by an open application transaction',
  () => {
    const { pool, schema } = usePostgresSchema(needs.url.postgres, 'functions_relay_key_wait', 2);
    const functions = useMigratedFunctions({
      databaseUrl: needs.url.postgres,
      schema,
      receiverUrl: 'http://127.0.0.1:9/none',
    });

    /** relay-tick whose warnings and info lines the test reads. */
    function relayTickWithLines() {
      const shell = functions.shell(functions.configFile(), { invoker: anInvokeRecorder(), env: WAKE_ENV });
      const lines: [string, string, Record<string, unknown>][] = [];
      const logger = shell.logger;
      if (!logger) throw new Error('testShell gives a logger');
      for (const level of ['info', 'warn'] as const) {
        logger[level] = ((message: string, fields: Record<string, unknown>) => {
          lines.push([level, message, fields]);
        }) as typeof logger.info;
      }
      return { relayTick: createRelayTick(shell), lines };
    }

    const storeRow = (key: string, aggregateId: string) =>
      pool.query(
        `INSERT INTO "${schema.name}".inbox (source, idempotency_key, event_type, aggregate_id, payload, headers, max_attempts)
       VALUES ('demo', $1, 'order.created', $2, '{}', '{}', 5)`,
        [key, aggregateId],
      );

    it('warns once with the wait, and says nothing of it for a forward nobody held', async () => {
      // Prepare: a free drain first; then the application enqueues a row of key `order-7` in a transaction that
      // stays open 1.5 s, and a webhook of aggregate id `order-7` is stored.
      const free = relayTickWithLines();
      await storeRow('free-1', 'order-1');
      const freeReport = await free.relayTick(aTickEvent('schedule'), aLambdaContext());
      let inserted = () => {};
      const ready = new Promise<void>((resolve) => {
        inserted = resolve;
      });
      const committed = createPgExecutor(pool).transaction(async (tx) => {
        await createPostgresOutboxStore({ executor: tx, schema: schema.name }).insert([
          { topic: 'app', key: 'order-7', payload: {}, maxAttempts: 1 },
        ]);
        inserted();
        await new Promise((resolve) => setTimeout(resolve, 1_500));
      });
      await Promise.race([ready, committed]);
      await storeRow('held-1', 'order-7');
      const held = relayTickWithLines();

      // Act
      const report = await held.relayTick(aTickEvent('schedule'), aLambdaContext());
      await committed;

      // Assess
      expect(freeReport).toMatchObject({ forwarded: 1 });
      expect(freeReport).not.toHaveProperty('keyWaitMs');
      expect(free.lines.filter(([level]) => level === 'warn')).toEqual([]);
      expect(report).toMatchObject({ forwarded: 1, keyWaitMs: expect.any(Number) });
      expect(report.keyWaitMs).toBeGreaterThanOrEqual(1_000);
      expect(held.lines.filter(([level]) => level === 'warn')).toEqual([
        ['warn', KEY_WAIT_WARNING.message, { waitedMs: report.keyWaitMs, hint: KEY_WAIT_WARNING.hint }],
      ]);
      expect(held.lines).toContainEqual([
        'info',
        'relay drain',
        expect.objectContaining({ forwarded: 1, keyWaitMs: report.keyWaitMs }),
      ]);
    });
  },
);
