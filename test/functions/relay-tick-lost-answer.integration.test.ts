/**
 * relay-tick wakes outbox-tick for rows it forwarded even when the forward's answer was lost: the relay's
 * forward-and-claim commits its forward and then fails (SQL Server claims in a statement of its own after the forward
 * committed; PostgreSQL reads the claimed rows after its statement committed). The relay's try again finds the rows
 * forwarded; they used to count as stale, so relay-tick did not wake outbox-tick and the rows waited for its next
 * scheduled tick.
 */
import { StoreError, StoreUnavailableError } from '@queuebox/core';
import { openStore } from '@queuebox/store';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { createHandler as createRelayTick } from '../../functions/relay-tick.ts';
import { aLambdaContext, anInvokeRecorder, aTickEvent, useMigratedFunctions } from './support.ts';

const needs = await requireServices('function tests: relay-tick after a lost answer', ['postgres']);

const WAKE_ENV = { OUTBOX_TICK_FUNCTION_NAME: 'queuebox-test-OutboxTick' };

describe.skipIf(needs.skipReason)('relay-tick after a forward whose answer was lost', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'functions_relay_lost', 1);
  const functions = useMigratedFunctions({
    databaseUrl: needs.url.postgres,
    schema,
    receiverUrl: 'http://127.0.0.1:9/none',
  });

  /**
   * relay-tick over a store whose first forward-and-claim commits and then, `failAfterMs` later, throws `error()`;
   * `calls()` says how many forward-and-claims it ran.
   */
  function relayTickWithLostAnswer(error: () => Error, failAfterMs = 0) {
    let calls = 0;
    const recorder = anInvokeRecorder();
    const shell = functions.shell(functions.configFile(), {
      invoker: recorder,
      env: WAKE_ENV,
      openStore: async (database) => {
        const store = await openStore(database);
        return {
          ...store,
          inbox: {
            ...store.inbox,
            async forwardAndClaim(items, claim) {
              const step = await store.inbox.forwardAndClaim(items, claim);
              if (calls++ === 0) {
                if (failAfterMs > 0) await new Promise((resolve) => setTimeout(resolve, failAfterMs));
                throw error();
              }
              return step;
            },
          },
        };
      },
    });
    return { relayTick: createRelayTick(shell), recorder, calls: () => calls };
  }

  it('counts the rows forwarded and wakes outbox-tick', async () => {
    // Prepare: two stored push rows; the store's first forward-and-claim commits, then fails.
    const s = `"${schema.name}"`;
    await pool.query(
      `INSERT INTO ${s}.inbox (source, idempotency_key, event_type, payload, headers, max_attempts)
       VALUES ('demo', 'lost-1', 'order.created', '{}', '{}', 5), ('demo', 'lost-2', 'order.created', '{}', '{}', 5)`,
    );
    const { relayTick, recorder, calls } = relayTickWithLostAnswer(
      () => new StoreUnavailableError('Connection terminated unexpectedly (test)'),
    );
    // Act
    const report = await relayTick(aTickEvent('schedule'), aLambdaContext());
    // Assess: both rows reached the outbox once, the tick says so and woke outbox-tick for them.
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${s}.outbox WHERE topic = 'demo.order.created'`,
    );
    expect(calls()).toBe(1);
    expect(rows[0]?.n).toBe(2);
    expect(report).toMatchObject({ forwarded: 2, stale: 0, wokeOutbox: true });
    expect(recorder.invokes.map((i) => i.functionName)).toEqual(['queuebox-test-OutboxTick']);
  });

  it.each([
    { failure: 'a StoreError', error: () => new StoreError('the answer was lost (test)'), throws: false },
    {
      failure: 'an outage',
      error: () => new StoreUnavailableError('Connection terminated unexpectedly (test)'),
      throws: true,
    },
  ])(
    'wakes outbox-tick when such a forward fails ($failure) past the deadline',
    async ({ error, throws }) => {
      // Prepare: two stored push rows; the first forward-and-claim commits, then takes past the invocation's deadline
      // (3 s margin of 4.5 s remaining) before it fails, so the relay cannot read its rows back or try again.
      const s = `"${schema.name}"`;
      const eventType = `order.late${throws ? 'r' : ''}`;
      await pool.query(
        `INSERT INTO ${s}.inbox (source, idempotency_key, event_type, payload, headers, max_attempts)
       VALUES ('demo', $1, $2, '{}', '{}', 5), ('demo', $3, $2, '{}', '{}', 5)`,
        [`${eventType}-1`, eventType, `${eventType}-2`],
      );
      const { relayTick, recorder } = relayTickWithLostAnswer(error, 2_000);
      // Act
      const outcome = await relayTick(aTickEvent('schedule'), aLambdaContext({ remainingMs: 4_500 })).then(
        (report) => ({ report }),
        (thrown: unknown) => ({ thrown }),
      );
      // Assess: the rows are in the outbox; uncounted as forwarded (stale, or the invocation failed), they still woke
      // outbox-tick.
      const { rows } = await pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${s}.outbox WHERE topic = $1`,
        [`demo.${eventType}`],
      );
      expect(rows[0]?.n).toBe(2);
      if (throws) expect(outcome).toEqual({ thrown: expect.any(StoreUnavailableError) });
      else
        expect(outcome).toEqual({
          report: expect.objectContaining({ forwarded: 0, stale: 2, wokeOutbox: true }),
        });
      expect(recorder.invokes.map((i) => i.functionName)).toEqual(['queuebox-test-OutboxTick']);
    },
    30_000,
  );
});
