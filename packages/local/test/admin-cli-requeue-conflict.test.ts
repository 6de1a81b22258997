/**
 * `queuebox outbox requeue --all` on a scripted store whose batches the database ends for a transient conflict (a
 * deadlock with deliveries): a batch is tried again, and a run whose batch keeps conflicting exits 1 saying what it
 * requeued before and what is still dead, not a bare `StoreError: deadlock detected` (an outside audit). The summary
 * gives the run's total and the dead rows left in the selection; `--json` lists at most 100 ids.
 */
import {
  MessageState,
  type RequeueOptions,
  type RequeueResult,
  type Store,
  StoreError,
} from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import type { AdminPlan } from '../src/admin-cli.ts';
import { runCliCommand } from './support/admin-cli.ts';

/** A deadlock as the PostgreSQL store throws it. */
const deadlock = () =>
  new StoreError('A database statement failed: deadlock detected', { context: { transientConflict: true } });

/**
 * A store with `left` dead rows (`deadRows`; its dry run answers none it could take), whose batches run `script` in
 * turn (a result, or an error to throw), the last step again once they run out.
 */
function scriptedStore(left: number, script: readonly (RequeueResult | Error)[]) {
  let calls = 0;
  const store = {
    admin: {
      deadRows: async () => left,
      requeue: async (_table: unknown, _selection: unknown, options: RequeueOptions = {}) => {
        if (options.dryRun === true) return { dryRun: true, count: 0, ids: [], more: false };
        const step = script[Math.min(calls++, script.length - 1)] as RequeueResult | Error;
        if (step instanceof Error) throw step;
        return step;
      },
    },
    outbox: { get: async (id: string) => ({ id, state: MessageState.Dead }) },
    inbox: { get: async () => undefined },
  } as unknown as Pick<Store, 'admin' | 'outbox' | 'inbox'>;
  return { store, calls: () => calls };
}

const run = runCliCommand;

const all: AdminPlan = { kind: 'requeue', table: 'outbox', selection: {}, dryRun: false, batchSize: 2 };
const batch = (ids: string[], more: boolean): RequeueResult => ({
  dryRun: false,
  count: ids.length,
  ids,
  more,
});

describe('outbox requeue --all while the database ends batches for conflicts', () => {
  it('tries a batch the database ended for a deadlock again, and finishes', async () => {
    // Prepare
    const { store, calls } = scriptedStore(0, [batch(['1', '2'], true), deadlock(), batch(['3'], false)]);

    // Act
    const text = await run(store, all);

    // Assess
    expect(calls()).toBe(3);
    expect(text.code).toBe(0);
    expect(text.stdout).toBe(
      'Requeued 3 dead outbox rows in all; 0 dead outbox rows left in the selection.\n',
    );
  });

  it('exits 1 when a batch keeps conflicting, saying what it requeued before and what is left, as text and JSON', async () => {
    // Prepare
    const script = [batch(['1', '2'], true), deadlock()];

    // Act
    const text = await run(scriptedStore(7, script).store, all);
    const json = await run(scriptedStore(7, script).store, all, true);

    // Assess
    const message =
      'The database ended a requeue batch 4 times for a conflict with other transactions (a deadlock or serialization failure, e.g. with deliveries under way), so the run stopped there; 2 dead outbox rows were requeued before it. The database is available: run the requeue again, it goes on with the rows still dead';
    expect(text.code).toBe(1);
    expect(text.stderr).toBe(
      `requeued 2/2 outbox rows\n${message}. 7 dead outbox rows left in the selection.\n`,
    );
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual({
      ok: false,
      error: 'requeue_conflict',
      message,
      count: 2,
      ids: ['1', '2'],
      deadLeft: 7,
    });
  });

  it('lists at most 100 ids as JSON, with the count of them all and how many it left out', async () => {
    // Prepare: 20,000 rows in two batches.
    const ids = Array.from({ length: 20_000 }, (_, i) => String(i + 1));
    const { store } = scriptedStore(0, [batch(ids.slice(0, 10_000), true), batch(ids.slice(10_000), false)]);

    // Act
    const json = await run(store, { ...all, batchSize: 10_000 }, true);

    // Assess
    const answer = JSON.parse(json.stdout);
    expect(json.stdout.length).toBeLessThan(2_000);
    expect(answer).toEqual({
      ok: true,
      dryRun: false,
      count: 20_000,
      ids: ids.slice(0, 100),
      idsOmitted: 19_900,
      deadLeft: 0,
    });
  });
});
