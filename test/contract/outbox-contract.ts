import {
  type ClaimOptions,
  MessageState,
  type OutboxRow,
  QueueBoxError,
  type RowClaim,
  type SettleReport,
} from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import {
  allStale,
  anOutboxMessage,
  byId,
  CLOCK_SLACK_MS,
  type CurrentHarness,
  claimedAt,
  claimOf,
  foreignToken,
  idsOf,
  LEASE_MS,
  msBetween,
  present,
  ROW_ID,
  sortedReport,
  UUID,
  unique,
} from './fixtures.ts';

/** Registers the outbox part of the store contract. */
export function outboxContract(current: CurrentHarness): void {
  const outbox = () => current().store.outbox;
  const claim = (options: Partial<ClaimOptions> = {}) =>
    outbox().claim({ batchSize: 100, leaseMs: LEASE_MS, ...options });
  const get = async (id: string) => present(await outbox().get(id), `outbox row ${id}`);
  const claimOne = async (id: string): Promise<OutboxRow> => {
    const rows = await claim();
    const row = rows.find((r) => r.id === id);
    expect(row, `claim should return row ${id}`).toBeDefined();
    return row as OutboxRow;
  };

  /** Every settle of the outbox, with the arguments of an ordinary call. */
  const settles: Record<string, (claim: RowClaim) => Promise<SettleReport>> = {
    markSent: (c) => outbox().markSent([{ ...c, destination: 'billing' }]),
    retry: (c) => outbox().retry([{ ...c, error: 'HTTP 503', delayMs: 0 }]),
    markDead: (c) => outbox().markDead([{ ...c, reason: 'no route matches' }]),
    release: (c) => outbox().release([c]),
  };
  const settleNames = Object.keys(settles);
  const settle = (name: string, c: RowClaim) => {
    const fn = settles[name];
    if (!fn) throw new Error(`no settle ${name}`);
    return fn(c);
  };

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

  describe('outbox fencing', () => {
    it.each(settleNames)(
      '%s with a foreign token changes nothing and reports the row stale',
      async (name) => {
        const [id] = (await outbox().insert([anOutboxMessage()])) as [string];
        const row = await claimOne(id);
        const before = await get(id);

        const report = await settle(name, { id, claimToken: foreignToken() });

        expect(report).toEqual(allStale([id]));
        expect(await get(id)).toEqual(before);
        expect((await settle(name, claimOf(row))).settled.map((s) => s.id)).toEqual([id]);
      },
    );

    it.each(settleNames)(
      '%s with the token of an expired, reclaimed and re-claimed row is stale',
      async (name) => {
        const [id] = (await outbox().insert([anOutboxMessage()])) as [string];
        const lost = await claimOne(id);
        await current().expireLeases('outbox', [id]);
        expect(await outbox().reclaimExpired()).toEqual({ returned: 1, dead: 0 });
        const owner = await claimOne(id);
        const before = await get(id);

        const report = await settle(name, claimOf(lost));

        expect(report).toEqual(allStale([id]));
        expect(await get(id)).toEqual(before);
        expect(before).toMatchObject({ state: MessageState.Processing, claimToken: owner.claimToken });
      },
    );

    it.each(settleNames)(
      '%s of a row that is not processing (pending, sent, dead) is stale',
      async (name) => {
        const ids = await outbox().insert([anOutboxMessage(), anOutboxMessage(), anOutboxMessage()]);
        const [pending, sent, dead] = ids as [string, string, string];
        const rows = new Map((await claim()).map((r) => [r.id, r]));
        const claimFor = (id: string) => claimOf(rows.get(id) as OutboxRow);
        await outbox().release([claimFor(pending)]);
        await outbox().markSent([{ ...claimFor(sent), destination: 'billing' }]);
        await outbox().markDead([{ ...claimFor(dead), reason: 'no route' }]);
        const before = await Promise.all(ids.map(get));

        for (const id of ids) expect(await settle(name, claimFor(id))).toEqual(allStale([id]));

        expect(await Promise.all(ids.map(get))).toEqual(before);
      },
    );

    it.each(settleNames)('%s of an id that does not exist is stale', async (name) => {
      const [id] = (await outbox().insert([anOutboxMessage()])) as [string];
      const missing = (BigInt(id) + 1_000_000n).toString();

      expect(await settle(name, { id: missing, claimToken: foreignToken() })).toEqual(allStale([missing]));
    });

    it('a batch settles the rows it still holds and reports the others stale', async () => {
      const ids = await outbox().insert([anOutboxMessage(), anOutboxMessage(), anOutboxMessage()]);
      const [held, foreign, lost] = ids as [string, string, string];
      const rows = new Map((await claim()).map((r) => [r.id, r]));
      const claimFor = (id: string) => claimOf(rows.get(id) as OutboxRow);
      await outbox().release([claimFor(lost)]);
      await claim();

      const report = await outbox().markSent([
        { ...claimFor(held), destination: 'billing' },
        { id: foreign, claimToken: foreignToken(), destination: 'billing' },
        { ...claimFor(lost), destination: 'billing' },
      ]);

      expect(sortedReport(report)).toEqual({
        settled: [{ id: held, state: MessageState.Sent }],
        stale: [foreign, lost].sort(byId),
      });
      expect((await get(foreign)).state).toBe(MessageState.Processing);
      expect((await get(lost)).state).toBe(MessageState.Processing);
    });
  });

  describe('outbox ordering', () => {
    it('rows of one key come out one at a time in id order, beside other keys and unkeyed rows', async () => {
      const a = unique('key-a');
      const b = unique('key-b');
      const ids = await outbox().insert([
        anOutboxMessage({ key: a }),
        anOutboxMessage({ key: b }),
        anOutboxMessage({ key: null }),
        anOutboxMessage({ key: a }),
        anOutboxMessage(),
        anOutboxMessage({ key: b }),
        anOutboxMessage({ key: a }),
      ]);
      const [a1, b1, u1, a2, u2, b2, a3] = ids as [string, string, string, string, string, string, string];

      const rounds: string[][] = [];
      for (let round = 0; round < 5; round += 1) {
        const rows = await claim();
        rounds.push(idsOf(rows));
        if (rows.length === 0) break;
        await outbox().markSent(rows.map((r) => ({ ...claimOf(r), destination: 'billing' })));
      }

      expect(rounds).toEqual([[a1, b1, u1, u2].sort(byId), [a2, b2].sort(byId), [a3], []]);
    });

    it('a processing head holds back the rows of its key', async () => {
      const key = unique('key');
      const [head, next] = (await outbox().insert([anOutboxMessage({ key }), anOutboxMessage({ key })])) as [
        string,
        string,
      ];

      const first = await claim();
      const second = await claim();

      expect(idsOf(first)).toEqual([head]);
      expect(second).toEqual([]);
      expect((await get(next)).state).toBe(MessageState.Pending);
    });

    it('a retrying head holds back its key while other keys and unkeyed rows flow; dead lets the next go', async () => {
      const a = unique('key-a');
      const b = unique('key-b');
      const ids = await outbox().insert([
        anOutboxMessage({ key: a }),
        anOutboxMessage({ key: a }),
        anOutboxMessage({ key: b }),
        anOutboxMessage(),
      ]);
      const [a1, a2, b1, u1] = ids as [string, string, string, string];
      const round1 = new Map((await claim()).map((r) => [r.id, r]));
      expect([...round1.keys()].sort(byId)).toEqual([a1, b1, u1]);
      await outbox().retry([{ ...claimOf(round1.get(a1) as OutboxRow), error: 'HTTP 503', delayMs: 60_000 }]);
      await outbox().markSent([
        { ...claimOf(round1.get(b1) as OutboxRow), destination: 'billing' },
        { ...claimOf(round1.get(u1) as OutboxRow), destination: 'billing' },
      ]);
      const [b2, u2] = (await outbox().insert([anOutboxMessage({ key: b }), anOutboxMessage()])) as [
        string,
        string,
      ];

      const round2 = await claim();
      expect(idsOf(round2)).toEqual([b2, u2].sort(byId));

      await current().makeDue('outbox', [a1]);
      const round3 = await claim();
      expect(idsOf(round3)).toEqual([a1]);

      await outbox().markDead([{ ...claimOf(round3[0] as OutboxRow), reason: 'gave up' }]);
      expect(idsOf(await claim())).toEqual([a2]);
    });

    it('a head not yet due still holds back its key', async () => {
      const key = unique('key');
      await outbox().insert([anOutboxMessage({ key, delayMs: 60_000 })]);
      const [due] = (await outbox().insert([anOutboxMessage({ key })])) as [string];

      expect(await claim()).toEqual([]);
      expect((await get(due)).state).toBe(MessageState.Pending);
    });

    it('a released or reclaimed head keeps its place before the rows behind it', async () => {
      const key = unique('key');
      const [head] = (await outbox().insert([anOutboxMessage({ key }), anOutboxMessage({ key })])) as [
        string,
      ];
      const first = await claimOne(head);

      await outbox().release([claimOf(first)]);
      const second = await claim();
      expect(idsOf(second)).toEqual([head]);

      await current().expireLeases('outbox', [head]);
      await outbox().reclaimExpired();
      expect(idsOf(await claim())).toEqual([head]);
    });

    it('a row with an unknown state literal does not hold back its key', async () => {
      const key = unique('key');
      const [archived, next] = (await outbox().insert([
        anOutboxMessage({ key }),
        anOutboxMessage({ key }),
      ])) as [string, string];
      await current().setStateLiteral('outbox', archived, 'archived');

      expect(idsOf(await claim())).toEqual([next]);
    });
  });
}
