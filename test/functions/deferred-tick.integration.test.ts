/**
 * Demand-driven ticks: outbox-tick against the real PostgreSQL and a real HTTP destination that answers 503. A drain
 * that leaves a retry scheduled minutes out books one one-shot EventBridge Scheduler call of the function at that
 * minute; the bookings go to an in-memory recorder that answers ConflictException for a name it holds, as the
 * Scheduler API does (the Scheduler is not our persistence).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Store } from '@queuebox/core';
import { FUNCTION_ENV } from '@queuebox/deploy-contract';
import { openStore } from '@queuebox/store';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import type { ScheduleBooking, ScheduleCreator } from '@queuebox/wake-ups';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler as createMigrate } from '../../functions/migrate.ts';
import { createHandler as createOutboxTick } from '../../functions/outbox-tick.ts';
import { cleanup } from '../local/support.ts';
import {
  aLambdaContext,
  aTickEvent,
  functionConfigYaml,
  type TestShell,
  testShell,
  writeConfigFile,
} from './support.ts';

const needs = await requireServices('function tests: deferred-tick', ['postgres']);

const GROUP = 'queuebox-test-deferred';
const ROLE_ARN = 'arn:aws:iam::123456789012:role/queuebox-test-DeferredTickSchedulerRole';
const FUNCTION_NAME = 'queuebox-test-OutboxTickFunction-a1b2c3';

/** An in-memory Scheduler: schedules by group and name; a name it holds is a ConflictException. */
function aScheduleRecorder(): ScheduleCreator & {
  readonly calls: ScheduleBooking[];
  readonly held: string[];
} {
  const calls: ScheduleBooking[] = [];
  const held: string[] = [];
  return {
    calls,
    held,
    async createSchedule(input) {
      calls.push(input);
      const id = `${input.GroupName}/${input.Name}`;
      if (held.includes(id)) {
        throw Object.assign(new Error(`Schedule ${input.Name} already exists.`), {
          name: 'ConflictException',
        });
      }
      held.push(id);
    },
  };
}

/** A destination that answers 503 to everything, so each attempt becomes a retry. */
async function startFailingDestination(): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      response.writeHead(503);
      response.end();
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((done) => server.close(() => done()));
    },
  };
}

