/**
 * outbox-tick against the real PostgreSQL and a real HTTP receiver: it drains only within its budget (the
 * invocation's remaining time minus the safety margin) and gives deliveries cut short by the deadline back as
 * pending rows; a later tick delivers them.
 */
import { type Store, StoreUnavailableError } from '@queuebox/core';
import { openStore } from '@queuebox/store';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler as createMigrate } from '../../functions/migrate.ts';
import { createHandler as createOutboxTick } from '../../functions/outbox-tick.ts';
import { cleanup, type Receiver, startReceiver } from '../local/support.ts';
import {
  aLambdaContext,
  aScheduledEvent,
  aTickEvent,
  functionConfigYaml,
  type TestShell,
  testShell,
  writeConfigFile,
} from './support.ts';

const needs = await requireServices('function tests: outbox-tick', ['postgres']);

describe.skipIf(needs.skipReason)('outbox-tick and its time budget', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'functions_outbox', 1);
  let receiver: Receiver;
  let store: Store;
  let configFile: string;
  const shells: TestShell[] = [];
  const shell = (extra: Parameters<typeof testShell>[1] = {}) => {
    const options = testShell(configFile, extra);
    shells.push(options);
    return options;
  };

  beforeAll(async () => {
    receiver = await startReceiver();
    configFile = await writeConfigFile(
      functionConfigYaml({ databaseUrl: needs.url.postgres, schema: schema.name, receiverUrl: receiver.url }),
    );
    await createMigrate(shell())(undefined, aLambdaContext());
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
    await receiver?.close();
    await cleanup();
  });

  const states = async () =>
    (await pool.query(`SELECT state, attempt FROM "${schema.name}".outbox ORDER BY id`)).rows as {
      state: string;
      attempt: number;
    }[];
  const enqueue = (n: number, prefix: string) =>
    store.outbox.insert(
      Array.from({ length: n }, (_, i) => ({
        topic: 'demo.budget',
        key: `${prefix}-${i}`,
        payload: { n: i },
        maxAttempts: 5,
      })),
    );

  it('claims nothing when the remaining time is within the safety margin (default 3000 ms)', async () => {
    await enqueue(2, 'margin');
    const outboxTick = createOutboxTick(shell());

    const report = await outboxTick(aScheduledEvent(), aLambdaContext({ remainingMs: 2_500 }));

    expect(report).toMatchObject({ claimed: 0, sent: 0, stoppedFor: 'time' });
    expect(await states()).toEqual([
      { state: 'pending', attempt: 0 },
      { state: 'pending', attempt: 0 },
    ]);
    expect(receiver.deliveries).toHaveLength(0);
  });

  it('stops at its deadline: deliveries still in flight are cut and their rows are pending again, the attempt counted, none left processing', async () => {
    const held = receiver.hold(() => true);
    const outboxTick = createOutboxTick(shell({ safetyMarginMs: 1_000 }));

    // deadline = now + 4000 − 1000; the poller aborts deliveries 1000 ms before it to settle them.
    const report = await outboxTick(aTickEvent('schedule'), aLambdaContext({ remainingMs: 4_000 }));
    held.release();

    expect(report).toMatchObject({ claimed: 2, sent: 0, retried: 2, stoppedFor: 'time' });
    expect(receiver.deliveries).toHaveLength(2);
    const after = await states();
    expect(after.map((r) => r.state)).toEqual(['pending', 'pending']);
    expect(after.map((r) => r.attempt)).toEqual([1, 1]);
  });

  it('delivers the rows on the next tick with time to spare', async () => {
    const outboxTick = createOutboxTick(shell());

    const report = await outboxTick(aTickEvent('schedule'), aLambdaContext({ remainingMs: 60_000 }));

    expect(report).toMatchObject({ sent: 2, stoppedFor: 'empty' });
    expect((await states()).map((r) => r.state)).toEqual(['sent', 'sent']);
  });

  it('settles and reports the drain, then fails the invocation when the gauges after it cannot be read', async () => {
    // Prepare: the real store, whose dead-row count (the gauges' read) fails as a timed-out statement would.
    await enqueue(1, 'gauges');
    const failing = shell({
      openStore: async () => {
        const real = await openStore({
          provider: 'postgres',
          url: needs.url.postgres,
          schema: schema.name,
          poolSize: 2,
        });
        const deadRows = () => Promise.reject(new StoreUnavailableError('dead-row count timed out (test)'));
        return {
          ...real,
          admin: new Proxy(real.admin, { get: (t, p) => (p === 'deadRows' ? deadRows : Reflect.get(t, p)) }),
        };
      },
    });
    const outboxTick = createOutboxTick(failing);

    // Act
    const outcome = await outboxTick(aTickEvent('schedule'), aLambdaContext({ remainingMs: 60_000 })).then(
      () => undefined,
      (error: unknown) => error,
    );

    // Assess: the row was delivered and settled; the failure still reaches the errors alarm.
    expect(outcome).toBeInstanceOf(StoreUnavailableError);
    expect((await states()).map((r) => r.state)).toEqual(['sent', 'sent', 'sent']);
  });
});
