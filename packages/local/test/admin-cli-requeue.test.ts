/**
 * `queuebox outbox requeue` on a scripted store: the loop over batches stops after the last batch and after one
 * that requeued nothing, and the output says what the batch it stopped at left dead (key in flight, key busy).
 */
import { MessageState, type RequeueOptions, type RequeueResult, type Store } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import type { AdminPlan } from '../src/admin-cli.ts';
import { runCliCommand } from './support/admin-cli.ts';

/**
 * A store whose requeue answers `preview` to a dry run and `batches` in turn (the last again once they run out), and
 * whose rows are all dead (`get`).
 */
function scriptedStore(preview: RequeueResult, batches: readonly RequeueResult[]) {
  let calls = 0;
  const store = {
    admin: {
      requeue: async (_table: unknown, _selection: unknown, options: RequeueOptions = {}) =>
        options.dryRun === true ? preview : (batches[Math.min(calls++, batches.length - 1)] as RequeueResult),
    },
    outbox: { get: async (id: string) => ({ id, state: MessageState.Dead }) },
    inbox: { get: async () => undefined },
  } as unknown as Pick<Store, 'admin' | 'outbox' | 'inbox'>;
  return { store, calls: () => calls };
}

const run = runCliCommand;

const byTopic: AdminPlan = {
  kind: 'requeue',
  table: 'outbox',
  selection: { topic: 'orders.paid' },
  dryRun: false,
  batchSize: 2,
};
const preview: RequeueResult = { dryRun: true, count: 5, ids: ['1', '2'], more: true };
const busy = (ids: readonly string[]): RequeueResult['keyBusy'] => ({
  reason: 'key_busy',
  count: ids.length,
  rows: ids.map((id) => ({ id, key: 'Q' })),
});
const BUSY =
  "2 dead rows stay dead: another transaction held the insert lock of their keys (an application's enqueue not yet committed, or another requeue or replay) or their keys' next row to deliver (a claim or settle of it at that moment), and a requeue does not wait for either. Requeue again in a moment";

describe('outbox requeue --topic', () => {
  it('stops at a batch that requeued nothing although more may remain, and says what it left dead and why', async () => {
    const { store, calls } = scriptedStore(preview, [
      { dryRun: false, count: 2, ids: ['1', '2'], more: true },
      {
        dryRun: false,
        count: 0,
        ids: [],
        more: true,
        keyBusy: busy(['3', '4']),
        skipped: { reason: 'key_in_flight', count: 1, rows: [{ id: '9', key: 'P', processingId: '10' }] },
      },
      { dryRun: false, count: 3, ids: ['3', '4', '5'], more: false },
    ]);

    const text = await run(store, byTopic);

    expect(calls()).toBe(2);
    expect(text.code).toBe(0);
    expect(text.stdout).toBe(
      [
        // The rows left: the store's dry run at the end (scripted: always 5).
        'Requeued 2 dead outbox rows in all; 5 dead outbox rows left in the selection.',
        '1 dead row stays dead: it shares its key with a row being delivered (processing), and requeued it would be claimed beside that row. Requeue again when that row settles. Left dead: 9 (key "P", row 10 processing).',
        `${BUSY}. Left dead: 3 (key "Q"), 4 (key "Q").`,
        'Stopped at a batch that requeued none of the rows it chose; more dead outbox rows may remain: run the command again in a moment.',
        '',
      ].join('\n'),
    );
  });

  it('says the same as JSON, and ends when every batch requeues nothing (no endless loop)', async () => {
    const { store, calls } = scriptedStore(preview, [
      { dryRun: false, count: 0, ids: [], more: true, keyBusy: busy(['3', '4']) },
    ]);

    const json = await run(store, byTopic, true);

    expect(calls()).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual({
      ok: true,
      dryRun: false,
      count: 0,
      ids: [],
      deadLeft: 5,
      keyBusy: {
        reason: 'key_busy',
        count: 2,
        message: BUSY,
        rows: [
          { id: '3', key: 'Q' },
          { id: '4', key: 'Q' },
        ],
      },
      more: true,
    });
  });

  it('shows the report of the batch it stopped at, not an earlier one (a later batch chooses those rows again)', async () => {
    const { store } = scriptedStore(preview, [
      { dryRun: false, count: 1, ids: ['2'], more: true, keyBusy: busy(['1']) },
      { dryRun: false, count: 2, ids: ['1', '3'], more: false },
    ]);

    const text = await run(store, byTopic);

    expect(text.stdout).toBe(
      'Requeued 3 dead outbox rows in all; 5 dead outbox rows left in the selection.\n',
    );
  });
});

describe('outbox requeue <id> of a row whose key is busy', () => {
  it('exits 1 and says why, as text and as JSON', async () => {
    const plan: AdminPlan = { ...byTopic, selection: { ids: ['5'] } };
    const answers = (): [RequeueResult, RequeueResult[]] => [
      { dryRun: true, count: 1, ids: ['5'], more: false },
      [{ dryRun: false, count: 0, ids: [], more: false, keyBusy: busy(['5']) }],
    ];

    const text = await run(scriptedStore(...answers()).store, plan);
    const json = await run(scriptedStore(...answers()).store, plan, true);

    expect(text.code).toBe(1);
    expect(text.stderr).toBe(
      'Requeued 0 dead outbox rows.\nOutbox row 5 stays dead: another transaction holds the insert lock of its key "Q" (an application\'s enqueue of that key that has not committed yet, or another requeue or replay of it) or the key\'s next row to deliver (a claim or settle of that row at this moment), and a requeue does not wait for either. Try again in a moment.\n',
    );
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual({
      ok: false,
      error: 'key_busy',
      count: 0,
      ids: [],
      skipped: [{ id: '5', state: 'dead', reason: 'key_busy', key: 'Q' }],
    });
  });

  it('says which dead rows it did not reach when it stopped at a batch that requeued nothing', async () => {
    const plan: AdminPlan = { ...byTopic, selection: { ids: ['5', '6', '7'] }, batchSize: 1 };
    const { store, calls } = scriptedStore({ dryRun: true, count: 3, ids: ['5'], more: true }, [
      { dryRun: false, count: 0, ids: [], more: true, keyBusy: busy(['5']) },
    ]);

    const json = await run(store, plan, true);

    expect(calls()).toBe(1);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual({
      ok: false,
      error: 'key_busy',
      count: 0,
      ids: [],
      skipped: [
        { id: '5', state: 'dead', reason: 'key_busy', key: 'Q' },
        { id: '6', state: 'dead', reason: 'not_reached' },
        { id: '7', state: 'dead', reason: 'not_reached' },
      ],
    });
  });
});
