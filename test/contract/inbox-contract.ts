import {
  type InboxClaimOptions,
  type InboxRow,
  MessageState,
  QueueBoxError,
  type RowClaim,
  type SettleReport,
} from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import {
  allStale,
  anInboxMessage,
  anOutboxMessage,
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

const SOURCE = 'source-a';
const OTHER_SOURCE = 'source-b';

/** Registers the inbox part of the store contract. */
export function inboxContract(current: CurrentHarness): void {
  const inbox = () => current().store.inbox;
  const claim = (options: Partial<InboxClaimOptions> = {}) =>
    inbox().claim({ sources: [SOURCE], batchSize: 100, leaseMs: LEASE_MS, ...options });
  const get = async (id: string) => present(await inbox().get(id), `inbox row ${id}`);
  const storeNew = async (overrides: Parameters<typeof anInboxMessage>[0] = {}) => {
    const result = await inbox().store(anInboxMessage(overrides));
    expect(result.status).toBe('stored');
    return result.id;
  };
  const claimOne = async (id: string, options: Partial<InboxClaimOptions> = {}): Promise<InboxRow> => {
    const rows = await claim(options);
    const row = rows.find((r) => r.id === id);
    expect(row, `claim should return inbox row ${id}`).toBeDefined();
    return row as InboxRow;
  };
  const outboxCount = async () => {
    const counts = await current().countByState('outbox');
    return Object.values(counts).reduce((sum, n) => sum + n, 0);
  };

  /** Every settle of the inbox, with the arguments of an ordinary call. */
  const settles: Record<string, (claim: RowClaim) => Promise<SettleReport>> = {
    complete: (c) => inbox().complete([c]),
    retry: (c) => inbox().retry([{ ...c, error: 'worker failed', delayMs: 0 }]),
    giveUp: (c) => inbox().giveUp([{ ...c, reason: 'worker gave up' }]),
    forward: (c) => inbox().forward([{ ...c, outbox: anOutboxMessage({ topic: 'relay.forwarded' }) }]),
  };
  const settleNames = Object.keys(settles);
  const settle = (name: string, c: RowClaim) => {
    const fn = settles[name];
    if (!fn) throw new Error(`no settle ${name}`);
    return fn(c);
  };

  describe('inbox state table', () => {
    it('(store) → pending: a new message is pending and unclaimed, with its fields as given', async () => {
      const message = anInboxMessage({
        eventType: 'invoice.paid',
        aggregateId: 'inv-1',
        correlationId: 'corr-1',
        payload: { id: 'evt_1', amount: 12.5 },
        headers: { 'Stripe-Signature': 't=1,v1=abc' },
        maxAttempts: 4,
      });

      const result = await inbox().store(message);

      expect(result.status).toBe('stored');
      expect(result.id).toMatch(ROW_ID);
      const row = await get(result.id);
      expect(row).toMatchObject({
        id: result.id,
        source: SOURCE,
        idempotencyKey: message.idempotencyKey,
        eventType: 'invoice.paid',
        aggregateId: 'inv-1',
        correlationId: 'corr-1',
        payload: { id: 'evt_1', amount: 12.5 },
        headers: { 'Stripe-Signature': 't=1,v1=abc' },
        state: MessageState.Pending,
        attempt: 0,
        maxAttempts: 4,
        claimToken: null,
        leaseUntil: null,
        processedAt: null,
        lastError: null,
      });
      expect(row.scheduledAt).toBeInstanceOf(Date);
      expect(row.receivedAt).toBeInstanceOf(Date);
      const bare = await get(await storeNew());
      expect(bare).toMatchObject({ eventType: null, aggregateId: null, correlationId: null, headers: {} });
    });

    it('(store) → dead: storeDead writes a dead row with the reason, never claimed', async () => {
      const result = await inbox().storeDead(anInboxMessage(), 'body is not JSON');

      expect(result.status).toBe('stored');
      expect(await get(result.id)).toMatchObject({
        state: MessageState.Dead,
        lastError: 'body is not JSON',
        claimToken: null,
      });
      expect(await claim({ takeOverExpired: true })).toEqual([]);
      expect(await current().countByState('inbox')).toEqual({ dead: 1 });
    });

    it('pending → processing: a claim takes due rows of the given sources only, with a token and a lease', async () => {
      const mine = await storeNew();
      const other = await storeNew({ source: OTHER_SOURCE });
      const stored = await get(mine);

      const rows = await claim();

      expect(idsOf(rows)).toEqual([mine]);
      const row = rows[0] as InboxRow;
      expect(row).toMatchObject({
        id: mine,
        state: MessageState.Processing,
        attempt: 0,
        payload: stored.payload,
      });
      expect(row.claimToken).toMatch(UUID);
      expect(msBetween(stored.receivedAt, row.leaseUntil as Date)).toBeGreaterThanOrEqual(
        LEASE_MS - CLOCK_SLACK_MS,
      );
      expect(await get(mine)).toMatchObject({ state: MessageState.Processing, claimToken: row.claimToken });
      expect((await get(other)).state).toBe(MessageState.Pending);
      expect(idsOf(await claim({ sources: [SOURCE, OTHER_SOURCE] }))).toEqual([other]);
    });

    it('pending → processing: a claim takes at most batchSize rows; no sources claims nothing', async () => {
      for (let i = 0; i < 3; i += 1) await storeNew();

      expect(await claim({ sources: [] })).toEqual([]);
      expect(await claim({ batchSize: 2 })).toHaveLength(2);
      expect(await claim({ batchSize: 2 })).toHaveLength(1);
      expect(await claim({ batchSize: 2 })).toEqual([]);
    });

    it('processing → processed: complete marks the row processed', async () => {
      const id = await storeNew();
      const row = await claimOne(id);

      const report = await inbox().complete([claimOf(row)]);

      expect(report).toEqual({ settled: [{ id, state: MessageState.Sent }], stale: [] });
      const done = await get(id);
      expect(done.state).toBe(MessageState.Sent);
      expect(done.processedAt).toBeInstanceOf(Date);
      expect(await current().countByState('inbox')).toEqual({ processed: 1 });
    });

    it('processing → pending: a pull retry counts the attempt and schedules the row at now + delay', async () => {
      const id = await storeNew();
      const row = await claimOne(id);

      const report = await inbox().retry([
        { ...claimOf(row), error: 'downstream 503 — 再試行', delayMs: 60_000 },
      ]);

      expect(report).toEqual({ settled: [{ id, state: MessageState.Pending }], stale: [] });
      const retried = await get(id);
      expect(retried).toMatchObject({
        state: MessageState.Pending,
        attempt: 1,
        lastError: 'downstream 503 — 再試行',
      });
      expect(msBetween(claimedAt(row), retried.scheduledAt)).toBeGreaterThanOrEqual(60_000 - CLOCK_SLACK_MS);
      expect(await claim({ takeOverExpired: true })).toEqual([]);

      await current().makeDue('inbox', [id]);
      const again = await claimOne(id);
      expect(again.attempt).toBe(1);
      expect(again.claimToken).not.toBe(row.claimToken);
    });

    it('processing → pending: the relay reclaim returns expired claims of its sources, counting the attempt', async () => {
      const mine = await storeNew();
      const live = await storeNew();
      const other = await storeNew({ source: OTHER_SOURCE });
      await claim({ sources: [SOURCE, OTHER_SOURCE] });
      await current().expireLeases('inbox', [mine, other]);

      const report = await inbox().reclaimExpired([SOURCE]);

      expect(report).toEqual({ returned: 1, dead: 0 });
      expect(await get(mine)).toMatchObject({ state: MessageState.Pending, attempt: 1 });
      expect(await get(live)).toMatchObject({ state: MessageState.Processing, attempt: 0 });
      expect(await get(other)).toMatchObject({ state: MessageState.Processing, attempt: 0 });
      expect(idsOf(await claim())).toEqual([mine]);
    });

    it('inbox retry and relay reclaim never make a row dead, even with its attempts used up', async () => {
      // The seed's inbox table has no "no attempt remains" row: only the topic rendering empty or a pull worker
      // giving up makes an inbox row dead.
      const retried = await storeNew({ maxAttempts: 1 });
      const reclaimed = await storeNew({ maxAttempts: 1 });
      const rows = new Map((await claim()).map((r) => [r.id, r]));

      const retry = await inbox().retry([
        { ...claimOf(rows.get(retried) as InboxRow), error: 'again', delayMs: 0 },
      ]);
      await current().expireLeases('inbox', [reclaimed]);
      const reclaim = await inbox().reclaimExpired([SOURCE]);

      expect(retry).toEqual({ settled: [{ id: retried, state: MessageState.Pending }], stale: [] });
      expect(reclaim).toEqual({ returned: 1, dead: 0 });
      expect(await get(retried)).toMatchObject({ state: MessageState.Pending, attempt: 1 });
      expect(await get(reclaimed)).toMatchObject({ state: MessageState.Pending, attempt: 1 });
    });

    it('the relay reclaim honours its limit', async () => {
      for (let i = 0; i < 3; i += 1) await storeNew();
      await claim();
      await current().expireLeases('inbox');

      const first = await inbox().reclaimExpired([SOURCE], 2);
      const second = await inbox().reclaimExpired([SOURCE], 2);

      expect(first).toEqual({ returned: 2, dead: 0 });
      expect(second).toEqual({ returned: 1, dead: 0 });
    });

    it('processing → processing: a pull claim takes over an expired claim with a new token, counting an attempt', async () => {
      const id = await storeNew();
      const lost = await claimOne(id);
      await current().expireLeases('inbox', [id]);

      expect(await claim()).toEqual([]);
      const taken = await claimOne(id, { takeOverExpired: true });

      expect(taken).toMatchObject({ id, state: MessageState.Processing, attempt: 1 });
      expect(taken.claimToken).toMatch(UUID);
      expect(taken.claimToken).not.toBe(lost.claimToken);
      expect(claimedAt(taken).getTime()).toBeGreaterThanOrEqual(claimedAt(lost).getTime() - CLOCK_SLACK_MS);
      expect(await inbox().complete([claimOf(lost)])).toEqual(allStale([id]));
      expect(await inbox().complete([claimOf(taken)])).toEqual({
        settled: [{ id, state: MessageState.Sent }],
        stale: [],
      });
    });

    it('a takeover leaves live claims and other sources alone', async () => {
      const live = await storeNew();
      const other = await storeNew({ source: OTHER_SOURCE });
      await claim({ sources: [SOURCE, OTHER_SOURCE] });
      await current().expireLeases('inbox', [other]);

      expect(await claim({ takeOverExpired: true })).toEqual([]);
      expect(await get(live)).toMatchObject({ state: MessageState.Processing, attempt: 0 });
      expect(await get(other)).toMatchObject({ state: MessageState.Processing, attempt: 0 });
    });

    it('processing → dead: giveUp records the reason', async () => {
      const id = await storeNew();
      const row = await claimOne(id);

      const report = await inbox().giveUp([{ ...claimOf(row), reason: 'topic rendered empty' }]);

      expect(report).toEqual({ settled: [{ id, state: MessageState.Dead }], stale: [] });
      expect(await get(id)).toMatchObject({ state: MessageState.Dead, lastError: 'topic rendered empty' });
    });

    it('processing → processed: forward writes the outbox row and marks the inbox row processed', async () => {
      const id = await storeNew({ aggregateId: 'agg-1', payload: { id: 'evt_9', items: [1, 2] } });
      const row = await claimOne(id);
      const message = anOutboxMessage({
        topic: 'stripe.invoice.paid',
        key: 'agg-1',
        payload: row.payload,
        headers: { 'x-inbox-id': id, 'x-source': SOURCE },
        maxAttempts: 7,
      });

      const report = await inbox().forward([{ ...claimOf(row), outbox: message }]);

      expect(report.settled).toEqual([{ id, state: MessageState.Sent }]);
      expect(report.stale).toEqual([]);
      expect(report.outboxIds).toHaveLength(1);
      const outboxId = report.outboxIds[0] as string;
      expect(outboxId).toMatch(ROW_ID);
      const forwarded = present(await current().store.outbox.get(outboxId), 'forwarded outbox row');
      expect(forwarded).toMatchObject({
        topic: 'stripe.invoice.paid',
        key: 'agg-1',
        payload: { id: 'evt_9', items: [1, 2] },
        headers: { 'x-inbox-id': id, 'x-source': SOURCE },
        maxAttempts: 7,
        attempt: 0,
        state: MessageState.Pending,
      });
      const processed = await get(id);
      expect(processed.state).toBe(MessageState.Sent);
      expect(processed.processedAt).toBeInstanceOf(Date);
    });

    it('pending → processing: the relay claim takes the same rows as a claim, answered without their payload', async () => {
      const first = await storeNew({
        payload: { id: 'evt_r1', big: 'x'.repeat(2000) },
        aggregateId: 'agg-r',
      });
      const second = await storeNew({ headers: { 'X-Mixed': 'kept' } });
      const other = await storeNew({ source: OTHER_SOURCE });

      const rows = await inbox().claimForRelay({ sources: [SOURCE], batchSize: 1, leaseMs: LEASE_MS });
      const rest = await inbox().claimForRelay({ sources: [SOURCE], batchSize: 100, leaseMs: LEASE_MS });

      expect(rows.map((r) => r.id)).toEqual([first]);
      expect(rest.map((r) => r.id)).toEqual([second]);
      for (const row of [...rows, ...rest]) {
        expect(row).not.toHaveProperty('payload');
        expect(row.claimToken).toMatch(UUID);
        expect(row.state).toBe(MessageState.Processing);
        expect(await get(row.id)).toMatchObject({
          state: MessageState.Processing,
          claimToken: row.claimToken,
        });
      }
      expect(rows[0]).toMatchObject({ source: SOURCE, aggregateId: 'agg-r', attempt: 0 });
      expect(rest[0]?.headers).toEqual({ 'X-Mixed': 'kept' });
      expect((await get(other)).state).toBe(MessageState.Pending);
      expect(await inbox().claimForRelay({ sources: [SOURCE], batchSize: 100, leaseMs: LEASE_MS })).toEqual(
        [],
      );
    });

    it('processing → processed: a forward without a payload writes the stored inbox payload, byte for byte', async () => {
      const payloads = [
        { id: 'evt_p', nested: { list: [1, 'two', null], big: 'é'.repeat(3000) } },
        'a string',
        null,
        0,
      ];
      const ids: string[] = [];
      for (const payload of payloads) ids.push(await storeNew({ payload }));
      const rows = await inbox().claimForRelay({ sources: [SOURCE], batchSize: 100, leaseMs: LEASE_MS });
      expect(rows.map((r) => r.id)).toEqual(ids);

      const report = await inbox().forward(
        rows.map((r) => ({
          id: r.id,
          claimToken: r.claimToken as string,
          outbox: { topic: 'relay.copied', key: null, headers: { 'x-inbox-id': r.id }, maxAttempts: 3 },
        })),
      );

      expect(report.stale).toEqual([]);
      expect(report.outboxIds).toHaveLength(payloads.length);
      for (const [i, outboxId] of report.outboxIds.entries()) {
        const row = present(await current().store.outbox.get(outboxId), 'forwarded outbox row');
        expect(row).toMatchObject({
          topic: 'relay.copied',
          headers: { 'x-inbox-id': ids[i] },
          maxAttempts: 3,
        });
        expect(row.payload).toEqual(payloads[i]);
        expect((await get(ids[i] as string)).state).toBe(MessageState.Sent);
      }
    });

    it('forwardAndClaim forwards the batch in hand and claims the next one, without payloads', async () => {
      const first = await storeNew({ payload: { n: 1 } });
      const relayClaim = { sources: [SOURCE], batchSize: 100, leaseMs: LEASE_MS };
      const [held] = await inbox().claimForRelay(relayClaim);
      const second = await storeNew({ payload: { n: 2 } });
      const third = await storeNew({ payload: { n: 3 } });
      const forwardOf = (r: { id: string; claimToken: string | null }, topic: string) => ({
        id: r.id,
        claimToken: r.claimToken as string,
        outbox: { topic, maxAttempts: 2 },
      });

      const step = await inbox().forwardAndClaim(
        [
          forwardOf(held as { id: string; claimToken: string }, 'first'),
          { id: third, claimToken: foreignToken(), outbox: { topic: 'foreign', maxAttempts: 2 } },
        ],
        relayClaim,
      );

      expect(step.forwarded.settled).toEqual([{ id: first, state: MessageState.Sent }]);
      expect(step.forwarded.stale).toEqual([third]);
      expect(step.forwarded.outboxIds).toHaveLength(1);
      const outbox = present(await current().store.outbox.get(step.forwarded.outboxIds[0] as string));
      expect(outbox).toMatchObject({ topic: 'first', payload: { n: 1 } });
      expect(step.claimed.map((r) => r.id)).toEqual([second, third]);
      for (const row of step.claimed) {
        expect(row).not.toHaveProperty('payload');
        expect(row.state).toBe(MessageState.Processing);
        expect(await get(row.id)).toMatchObject({
          state: MessageState.Processing,
          claimToken: row.claimToken,
        });
      }
      expect((await get(first)).state).toBe(MessageState.Sent);

      const last = await inbox().forwardAndClaim(
        step.claimed.map((r) => forwardOf(r, 'next')),
        relayClaim,
      );
      expect(last.forwarded.settled.map((s) => s.id)).toEqual([second, third]);
      expect(last.forwarded.outboxIds).toHaveLength(2);
      expect(last.claimed).toEqual([]);
      expect(await current().countByState('inbox')).toEqual({ processed: 3 });
      const alone = await storeNew();
      const claimedAlone = await inbox().forwardAndClaim([], relayClaim);
      expect(claimedAlone.forwarded).toEqual({ settled: [], stale: [], outboxIds: [] });
      expect(claimedAlone.claimed.map((r) => r.id)).toEqual([alone]);
    });

    it('forwardAndClaim that the database refuses claims nothing and leaves the batch in hand processing', async () => {
      const id = await storeNew();
      const relayClaim = { sources: [SOURCE], batchSize: 100, leaseMs: LEASE_MS };
      const [row] = await inbox().claimForRelay(relayClaim);
      const next = await storeNew();

      const refused = inbox().forwardAndClaim(
        [{ id, claimToken: row?.claimToken as string, outbox: { topic: 't'.repeat(401), maxAttempts: 2 } }],
        relayClaim,
      );

      await expect(refused).rejects.toBeInstanceOf(QueueBoxError);
      expect(await get(id)).toMatchObject({ state: MessageState.Processing, claimToken: row?.claimToken });
      expect((await get(next)).state).toBe(MessageState.Pending);
      expect(await outboxCount()).toBe(0);
    });

    it('forward is one transaction: an outbox row the database refuses leaves the inbox row processing', async () => {
      const id = await storeNew();
      const row = await claimOne(id);
      const before = await get(id);
      const tooLongTopic = 't'.repeat(401);

      const refused = inbox().forward([
        { ...claimOf(row), outbox: anOutboxMessage({ topic: tooLongTopic }) },
      ]);

      await expect(refused).rejects.toBeInstanceOf(QueueBoxError);
      expect(await get(id)).toEqual(before);
      expect(await outboxCount()).toBe(0);
      const retried = await inbox().forward([{ ...claimOf(row), outbox: anOutboxMessage() }]);
      expect(retried.outboxIds).toHaveLength(1);
    });

    it('forward of a batch writes outbox rows for the claims it still holds only', async () => {
      const held = await storeNew();
      const foreign = await storeNew();
      const rows = new Map((await claim()).map((r) => [r.id, r]));

      const report = await inbox().forward([
        { ...claimOf(rows.get(held) as InboxRow), outbox: anOutboxMessage({ topic: 'held' }) },
        { id: foreign, claimToken: foreignToken(), outbox: anOutboxMessage({ topic: 'foreign' }) },
      ]);

      expect(report.settled).toEqual([{ id: held, state: MessageState.Sent }]);
      expect(report.stale).toEqual([foreign]);
      expect(report.outboxIds).toHaveLength(1);
      expect(present(await current().store.outbox.get(report.outboxIds[0] as string)).topic).toBe('held');
      expect(await outboxCount()).toBe(1);
      expect((await get(foreign)).state).toBe(MessageState.Processing);
    });

    it('processed and dead rows are never claimed, taken over or reclaimed again', async () => {
      const ids = [await storeNew(), await storeNew(), await storeNew()];
      const [completed, forwarded, gaveUp] = ids as [string, string, string];
      const deadOnArrival = (await inbox().storeDead(anInboxMessage(), 'rejected by transform')).id;
      const rows = new Map((await claim()).map((r) => [r.id, r]));
      const claimFor = (id: string) => claimOf(rows.get(id) as InboxRow);
      await inbox().complete([claimFor(completed)]);
      await inbox().forward([{ ...claimFor(forwarded), outbox: anOutboxMessage() }]);
      await inbox().giveUp([{ ...claimFor(gaveUp), reason: 'no' }]);
      const all = [...ids, deadOnArrival];
      const before = await Promise.all(all.map(get));

      await current().makeDue('inbox');
      await current().expireLeases('inbox');
      const reclaim = await inbox().reclaimExpired([SOURCE]);
      const claimed = await claim({ takeOverExpired: true });

      expect(reclaim).toEqual({ returned: 0, dead: 0 });
      expect(claimed).toEqual([]);
      expect(await Promise.all(all.map(get))).toEqual(before);
      expect(await current().countByState('inbox')).toEqual({ processed: 2, dead: 2 });
    });

    it('a row with an unknown state literal reads as Failed and is never claimed, taken over or settled', async () => {
      const ids = [await storeNew(), await storeNew()];
      const [wasPending, wasProcessing] = ids as [string, string];
      await current().setStateLiteral('inbox', wasPending, 'archived');
      const row = await claimOne(wasProcessing);
      await current().expireLeases('inbox', [wasProcessing]);
      await current().setStateLiteral('inbox', wasProcessing, 'archived');

      const claimed = await claim({ takeOverExpired: true });
      const reclaim = await inbox().reclaimExpired([SOURCE]);
      const complete = await inbox().complete([claimOf(row)]);

      expect(claimed).toEqual([]);
      expect(reclaim).toEqual({ returned: 0, dead: 0 });
      expect(complete).toEqual(allStale([wasProcessing]));
      for (const id of ids) expect((await get(id)).state).toBe(MessageState.Failed);
    });
  });

  describe('inbox fencing', () => {
    it.each(settleNames)(
      '%s with a foreign token changes nothing and reports the row stale',
      async (name) => {
        const id = await storeNew();
        const row = await claimOne(id);
        const before = await get(id);

        const report = await settle(name, { id, claimToken: foreignToken() });

        expect(sortedReport(report)).toEqual(allStale([id]));
        expect(await get(id)).toEqual(before);
        expect(await outboxCount()).toBe(0);
        expect((await settle(name, claimOf(row))).settled.map((s) => s.id)).toEqual([id]);
      },
    );

    it.each(settleNames)('%s with the token of a claim that was taken over is stale', async (name) => {
      const id = await storeNew();
      const lost = await claimOne(id);
      await current().expireLeases('inbox', [id]);
      const owner = await claimOne(id, { takeOverExpired: true });
      const before = await get(id);

      const report = await settle(name, claimOf(lost));

      expect(sortedReport(report)).toEqual(allStale([id]));
      expect(await get(id)).toEqual(before);
      expect(before).toMatchObject({ state: MessageState.Processing, claimToken: owner.claimToken });
      expect(await outboxCount()).toBe(0);
    });

    it.each(settleNames)(
      '%s of a row that is not processing (pending, processed, dead) is stale',
      async (name) => {
        const ids = [await storeNew(), await storeNew(), await storeNew()];
        const [pending, processed, dead] = ids as [string, string, string];
        const rows = new Map((await claim()).map((r) => [r.id, r]));
        const claimFor = (id: string) => claimOf(rows.get(id) as InboxRow);
        await inbox().retry([{ ...claimFor(pending), error: 'later', delayMs: 0 }]);
        await inbox().complete([claimFor(processed)]);
        await inbox().giveUp([{ ...claimFor(dead), reason: 'no' }]);
        const before = await Promise.all(ids.map(get));

        for (const id of ids) expect(sortedReport(await settle(name, claimFor(id)))).toEqual(allStale([id]));

        expect(await Promise.all(ids.map(get))).toEqual(before);
        expect(await outboxCount()).toBe(0);
      },
    );
  });

  describe('inbox duplicates', () => {
    it('storing (source, idempotency key) twice answers duplicate with the first id and keeps the first row', async () => {
      const key = unique('evt');
      const first = await inbox().store(anInboxMessage({ idempotencyKey: key, payload: { v: 1 } }));

      const second = await inbox().store(anInboxMessage({ idempotencyKey: key, payload: { v: 2 } }));
      const dead = await inbox().storeDead(anInboxMessage({ idempotencyKey: key }), 'rejected');

      expect(first.status).toBe('stored');
      expect(second).toEqual({ status: 'duplicate', id: first.id });
      expect(dead).toEqual({ status: 'duplicate', id: first.id });
      expect(await get(first.id)).toMatchObject({ state: MessageState.Pending, payload: { v: 1 } });
      expect(await current().countByState('inbox')).toEqual({ pending: 1 });
    });

    it('a dead row also answers a repeat as duplicate', async () => {
      const key = unique('evt');
      const dead = await inbox().storeDead(anInboxMessage({ idempotencyKey: key }), 'not JSON');

      const again = await inbox().store(anInboxMessage({ idempotencyKey: key }));

      expect(again).toEqual({ status: 'duplicate', id: dead.id });
      expect((await get(dead.id)).state).toBe(MessageState.Dead);
    });

    it('the same idempotency key in another source is a different message', async () => {
      const key = unique('evt');
      const a = await inbox().store(anInboxMessage({ idempotencyKey: key, source: SOURCE }));

      const b = await inbox().store(anInboxMessage({ idempotencyKey: key, source: OTHER_SOURCE }));

      expect(a.status).toBe('stored');
      expect(b.status).toBe('stored');
      expect(b.id).not.toBe(a.id);
    });

    it('50 concurrent stores of one (source, idempotency key) store exactly one row', async () => {
      const key = unique('evt');

      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          inbox().store(anInboxMessage({ idempotencyKey: key, payload: { i } })),
        ),
      );

      const stored = results.filter((r) => r.status === 'stored');
      expect(stored).toHaveLength(1);
      expect(results.filter((r) => r.status === 'duplicate')).toHaveLength(49);
      expect(new Set(results.map((r) => r.id))).toEqual(new Set([stored[0]?.id]));
      expect(await current().countByState('inbox')).toEqual({ pending: 1 });
    });

    it('concurrent stores of many messages, repeats among them, each get the answer they would get alone', async () => {
      // Prepare: 40 messages over two sources, each sent three times at once (once as storeDead), and 10 of
      // them stored before the burst.
      const keys = Array.from({ length: 20 }, () => unique('evt'));
      const pairs = keys.flatMap((key) => [SOURCE, OTHER_SOURCE].map((source) => ({ source, key })));
      const earlier = new Map<string, string>();
      for (const { source, key } of pairs.slice(0, 10)) {
        earlier.set(
          `${source}/${key}`,
          await storeNew({ source, idempotencyKey: key, payload: { earlier: true } }),
        );
      }
      // Act
      const calls = pairs.flatMap(({ source, key }) => [0, 1, 2].map((copy) => ({ source, key, copy })));
      const results = await Promise.all(
        calls.map(({ source, key, copy }) => {
          const message = anInboxMessage({ source, idempotencyKey: key, payload: { source, key, copy } });
          return copy === 2
            ? inbox().storeDead(message, 'refused by the source transform')
            : inbox().store(message);
        }),
      );
      // Assess: per pair, one stored answer (none for the earlier ones), all answers carrying the same id.
      for (const { source, key } of pairs) {
        const answers = results.filter((_, i) => calls[i]?.source === source && calls[i]?.key === key);
        const stored = answers.filter((a) => a.status === 'stored');
        const before = earlier.get(`${source}/${key}`);
        expect(stored).toHaveLength(before === undefined ? 1 : 0);
        const id = before ?? stored[0]?.id;
        expect(answers.map((a) => a.id)).toEqual([id, id, id]);
        const row = await get(id as string);
        expect(row).toMatchObject({ source, idempotencyKey: key });
        if (before !== undefined) expect(row.payload).toEqual({ earlier: true });
        else {
          // The stored row is the message whose call answered stored, as that call sent it.
          const winner = calls[results.indexOf(stored[0] as (typeof results)[number])];
          expect(row.payload).toEqual({ source, key, copy: winner?.copy });
          expect(row.state).toBe(winner?.copy === 2 ? MessageState.Dead : MessageState.Pending);
        }
      }
      const counts = await current().countByState('inbox');
      expect((counts.pending ?? 0) + (counts.dead ?? 0)).toBe(pairs.length);
    });

    it('a message the database refuses fails alone; messages stored at the same moment are kept', async () => {
      // Prepare: max_attempts must be positive (a CHECK constraint), so this one cannot be stored.
      const good = Array.from({ length: 12 }, () => anInboxMessage());
      const bad = anInboxMessage({ maxAttempts: 0 });
      // Act
      const results = await Promise.allSettled(
        [...good.slice(0, 6), bad, ...good.slice(6)].map((m) => inbox().store(m)),
      );
      // Assess
      expect(results[6]).toMatchObject({ status: 'rejected', reason: expect.any(QueueBoxError) });
      const kept = results.filter((r) => r.status === 'fulfilled').map((r) => r.value);
      expect(kept.map((r) => r.status)).toEqual(Array(12).fill('stored'));
      for (const [i, result] of kept.entries()) {
        expect(await get(result.id)).toMatchObject({ idempotencyKey: good[i]?.idempotencyKey });
      }
      expect(await current().countByState('inbox')).toEqual({ pending: 12 });
    });
  });
}
