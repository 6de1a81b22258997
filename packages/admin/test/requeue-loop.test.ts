/**
 * The bulk requeue's loop and its answer, on a scripted store: it stops after the last batch, at the budget and
 * after a batch that requeued nothing, and answers what the batch it stopped at left dead (`skipped`, `keyBusy`).
 */
import type { RequeueResult, Store } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { createAdminHandler } from '../src/handler.ts';

const TOKEN = 'admin-token-0123456789';

/** A store whose requeue answers `batches` in turn (the last one again once they run out), counting the calls. */
function scriptedStore(batches: readonly RequeueResult[]) {
  let calls = 0;
  const store = {
    admin: {
      requeue: async () => batches[Math.min(calls++, batches.length - 1)] as RequeueResult,
    },
    outbox: { get: async () => undefined },
    inbox: { get: async () => undefined },
  } as unknown as Pick<Store, 'admin' | 'outbox' | 'inbox'>;
  return { store, calls: () => calls };
}

const post = (path: string, body: unknown) => ({
  method: 'POST',
  path,
  headers: { authorization: `Bearer ${TOKEN}` },
  body: JSON.stringify(body),
});

const keyBusy = (ids: readonly string[]): RequeueResult['keyBusy'] => ({
  reason: 'key_busy',
  count: ids.length,
  rows: ids.map((id) => ({ id, key: 'Q' })),
});
const skipped: RequeueResult['skipped'] = {
  reason: 'key_in_flight',
  count: 1,
  rows: [{ id: '9', key: 'P', processingId: '10' }],
};

const BUSY_MESSAGE =
  "another transaction held the insert lock of their keys (an application's enqueue not yet committed, or another requeue or replay) or their keys' next row to deliver (a claim or settle of it at that moment), and a requeue does not wait for either. Requeue again in a moment";

describe('POST /admin/outbox/requeue: the loop over batches', () => {
  it('stops at a batch that requeued nothing although the store says more, and answers what it left dead', async () => {
    const { store, calls } = scriptedStore([
      { dryRun: false, count: 2, ids: ['1', '2'], more: true },
      { dryRun: false, count: 0, ids: [], more: true, skipped, keyBusy: keyBusy(['5', '6']) },
      { dryRun: false, count: 3, ids: ['7', '8', '11'], more: false },
    ]);

    const answer = await createAdminHandler({ store, token: TOKEN }).handle(
      post('/admin/outbox/requeue', { all: true, batchSize: 2 }),
    );

    expect(calls()).toBe(2);
    expect(answer).toEqual({
      status: 200,
      body: {
        dryRun: false,
        count: 2,
        ids: ['1', '2'],
        // Rows remain (those of busy keys, and any after them): send it again in a moment.
        more: true,
        skipped: expect.objectContaining({ reason: 'key_in_flight', count: 1 }),
        keyBusy: {
          reason: 'key_busy',
          count: 2,
          message: `2 dead rows stay dead: ${BUSY_MESSAGE}`,
          rows: [
            { id: '5', key: 'Q' },
            { id: '6', key: 'Q' },
          ],
        },
      },
    });
  });

  it('ends when every batch requeues nothing and leaves everything dead (no spinning until the budget)', async () => {
    const { store, calls } = scriptedStore([
      { dryRun: false, count: 0, ids: [], more: true, keyBusy: keyBusy(['5', '6']) },
    ]);

    const answer = await createAdminHandler({ store, token: TOKEN, bulkBudgetMs: 60_000 }).handle(
      post('/admin/outbox/requeue', { topic: 'orders.paid', batchSize: 2 }),
    );

    expect(calls()).toBe(1);
    expect(answer.body).toMatchObject({ count: 0, ids: [], more: true, keyBusy: { count: 2 } });
  });

  it('answers the report of the batch it stopped at, not an earlier one (a later batch chooses those rows again)', async () => {
    const { store, calls } = scriptedStore([
      { dryRun: false, count: 1, ids: ['6'], more: true, keyBusy: keyBusy(['5']) },
      { dryRun: false, count: 2, ids: ['5', '7'], more: false },
    ]);

    const answer = await createAdminHandler({ store, token: TOKEN }).handle(
      post('/admin/outbox/requeue', { all: true, batchSize: 2 }),
    );

    expect(calls()).toBe(2);
    expect(answer.body).toEqual({ dryRun: false, count: 3, ids: ['6', '5', '7'], more: false });
  });
});

describe('POST /admin/outbox/:id/requeue of a row whose key is busy', () => {
  it('answers 409 key_busy, naming the key and saying to try again', async () => {
    const { store } = scriptedStore([
      { dryRun: false, count: 0, ids: [], more: false, keyBusy: keyBusy(['5']) },
    ]);

    const answer = await createAdminHandler({ store, token: TOKEN }).handle(
      post('/admin/outbox/5/requeue', {}),
    );

    expect(answer).toEqual({
      status: 409,
      body: {
        error: 'key_busy',
        message:
          'Outbox row 5 stays dead: another transaction holds the insert lock of its key "Q" (an application\'s enqueue of that key that has not committed yet, or another requeue or replay of it) or the key\'s next row to deliver (a claim or settle of that row at this moment), and a requeue does not wait for either. Try again in a moment',
        key: 'Q',
      },
    });
  });
});
