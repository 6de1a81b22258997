/**
 * `POST /admin/outbox/requeue` on a scripted store whose batches the database ends for a transient conflict (a
 * deadlock with the runtime's settles): a batch is tried again (`retryTransientConflicts`), and one that keeps
 * conflicting ends the run with 409 `requeue_conflict` and what it requeued before. It was 503 store_unavailable,
 * "The database is unavailable", which the database was not, and on AWS an AdminFailures alarm (an outside audit).
 */
import { type RequeueResult, type Store, StoreError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { BulkConflictError, retryTransientConflicts } from '../src/bulk-retry.ts';
import { createAdminHandler } from '../src/handler.ts';

const TOKEN = 'admin-token-0123456789';

/** A deadlock as the PostgreSQL store throws it. */
const deadlock = () =>
  new StoreError('A database statement failed: deadlock detected', { context: { transientConflict: true } });

/** A store whose requeue runs `script` in turn (a result, or an error to throw), the last step again after. */
function scriptedStore(script: readonly (RequeueResult | Error)[]) {
  let calls = 0;
  const store = {
    admin: {
      requeue: async () => {
        const step = script[Math.min(calls++, script.length - 1)] as RequeueResult | Error;
        if (step instanceof Error) throw step;
        return step;
      },
    },
    outbox: { get: async () => undefined },
    inbox: { get: async () => undefined },
  } as unknown as Pick<Store, 'admin' | 'outbox' | 'inbox'>;
  return { store, calls: () => calls };
}

const requeueAll = {
  method: 'POST',
  path: '/admin/outbox/requeue',
  headers: { authorization: `Bearer ${TOKEN}` },
  body: JSON.stringify({ all: true, batchSize: 2 }),
};
const batch = (ids: string[], more: boolean): RequeueResult => ({
  dryRun: false,
  count: ids.length,
  ids,
  more,
});

describe('POST /admin/outbox/requeue while the database ends batches for conflicts', () => {
  it('tries a batch the database ended for a deadlock again, and answers the whole run', async () => {
    // Prepare
    const { store, calls } = scriptedStore([batch(['1', '2'], true), deadlock(), batch(['3'], false)]);

    // Act
    const answer = await createAdminHandler({ store, token: TOKEN }).handle(requeueAll);

    // Assess
    expect(calls()).toBe(3);
    expect(answer).toEqual({
      status: 200,
      body: { dryRun: false, count: 3, ids: ['1', '2', '3'], more: false },
    });
  });

  it('answers 409 requeue_conflict with what it requeued before when a batch keeps conflicting, not 503', async () => {
    // Prepare
    const errors: unknown[] = [];
    const { store, calls } = scriptedStore([batch(['1', '2'], true), deadlock()]);

    // Act
    const answer = await createAdminHandler({
      store,
      token: TOKEN,
      onError: (error) => errors.push(error),
    }).handle(requeueAll);

    // Assess
    expect(calls()).toBe(5);
    expect(errors).toEqual([]);
    expect(answer).toEqual({
      status: 409,
      body: {
        error: 'requeue_conflict',
        message:
          'The database ended a requeue batch 4 times for a conflict with other transactions (a deadlock or serialization failure, e.g. with deliveries under way), so the run stopped there; 2 dead outbox rows were requeued before it. The database is available: run the requeue again, it goes on with the rows still dead',
        count: 2,
        ids: ['1', '2'],
        more: true,
      },
    });
  });
});

describe('retryTransientConflicts', () => {
  it('pauses 100, 200, 400 ms between tries, and throws any other error at once', async () => {
    // Prepare
    const pauses: number[] = [];
    const sleep = async (ms: number) => {
      pauses.push(ms);
    };
    let tries = 0;

    // Act
    const exhausted = await retryTransientConflicts(
      async () => {
        tries++;
        throw deadlock();
      },
      { sleep },
    ).catch((error: unknown) => error);
    const other = await retryTransientConflicts(
      async () => {
        throw new StoreError('syntax error');
      },
      { sleep },
    ).catch((error: unknown) => error);

    // Assess
    expect([tries, pauses]).toEqual([4, [100, 200, 400]]);
    expect(exhausted).toBeInstanceOf(BulkConflictError);
    expect((exhausted as BulkConflictError).tries).toBe(4);
    expect(other).toBeInstanceOf(StoreError);
    expect(other).not.toBeInstanceOf(BulkConflictError);
  });
});
