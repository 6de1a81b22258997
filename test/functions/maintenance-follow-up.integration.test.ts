/**
 * maintenance-tick against the real PostgreSQL: a run that deleted rows and ran out of time before retention was
 * complete books one deferred tick of itself in the next minute (an in-memory Scheduler records it) and logs a WARN
 * naming what is left, so a backlog larger than one run is not left until the next daily run (an outside audit:
 * 15M sent rows, 2.2M deleted per run, the rest waited a day while 500 rows/s came in). A run that deleted nothing
 * or completed books nothing, so the chain ends.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import type { Clock } from '@queuebox/core';
import { FUNCTION_ENV } from '@queuebox/deploy-contract';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import type { ScheduleBooking, ScheduleCreator } from '@queuebox/wake-ups';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createHandler as createMaintenanceTick } from '../../functions/maintenance-tick.ts';
import { createHandler as createMigrate } from '../../functions/migrate.ts';
import { cleanup } from '../local/support.ts';
import {
  aLambdaContext,
  aTickEvent,
  captureEmf,
  type TestShell,
  testShell,
  writeConfigFile,
} from './support.ts';

const needs = await requireServices('function tests: maintenance follow-up', ['postgres']);

const GROUP = 'queuebox-test-deferred';
const ROLE_ARN = 'arn:aws:iam::123456789012:role/queuebox-test-DeferredTickSchedulerRole';
const FUNCTION_NAME = 'queuebox-test-MaintenanceTickFunction-a1b2c3';

function aScheduleRecorder(): ScheduleCreator & { readonly calls: ScheduleBooking[] } {
  const calls: ScheduleBooking[] = [];
  return {
    calls,
    async createSchedule(input) {
      calls.push(input);
    },
  };
}

/** A clock one second later at every read: a run has time for as many batches as its budget has seconds. */
function steppingClock(): Clock {
  let now = Date.now();
  return { now: () => (now += 1_000) };
}