describe.skipIf(needs.skipReason)('outbox-tick books a deferred tick for rows scheduled later', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'functions_deferred', 1);
  let destination: Awaited<ReturnType<typeof startFailingDestination>>;
  let store: Store;
  let configFile: string;
  const shells: TestShell[] = [];
  const env = { [FUNCTION_ENV.wakeScheduleGroup]: GROUP, [FUNCTION_ENV.wakeSchedulerRoleArn]: ROLE_ARN };
  const shell = (extra: Parameters<typeof testShell>[1] = {}) => {
    const options = testShell(configFile, { env, ...extra });
    shells.push(options);
    return options;
  };
  const context = () => aLambdaContext({ functionName: FUNCTION_NAME });

  beforeAll(async () => {
    destination = await startFailingDestination();
    // Retries 3 to 6 minutes out (equal jitter on a 6-minute ceiling); a 7-minute periodic tick is `rate(…)`, at
    // a phase the function cannot know, so it never stands in for a booking.
    const yaml = functionConfigYaml({
      databaseUrl: needs.url.postgres,
      schema: schema.name,
      receiverUrl: destination.url,
    })
      .replace('backoff: { baseMs: 100, maxMs: 1000 }', 'backoff: { baseMs: 360000, maxMs: 360000 }')
      .concat('aws:\n  functions:\n    outboxTick: { rateMinutes: 7 }\n');
    configFile = await writeConfigFile(yaml);
    await createMigrate(testShell(configFile))(undefined, aLambdaContext());
    store = await openStore({
      provider: 'postgres',
      url: needs.url.postgres,
      schema: schema.name,
      poolSize: 2,
    });
  });

  afterAll(async () => {
    for (const options of shells) for (const cache of options.caches) await cache.close();
    await store?.close();
    await destination?.close();
    await cleanup();
  });

  it('books nothing when no row is pending', async () => {
    const scheduler = aScheduleRecorder();
    const outboxTick = createOutboxTick(shell({ scheduler }));

    const report = await outboxTick(aTickEvent('schedule'), context());

    expect(report).toMatchObject({ claimed: 0, deferred: { booked: false, reason: 'nothing-later' } });
    expect(scheduler.calls).toEqual([]);
  });

  it('a retry scheduled minutes out books one schedule at its due minute, deleted after it ran', async () => {
    const scheduler = aScheduleRecorder();
    const [id] = await store.outbox.insert([
      { topic: 'demo.order.created', key: 'o-1', payload: { id: 'o-1' }, maxAttempts: 5 },
    ]);
    const outboxTick = createOutboxTick(shell({ scheduler }));
    const started = Date.now();

    const report = await outboxTick(aTickEvent('wakeup'), context());

    const row = await store.outbox.get(id as string);
    expect(row).toMatchObject({ state: 'Pending', attempt: 1 });
    const dueMs = row?.scheduledAt.getTime() ?? 0;
    expect(dueMs - started).toBeGreaterThanOrEqual(3 * 60_000 - 1_000);
    const minute = Math.ceil(dueMs / 60_000) * 60_000;
    const at = new Date(minute).toISOString().slice(0, 19);
    expect(report).toMatchObject({ retried: 1, deferred: { booked: true, existed: false } });
    expect(scheduler.calls).toEqual([
      {
        Name: expect.stringMatching(/^[0-9A-Za-z_.-]{1,64}$/),
        GroupName: GROUP,
        ScheduleExpression: `at(${at})`,
        ScheduleExpressionTimezone: 'UTC',
        FlexibleTimeWindow: { Mode: 'OFF' },
        ActionAfterCompletion: 'DELETE',
        Target: {
          Arn: `arn:aws:lambda:eu-west-1:123456789012:function:${FUNCTION_NAME}`,
          RoleArn: ROLE_ARN,
          Input: JSON.stringify({ trigger: 'deferred' }),
        },
      },
    ]);
  });

  it('a drain its deadline stopped, with rows still due, books the next minute', async () => {
    // Prepare: a row due now, and an invocation with no time left for a claim (the deadline is now).
    const scheduler = aScheduleRecorder();
    const [id] = await store.outbox.insert([
      { topic: 'demo.order.created', key: 'o-due', payload: { id: 'o-due' }, maxAttempts: 5 },
    ]);
    const outboxTick = createOutboxTick(shell({ scheduler }));
    const started = Date.now();
    try {
      // Act
      const report = await outboxTick(
        aTickEvent('wakeup'),
        aLambdaContext({ functionName: FUNCTION_NAME, remainingMs: 3_000 }),
      );

      // Assess: nothing claimed, the row still due, and a deferred tick in the next minute (not "nothing-later").
      expect(report).toMatchObject({ claimed: 0, stoppedFor: 'time', deferred: { booked: true } });
      expect(await store.outbox.get(id as string)).toMatchObject({ state: 'Pending', attempt: 0 });
      const at = /^at\((.+)\)$/.exec(String(scheduler.calls[0]?.ScheduleExpression))?.[1] ?? '';
      const inMs = Date.parse(`${at}Z`) - started;
      expect(inMs).toBeGreaterThan(0);
      expect(inMs).toBeLessThanOrEqual(61_000);
    } finally {
      await pool.query(`DELETE FROM "${schema.name}".outbox WHERE id = $1`, [id]);
    }
  });

  it('two drains book that minute once: the same container skips the call, another one meets a conflict', async () => {
    const scheduler = aScheduleRecorder();
    const first = createOutboxTick(shell({ scheduler }));
    const second = createOutboxTick(shell({ scheduler }));

    const a = await first(aTickEvent('schedule'), context());
    const b = await first(aTickEvent('deferred'), context());
    const c = await second(aTickEvent('schedule'), context());

    expect(a).toMatchObject({ claimed: 0, deferred: { booked: true, existed: false } });
    expect(b).toMatchObject({ claimed: 0, deferred: { booked: true, existed: true } });
    expect(c).toMatchObject({ claimed: 0, deferred: { booked: true, existed: true } });
    expect(scheduler.held).toHaveLength(1);
    // The first container called once; the second called once and was told the schedule exists.
    expect(scheduler.calls).toHaveLength(2);
    expect(scheduler.calls[1]?.Name).toBe(scheduler.calls[0]?.Name);
  });

  it('books nothing without the schedule group and role (a deployment without deferred ticks)', async () => {
    const scheduler = aScheduleRecorder();
    const outboxTick = createOutboxTick(shell({ scheduler, env: {} }));

    const report = await outboxTick(aTickEvent('schedule'), context());

    expect(report).toMatchObject({ deferred: { booked: false, reason: 'not-configured' } });
    expect(scheduler.calls).toEqual([]);
  });

  it('a failed booking is logged and the drain still answers', async () => {
    const outboxTick = createOutboxTick(
      shell({
        scheduler: {
          createSchedule: async () => {
            throw Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' });
          },
        },
      }),
    );

    const report = await outboxTick(aTickEvent('schedule'), context());

    expect(report).toMatchObject({ claimed: 0, deferred: { booked: false, reason: 'failed' } });
  });

  it('a schema not yet migrated to 0005 (mid-deploy) books a tick a minute out instead of failing and losing the wake-up', async () => {
    // Prepare: the install table out of the way, as before the migrate function of the deploy ran.
    const scheduler = aScheduleRecorder();
    await pool.query(`ALTER TABLE "${schema.name}".install RENAME TO install_hidden`);
    try {
      const outboxTick = createOutboxTick(shell({ scheduler }));
      const started = Date.now();

      // Act
      const report = await outboxTick(aTickEvent('wakeup'), context());

      // Assess
      expect(report).toMatchObject({ waitingForMigration: true, deferred: { booked: true } });
      expect(scheduler.calls).toHaveLength(1);
      const at = /^at\((.+)\)$/.exec(String(scheduler.calls[0]?.ScheduleExpression))?.[1] ?? '';
      const inMs = Date.parse(`${at}Z`) - started;
      expect(inMs).toBeGreaterThanOrEqual(0);
      expect(inMs).toBeLessThanOrEqual(3 * 60_000);
    } finally {
      await pool.query(`ALTER TABLE "${schema.name}".install_hidden RENAME TO install`);
    }
  });
});
