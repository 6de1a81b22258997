/** The outbox state table of the store contract, row by row. */
import { MessageState, type OutboxRow, QueueBoxError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import {
  allStale,
  anOutboxMessage,
  byId,
  CLOCK_SLACK_MS,
  type CurrentHarness,
  claimedAt,
  claimOf,
  idsOf,
  LEASE_MS,
  msBetween,
  ROW_ID,
  sortedReport,
  UUID,
} from './fixtures.ts';
import { outboxContractKit } from './outbox-contract-kit.ts';

export function outboxStateTableContract(current: CurrentHarness): void {
  const { outbox, claim, get, claimOne } = outboxContractKit(current);

  describe('outbox state table', () => {
    it('(insert) → pending: a new row is pending, unclaimed, with its fields as given', async () => {
      const ids = await outbox().insert([
        anOutboxMessage({
          topic: 'orders.created',
          key: 'order-1',
          payload: { n: 1 },
          headers: { 'X-Trace': 't1' },
        }),
        anOutboxMessage({ topic: 'orders.paid', payload: { n: 2 }, maxAttempts: 3 }),
      ]);

      expect(ids).toHaveLength(2);
      for (const id of ids) expect(id).toMatch(ROW_ID);
      expect(byId(ids[0] as string, ids[1] as string)).toBe(-1);
      const first = await get(ids[0] as string);
      expect(first).toMatchObject({
        id: ids[0],
        topic: 'orders.created',
        key: 'order-1',
        payload: { n: 1 },
        headers: { 'X-Trace': 't1' },
        state: MessageState.Pending,
        attempt: 0,
        maxAttempts: 5,
        claimToken: null,
        leaseUntil: null,
        sentAt: null,
        lastError: null,
        destination: null,
      });
      expect(first.scheduledAt).toBeInstanceOf(Date);
      expect(first.createdAt).toBeInstanceOf(Date);
      expect(first.updatedAt).toBeInstanceOf(Date);
      expect(await get(ids[1] as string)).toMatchObject({ key: null, headers: {}, maxAttempts: 3 });
    });

    it('(insert) of nothing returns no ids', async () => {
      expect(await outbox().insert([])).toEqual([]);
    });

    it('(insert) is all or nothing: a row the database refuses leaves no row behind', async () => {
      const refused = outbox().insert([anOutboxMessage(), anOutboxMessage({ maxAttempts: 0 })]);

      await expect(refused).rejects.toBeInstanceOf(QueueBoxError);
      expect(await current().countByState('outbox')).toEqual({});
    });

    it('pending → processing: a claim hands out a token and a lease and counts no attempt', async () => {
      const [id] = (await outbox().insert([anOutboxMessage()])) as [string];
      const inserted = await get(id);

      const rows = await claim();

      expect(idsOf(rows)).toEqual([id]);
      const row = rows[0] as OutboxRow;
      expect(row).toMatchObject({
        id,
        state: MessageState.Processing,
        attempt: 0,
        payload: inserted.payload,
      });
      expect(row.claimToken).toMatch(UUID);
      expect(row.leaseUntil).toBeInstanceOf(Date);
      expect(msBetween(inserted.createdAt, row.leaseUntil as Date)).toBeGreaterThanOrEqual(
        LEASE_MS - CLOCK_SLACK_MS,
      );
      expect(await get(id)).toMatchObject({
        state: MessageState.Processing,
        claimToken: row.claimToken,
        leaseUntil: row.leaseUntil,
      });
    });

    it('pending → processing: a claim takes at most batchSize rows and never a row twice', async () => {
      const ids = await outbox().insert(Array.from({ length: 5 }, () => anOutboxMessage()));

      const first = await claim({ batchSize: 2 });
      const second = await claim({ batchSize: 10 });
      const third = await claim({ batchSize: 10 });

      expect(first).toHaveLength(2);
      expect(second).toHaveLength(3);
      expect(third).toEqual([]);
      expect(idsOf([...first, ...second])).toEqual([...ids].sort(byId));
      const firstTokens = new Set(first.map((r) => r.claimToken));
      for (const row of second) expect(firstTokens.has(row.claimToken)).toBe(false);
    });

    it('processing → sent: markSent records the destination and the time, counting no attempt', async () => {
      const [id] = (await outbox().insert([anOutboxMessage()])) as [string];
      const row = await claimOne(id);

      const report = await outbox().markSent([{ ...claimOf(row), destination: 'billing' }]);

      expect(report).toEqual({ settled: [{ id, state: MessageState.Sent }], stale: [] });
      const sent = await get(id);
      expect(sent).toMatchObject({ state: MessageState.Sent, destination: 'billing', attempt: 0 });
      expect(sent.sentAt).toBeInstanceOf(Date);
    });

    it('processing → pending: retry counts the attempt and schedules the row at now + delay', async () => {
      const [id] = (await outbox().insert([anOutboxMessage({ maxAttempts: 3 })])) as [string];
      const row = await claimOne(id);

      const report = await outbox().retry([
        { ...claimOf(row), error: 'HTTP 503 — réessayer 🙏', delayMs: 60_000, destination: 'billing' },
      ]);

      expect(report).toEqual({ settled: [{ id, state: MessageState.Pending }], stale: [] });
      const retried = await get(id);
      expect(retried).toMatchObject({
        state: MessageState.Pending,
        attempt: 1,
        lastError: 'HTTP 503 — réessayer 🙏',
        destination: 'billing',
      });
      expect(msBetween(claimedAt(row), retried.scheduledAt)).toBeGreaterThanOrEqual(60_000 - CLOCK_SLACK_MS);
      expect(idsOf(await claim())).not.toContain(id);

      await current().makeDue('outbox', [id]);
      const again = await claimOne(id);
      expect(again.attempt).toBe(1);
      expect(again.claimToken).not.toBe(row.claimToken);
    });

    it('processing → dead: retry with no attempt left makes the row dead', async () => {
      const [id] = (await outbox().insert([anOutboxMessage({ maxAttempts: 2 })])) as [string];
      const first = await claimOne(id);
      const firstRetry = await outbox().retry([{ ...claimOf(first), error: 'timeout', delayMs: 0 }]);
      expect(firstRetry.settled).toEqual([{ id, state: MessageState.Pending }]);
      await current().makeDue('outbox', [id]);
      const second = await claimOne(id);

      const report = await outbox().retry([{ ...claimOf(second), error: 'timeout again', delayMs: 0 }]);

      expect(report).toEqual({ settled: [{ id, state: MessageState.Dead }], stale: [] });
      expect(await get(id)).toMatchObject({
        state: MessageState.Dead,
        attempt: 2,
        lastError: 'timeout again',
      });
    });

    it('processing → dead: markDead records the reason; attempted counts one attempt, default none', async () => {
      const ids = await outbox().insert([anOutboxMessage(), anOutboxMessage()]);
      const [unrouted, rejected] = ids as [string, string];
      const rows = await claim();
      const byRow = new Map(rows.map((r) => [r.id, r]));

      const report = await outbox().markDead([
        { ...claimOf(byRow.get(unrouted) as OutboxRow), reason: 'no route matches orders.created' },
        {
          ...claimOf(byRow.get(rejected) as OutboxRow),
          reason: 'HTTP 400 Bad Request',
          destination: 'billing',
          attempted: true,
        },
      ]);

      expect(sortedReport(report)).toEqual({
        settled: [
          { id: unrouted, state: MessageState.Dead },
          { id: rejected, state: MessageState.Dead },
        ],
        stale: [],
      });
      expect(await get(unrouted)).toMatchObject({
        state: MessageState.Dead,
        attempt: 0,
        lastError: 'no route matches orders.created',
        destination: null,
      });
      expect(await get(rejected)).toMatchObject({
        state: MessageState.Dead,
        attempt: 1,
        lastError: 'HTTP 400 Bad Request',
        destination: 'billing',
      });
    });

    it("processing → dead: markDead lowers max_attempts to a destination's lower maxAttempts, never raises it", async () => {
      // A destination's maxAttempts lowers the row's: the row goes dead as its attempt reaches its own max_attempts.
      const ids = await outbox().insert([
        anOutboxMessage({ maxAttempts: 10 }),
        anOutboxMessage({ maxAttempts: 3 }),
      ]);
      const [capped, kept] = ids as [string, string];
      const rows = await claim();
      const byRow = new Map(rows.map((r) => [r.id, r]));

      await outbox().markDead([
        {
          ...claimOf(byRow.get(capped) as OutboxRow),
          reason: 'HTTP 500',
          destination: 'hooks',
          attempted: true,
          maxAttempts: 1,
        },
        {
          ...claimOf(byRow.get(kept) as OutboxRow),
          reason: 'HTTP 500',
          destination: 'hooks',
          attempted: true,
          maxAttempts: 5,
        },
      ]);

      expect(await get(capped)).toMatchObject({ state: MessageState.Dead, attempt: 1, maxAttempts: 1 });
      expect(await get(kept)).toMatchObject({ state: MessageState.Dead, attempt: 1, maxAttempts: 3 });
    });

    it('processing → pending: release gives the row back without counting an attempt', async () => {
      const [id] = (await outbox().insert([anOutboxMessage()])) as [string];
      const row = await claimOne(id);

      const report = await outbox().release([claimOf(row)]);

      expect(report).toEqual({ settled: [{ id, state: MessageState.Pending }], stale: [] });
      expect(await get(id)).toMatchObject({ state: MessageState.Pending, attempt: 0 });
      const again = await claimOne(id);
      expect(again.claimToken).not.toBe(row.claimToken);
    });

    it('processing → pending: reclaim returns expired claims counting the attempt they used', async () => {
      const ids = await outbox().insert([
        anOutboxMessage({ maxAttempts: 3 }),
        anOutboxMessage({ maxAttempts: 3 }),
      ]);
      const claimed = await claim();
      expect(await current().expireLeases('outbox')).toBe(2);

      const report = await outbox().reclaimExpired();

      expect(report).toEqual({ returned: 2, dead: 0 });
      for (const id of ids) expect(await get(id)).toMatchObject({ state: MessageState.Pending, attempt: 1 });
      const again = await claim();
      expect(idsOf(again)).toEqual(idsOf(claimed));
    });

    it('processing → dead: reclaim makes an expired claim dead when no attempt remains', async () => {
      const [id] = (await outbox().insert([anOutboxMessage({ maxAttempts: 1 })])) as [string];
      await claimOne(id);
      await current().expireLeases('outbox', [id]);

      const report = await outbox().reclaimExpired();

      expect(report).toEqual({ returned: 0, dead: 1 });
      expect(await get(id)).toMatchObject({ state: MessageState.Dead, attempt: 1 });
      expect(idsOf(await claim())).not.toContain(id);
    });

    it('reclaim leaves live leases alone and honours its limit', async () => {
      const ids = await outbox().insert(Array.from({ length: 4 }, () => anOutboxMessage()));
      await claim();
      const live = ids[3] as string;
      await current().expireLeases('outbox', ids.slice(0, 3));

      const first = await outbox().reclaimExpired(2);
      const second = await outbox().reclaimExpired(2);
      const third = await outbox().reclaimExpired(2);

      expect(first).toEqual({ returned: 2, dead: 0 });
      expect(second).toEqual({ returned: 1, dead: 0 });
      expect(third).toEqual({ returned: 0, dead: 0 });
      expect(await get(live)).toMatchObject({ state: MessageState.Processing, attempt: 0 });
    });

    it('sent and dead rows are never claimed or reclaimed again', async () => {
      const ids = await outbox().insert([
        anOutboxMessage(),
        anOutboxMessage(),
        anOutboxMessage({ maxAttempts: 1 }),
        anOutboxMessage({ maxAttempts: 1 }),
      ]);
      const [sent, dead, retriedDead, reclaimedDead] = ids as [string, string, string, string];
      const rows = new Map((await claim()).map((r) => [r.id, r]));
      const claimFor = (id: string) => claimOf(rows.get(id) as OutboxRow);
      await outbox().markSent([{ ...claimFor(sent), destination: 'billing' }]);
      await outbox().markDead([{ ...claimFor(dead), reason: 'no route' }]);
      await outbox().retry([{ ...claimFor(retriedDead), error: 'boom', delayMs: 0 }]);
      await current().expireLeases('outbox', [reclaimedDead]);
      expect(await outbox().reclaimExpired()).toEqual({ returned: 0, dead: 1 });
      const before = await Promise.all(ids.map(get));

      await current().makeDue('outbox');
      await current().expireLeases('outbox');
      const reclaim = await outbox().reclaimExpired();
      const claimed = await claim();

      expect(reclaim).toEqual({ returned: 0, dead: 0 });
      expect(claimed).toEqual([]);
      expect(await Promise.all(ids.map(get))).toEqual(before);
      expect(before.map((r) => r.state)).toEqual([
        MessageState.Sent,
        MessageState.Dead,
        MessageState.Dead,
        MessageState.Dead,
      ]);
    });

    it('a row with an unknown state literal reads as Failed and is never claimed, reclaimed or settled', async () => {
      const ids = await outbox().insert([anOutboxMessage(), anOutboxMessage(), anOutboxMessage()]);
      const [wasPending, wasExpired, wasLive] = ids as [string, string, string];
      await current().setStateLiteral('outbox', wasPending, 'archived');
      const rows = new Map((await claim()).map((r) => [r.id, r]));
      expect([...rows.keys()].sort(byId)).toEqual([wasExpired, wasLive]);
      await current().expireLeases('outbox', [wasExpired]);
      await current().setStateLiteral('outbox', wasExpired, 'archived');
      await current().setStateLiteral('outbox', wasLive, 'archived');
      await current().makeDue('outbox');

      const claimed = await claim();
      const reclaim = await outbox().reclaimExpired();
      const settled = await outbox().markSent(
        [wasExpired, wasLive].map((id) => ({
          ...claimOf(rows.get(id) as OutboxRow),
          destination: 'billing',
        })),
      );

      expect(claimed).toEqual([]);
      expect(reclaim).toEqual({ returned: 0, dead: 0 });
      expect(sortedReport(settled)).toEqual(allStale([wasExpired, wasLive].sort(byId)));
      for (const id of ids) expect((await get(id)).state).toBe(MessageState.Failed);
      expect(await current().countByState('outbox')).toEqual({ archived: 3 });
    });

    it('a row not yet due (delayMs) is not claimed until its time', async () => {
      const [id] = (await outbox().insert([anOutboxMessage({ delayMs: 60_000 })])) as [string];
      const row = await get(id);
      expect(msBetween(row.createdAt, row.scheduledAt)).toBeGreaterThanOrEqual(60_000 - CLOCK_SLACK_MS);

      expect(await claim()).toEqual([]);

      await current().makeDue('outbox', [id]);
      expect(idsOf(await claim())).toEqual([id]);
    });
  });
}
