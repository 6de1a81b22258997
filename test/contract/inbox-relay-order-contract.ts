/**
 * The relay's claim and the order of one aggregate id (`InboxStore.claimForRelay`, migration 0006): the relay forwards
 * an inbox row into the outbox under its aggregate id as key, so the rows of one source and aggregate id must be
 * claimed in id order, across relays. Two relays are two claim calls here: a claim whose rows are not forwarded yet
 * is what another relay holds.
 */
import { MessageState, type RelayInboxRow } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { byId, type CurrentHarness, idsOf, LEASE_MS, present } from './fixtures.ts';
import { inboxContractKit, OTHER_SOURCE, SOURCE } from './inbox-contract-kit.ts';

export function inboxRelayOrderContract(current: CurrentHarness): void {
  const { inbox, claim, get, storeNew } = inboxContractKit(current);
  const relayClaim = (batchSize: number, sources = [SOURCE]) => ({ sources, batchSize, leaseMs: LEASE_MS });
  const forwardOf = (rows: readonly RelayInboxRow[]) =>
    rows.map((r) => ({
      id: r.id,
      claimToken: r.claimToken as string,
      outbox: { topic: 'relay.order', key: r.aggregateId, headers: { 'x-inbox-id': r.id }, maxAttempts: 2 },
    }));
  /** Stores one row of `aggregateId` per count, in order; answers their ids. */
  const storeMany = async (aggregateId: string | null, count: number, source = SOURCE) => {
    const ids: string[] = [];
    for (let i = 0; i < count; i += 1) ids.push(await storeNew({ aggregateId, source }));
    return ids;
  };
  /** The inbox id each outbox row of `outboxIds` was forwarded from, in outbox id order. */
  const inboxIdsOf = async (outboxIds: readonly string[]) => {
    const rows = await Promise.all(
      [...outboxIds]
        .sort((a, b) => Number(a) - Number(b))
        .map(async (id) => present(await current().store.outbox.get(id))),
    );
    return rows.map((r) => r.headers['x-inbox-id']);
  };

  describe("the relay's claim keeps the order of one aggregate id", () => {
    it('takes the rows of one id together in id order, and holds back its later rows while another claim holds earlier ones', async () => {
      const held = await storeMany('agg-o', 2);
      const later = await storeMany('agg-o', 3);
      const bare = await storeNew();
      // Other ids exactly (case, trailing space) and the same id of another source hold nothing back.
      const exact = [
        await storeNew({ aggregateId: 'AGG-O' }),
        await storeNew({ aggregateId: 'agg-o ' }),
        await storeNew({ aggregateId: 'agg-o', source: OTHER_SOURCE }),
      ];

      // Relay A takes the first two rows of agg-o and has not forwarded them yet.
      const first = await inbox().claimForRelay(relayClaim(2));
      // Relay B: the later rows of agg-o wait for A's; everything else is claimed.
      const second = await inbox().claimForRelay(relayClaim(100, [SOURCE, OTHER_SOURCE]));
      // A forwards its batch and claims the next in the same call: the rest of agg-o, together, in order.
      const step = await inbox().forwardAndClaim(forwardOf(first), relayClaim(100));
      const last = await inbox().forwardAndClaim(forwardOf(step.claimed), relayClaim(100));

      expect(idsOf(first)).toEqual(held);
      expect(idsOf(second)).toEqual([bare, ...exact]);
      expect(second.blocked).toBe(later.length);
      expect(idsOf(step.claimed)).toEqual(later);
      expect(step.claimed.blocked ?? 0).toBe(0);
      expect(last.claimed).toEqual([]);
      expect(await inboxIdsOf([...step.forwarded.outboxIds, ...last.forwarded.outboxIds])).toEqual([
        ...held,
        ...later,
      ]);
    });

    it('the statement that forwards the earlier row of an id claims the next one; a plain claim meanwhile takes nothing', async () => {
      const [x1, x2] = await storeMany('agg-f', 2);

      const first = await inbox().claimForRelay(relayClaim(1));
      const meanwhile = await inbox().claimForRelay(relayClaim(10));
      const step = await inbox().forwardAndClaim(forwardOf(first), relayClaim(10));

      expect(idsOf(first)).toEqual([x1]);
      expect(meanwhile).toHaveLength(0);
      expect(meanwhile.blocked).toBe(1);
      expect(step.forwarded.settled).toEqual([{ id: x1, state: MessageState.Sent }]);
      expect(idsOf(step.claimed)).toEqual([x2]);
    });

    it("claims an operator's requeued row of an id before the backlog of its id that now sorts before it, then the rest in id order", async () => {
      const [x1] = await storeMany('agg-r', 1);
      const [claimed1] = await inbox().claimForRelay(relayClaim(10));
      await inbox().markDead([
        { id: x1 as string, claimToken: claimed1?.claimToken as string, reason: 'no' },
      ]);
      const backlog = await storeMany('agg-r', 5);
      await current().makeDue('inbox');
      // The requeue schedules x1 now: after every row of the backlog, which it must still go before.
      const requeued = await current().store.admin.requeue('inbox', { ids: [x1 as string] });
      expect(requeued.ids).toEqual([x1]);

      const head = await inbox().claimForRelay(relayClaim(3));
      const next = await inbox().forwardAndClaim(forwardOf(head), relayClaim(3));
      const rest = await inbox().forwardAndClaim(forwardOf(next.claimed), relayClaim(3));
      const done = await inbox().forwardAndClaim(forwardOf(rest.claimed), relayClaim(3));

      expect(idsOf(head)).toEqual([x1]);
      expect(head.blocked).toBe(3);
      expect(idsOf(next.claimed)).toEqual(backlog.slice(0, 3));
      expect(idsOf(rest.claimed)).toEqual(backlog.slice(3));
      expect(done.claimed).toEqual([]);
      expect(
        await inboxIdsOf([
          ...next.forwarded.outboxIds,
          ...rest.forwarded.outboxIds,
          ...done.forwarded.outboxIds,
        ]),
      ).toEqual([x1, ...backlog]);
    });

    it("leaves an operator's requeue of a row dead while a later row of its id is with the relay, says so, and takes it once that row is forwarded", async () => {
      const [x1] = await storeMany('agg-q', 1);
      const [claimed1] = await inbox().claimForRelay(relayClaim(10));
      await inbox().markDead([
        { id: x1 as string, claimToken: claimed1?.claimToken as string, reason: 'no' },
      ]);
      const [x2] = await storeMany('agg-q', 1);
      // Rows of other ids exactly (case, another source) and without an id are requeued beside it.
      const others = [
        await storeNew({ aggregateId: 'AGG-Q' }),
        await storeNew({ aggregateId: 'agg-q', source: OTHER_SOURCE }),
        await storeNew(),
      ];
      const othersClaimed = await inbox().claimForRelay(relayClaim(10, [SOURCE, OTHER_SOURCE]));
      const withX2 = othersClaimed.filter((r) => r.id === x2);
      expect(withX2).toHaveLength(1);
      await inbox().markDead(
        othersClaimed
          .filter((r) => r.id !== x2)
          .map((r) => ({ id: r.id, claimToken: r.claimToken as string, reason: 'no' })),
      );
      // Relay A holds x2 (processing): x1, requeued now, would be forwarded after it.

      const preview = await current().store.admin.requeue('inbox', { ids: [x1 as string] }, { dryRun: true });
      const refused = await current().store.admin.requeue('inbox', { ids: [x1 as string] });
      const bulk = await current().store.admin.requeue('inbox', { ids: [x1 as string, ...others] });
      const stateMeanwhile = present(await get(x1 as string)).state;
      const meanwhile = await inbox().claimForRelay(relayClaim(10));
      await inbox().forward(forwardOf(withX2));
      const accepted = await current().store.admin.requeue('inbox', { ids: [x1 as string] });

      const inFlight = {
        reason: 'key_in_flight',
        count: 1,
        rows: [{ id: x1, key: 'agg-q', processingId: x2 }],
      };
      expect(preview).toMatchObject({ dryRun: true, count: 0, ids: [], skipped: inFlight });
      expect(refused).toEqual({ dryRun: false, count: 0, ids: [], more: false, skipped: inFlight });
      expect(bulk).toMatchObject({ count: 3, ids: [...others].sort(byId), skipped: inFlight });
      expect(stateMeanwhile).toBe(MessageState.Dead);
      expect(idsOf(meanwhile).sort(byId)).toEqual(others.filter((id) => id !== others[1]).sort(byId));
      expect(accepted).toEqual({ dryRun: false, count: 1, ids: [x1], more: false });
    });

    it('skips the ids of `skipAggregatesOf` (exactly those): reaches the rows behind a window full of a held id, reports the id while it is held, then reads it again in order', async () => {
      const [x1] = await storeMany('agg-s', 1);
      // Relay A takes x1 and keeps it (a crashed relay, whose lease runs).
      const first = await inbox().claimForRelay(relayClaim(1));
      const later = await storeMany('agg-s', 3);
      // Other ids exactly (case, trailing space), the same id of another source, another id, no id: never skipped.
      const others = [
        await storeNew({ aggregateId: 'AGG-S' }),
        await storeNew({ aggregateId: 'agg-s ' }),
        await storeNew({ aggregateId: 'agg-s', source: OTHER_SOURCE }),
        await storeNew({ aggregateId: 'agg-t' }),
        await storeNew(),
      ];

      // Relay B's window of 3 holds only agg-s's later rows: nothing taken, x1 named as what holds them back.
      const full = await inbox().claimForRelay(relayClaim(3));
      // Skipping agg-s (and naming rows that skip nothing: one without an id, one that does not exist), B's claims
      // reach the others; agg-s is still held by x1.
      const skip = [...(full.blockedBy ?? []), others[4] as string, '999999999'];
      const skipping = await inbox().claimForRelay({
        ...relayClaim(3, [SOURCE, OTHER_SOURCE]),
        skipAggregatesOf: skip,
      });
      const skippingRest = await inbox().claimForRelay({
        ...relayClaim(10, [SOURCE, OTHER_SOURCE]),
        skipAggregatesOf: skipping.blockedBy,
      });
      // A forwards x1: a claim that skips agg-s no longer names it, and the next plain claim takes its rows in order.
      const step = await inbox().forwardAndClaim(forwardOf(first), {
        ...relayClaim(10),
        skipAggregatesOf: skippingRest.blockedBy,
      });
      const rest = await inbox().claimForRelay(relayClaim(10));

      expect(idsOf(first)).toEqual([x1]);
      expect(full).toHaveLength(0);
      expect(full.blocked).toBe(later.length);
      expect(full.blockedBy).toEqual([x1]);
      expect([...idsOf(skipping), ...idsOf(skippingRest)].sort(byId)).toEqual([...others].sort(byId));
      expect(skipping.blocked ?? 0).toBe(0);
      expect(skipping.blockedBy).toEqual([x1]);
      expect(skippingRest.blockedBy).toEqual([x1]);
      expect(step.forwarded.settled).toEqual([{ id: x1, state: MessageState.Sent }]);
      expect(step.claimed).toEqual([]);
      expect(step.claimed.blockedBy).toBeUndefined();
      expect(idsOf(rest)).toEqual(later);
      expect(rest.blockedBy).toBeUndefined();
    });

    it('leaves pull claims as they were: due rows of one aggregate id together, whatever is processing before them', async () => {
      const [p1] = await storeMany('agg-p', 1);
      const [taken] = await claim({ batchSize: 1 });
      const rest = await storeMany('agg-p', 3);

      const rows = await claim({ batchSize: 10 });

      expect(taken?.id).toBe(p1);
      expect(idsOf(rows)).toEqual(rest);
      expect((await get(p1 as string)).state).toBe(MessageState.Processing);
    });
  });
}