describe.skipIf(needs.skipReason)(
  'maintenance-tick books a follow-up run when retention is incomplete',
  () => {
    const { pool, schema } = usePostgresSchema(needs.url.postgres, 'functions_maint_follow', 1);
    const shells: TestShell[] = [];
    let configFile: string;
    const env = { [FUNCTION_ENV.wakeScheduleGroup]: GROUP, [FUNCTION_ENV.wakeSchedulerRoleArn]: ROLE_ARN };
    const s = () => `"${schema.name}"`;

    function aTick(scheduler: ScheduleCreator) {
      const logger = new Logger({ serviceName: 'queuebox-test', logLevel: 'SILENT' });
      const warn = vi.spyOn(logger, 'warn');
      const options = testShell(configFile, {
        env,
        scheduler,
        logger,
        clock: steppingClock(),
        safetyMarginMs: 0,
      });
      shells.push(options);
      const handler = createMaintenanceTick(options);
      // The gauges' EMF documents go to a capture, not the test's output.
      const tick = async (...args: Parameters<typeof handler>) =>
        (await captureEmf(() => handler(...args))).result;
      return { tick, warn };
    }
    /** A context whose budget holds `seconds` reads of the stepping clock. */
    const context = (seconds: number) =>
      aLambdaContext({ functionName: FUNCTION_NAME, remainingMs: seconds * 1_000 + 500 });

    beforeAll(async () => {
      configFile = await writeConfigFile(`database:
  url: ${JSON.stringify(needs.url.postgres)}
  schema: ${schema.name}
  poolSize: 2
retention:
  keepSentHours: 1
  keepDeadHours: 0
  batchSize: 2
`);
      await createMigrate(testShell(configFile))(undefined, aLambdaContext());
    });

    beforeEach(async () => {
      await pool.query(`DELETE FROM ${s()}.outbox`);
      // Ten sent rows two hours old: five full batches of two.
      await pool.query(
        `INSERT INTO ${s()}.outbox (topic, payload, state, attempt, max_attempts, sent_at, updated_at)
       SELECT 't', '{}', 'sent', 1, 3, now() - interval '2 hours', now() - interval '2 hours' FROM generate_series(1, 10)`,
      );
    });

    afterAll(async () => {
      for (const options of shells) for (const cache of options.caches) await cache.close();
      await cleanup();
    });

    const left = async () => Number((await pool.query(`SELECT count(*) AS n FROM ${s()}.outbox`)).rows[0]?.n);

    it('a run that deleted rows but ran out of time books the next minute and warns with what is left', async () => {
      // Prepare
      const scheduler = aScheduleRecorder();
      const { tick, warn } = aTick(scheduler);
      const started = Date.now();

      // Act: time for two batches of the outbox's sent rows (and the inbox's, empty).
      const result = await tick(aTickEvent('schedule'), context(4));

      // Assess
      expect(result.retention).toMatchObject({
        complete: false,
        unfinished: [{ table: 'outbox', state: 'Sent' }],
      });
      expect(result.retention.total).toBeGreaterThan(0);
      expect(await left()).toBeGreaterThan(0);
      expect(result.followUp).toMatchObject({ booked: true, existed: false });
      expect(scheduler.calls).toHaveLength(1);
      expect(scheduler.calls[0]).toMatchObject({
        GroupName: GROUP,
        ActionAfterCompletion: 'DELETE',
        Target: {
          Arn: `arn:aws:lambda:eu-west-1:123456789012:function:${FUNCTION_NAME}`,
          RoleArn: ROLE_ARN,
          Input: JSON.stringify({ trigger: 'deferred' }),
        },
      });
      const at = /^at\((.+)\)$/.exec(String(scheduler.calls[0]?.ScheduleExpression))?.[1] ?? '';
      // The stepping clock ran a few seconds ahead: the next minute of it.
      expect(Date.parse(`${at}Z`) - started).toBeLessThanOrEqual(2 * 60_000);
      expect(warn).toHaveBeenCalledWith(
        'retention incomplete: old rows are left; the next run goes on with them',
        expect.objectContaining({ left: ['outbox sent'], total: result.retention.total }),
      );
    });

    it('the follow-up runs until retention completes, then books nothing more', async () => {
      // Prepare
      const scheduler = aScheduleRecorder();
      const { tick } = aTick(scheduler);
      const runs: { complete: boolean; booked: boolean }[] = [];

      // Act: each run as the booked one would start it, until one books nothing.
      for (let run = 0; run < 10; run++) {
        const result = await tick(aTickEvent(run === 0 ? 'schedule' : 'deferred'), context(4));
        runs.push({ complete: result.retention.complete, booked: result.followUp?.booked === true });
        if (result.followUp === undefined) break;
      }

      // Assess: every row deleted, and the last run complete with no booking.
      expect(await left()).toBe(0);
      expect(runs.at(-1)).toEqual({ complete: true, booked: false });
      expect(runs.slice(0, -1).every((r) => !r.complete && r.booked)).toBe(true);
    });

    it('a run with no time for a batch deletes nothing and books nothing (no chain without progress)', async () => {
      // Prepare
      const scheduler = aScheduleRecorder();
      const { tick, warn } = aTick(scheduler);

      // Act
      const result = await tick(aTickEvent('schedule'), context(0));

      // Assess
      expect(result.retention).toMatchObject({ complete: false, total: 0 });
      expect(result.followUp).toBeUndefined();
      expect(scheduler.calls).toEqual([]);
      expect(warn).toHaveBeenCalledWith(
        'retention incomplete and nothing deleted; no follow-up run booked',
        expect.objectContaining({ left: ['outbox sent', 'inbox processed'] }),
      );
    });

    it('a complete run books nothing', async () => {
      // Prepare
      const scheduler = aScheduleRecorder();
      const { tick } = aTick(scheduler);

      // Act
      const result = await tick(aTickEvent('schedule'), context(60));

      // Assess
      expect(result.retention).toMatchObject({ complete: true, total: 10, unfinished: [] });
      expect(result.followUp).toBeUndefined();
      expect(scheduler.calls).toEqual([]);
    });
  },
);
