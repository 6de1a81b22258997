/** The inbox state table of the store contract, row by row. */
import { type InboxRow, MessageState, QueueBoxError } from '@queuebox/core';
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
  UUID,
} from './fixtures.ts';
import { inboxContractKit, OTHER_SOURCE, SOURCE } from './inbox-contract-kit.ts';

export function inboxStateTableContract(current: CurrentHarness): void {
  const { inbox, claim, get, storeNew, claimOne, outboxCount } = inboxContractKit(current);

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

    it('processing → processed: markProcessed marks the row processed', async () => {
      const id = await storeNew();
      const row = await claimOne(id);

      const report = await inbox().markProcessed([claimOf(row)]);

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
      expect(await inbox().markProcessed([claimOf(lost)])).toEqual(allStale([id]));
      expect(await inbox().markProcessed([claimOf(taken)])).toEqual({
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

    it('processing → dead: markDead records the reason', async () => {
      const id = await storeNew();
      const row = await claimOne(id);

      const report = await inbox().markDead([{ ...claimOf(row), reason: 'topic rendered empty' }]);

      expect(report).toEqual({ settled: [{ id, state: MessageState.Dead }], stale: [] });
      expect(await get(id)).toMatchObject({ state: MessageState.Dead, lastError: 'topic rendered empty' });
    });

    it('processing → dead: markDead counts one attempt for an item attempted (a retry that gives up), default none', async () => {
      // The pull worker's retry on the last attempt goes dead this way: with max_attempts 2 and two failed tries the
      // dead row must say attempt 2, not 1.
      const gaveUpId = await storeNew({ maxAttempts: 2 });
      const refusedId = await storeNew({ maxAttempts: 2 });
      const rows = await claim();
      const gaveUp = present(
        rows.find((r) => r.id === gaveUpId),
        'claimed row',
      );
      const refused = present(
        rows.find((r) => r.id === refusedId),
        'claimed row',
      );
      const report = await inbox().markDead([
        { ...claimOf(gaveUp), reason: 'downstream still busy', attempted: true },
        { ...claimOf(refused), reason: 'unknown customer' },
      ]);

      expect(report.stale).toEqual([]);
      expect(await get(gaveUpId)).toMatchObject({
        state: MessageState.Dead,
        attempt: gaveUp.attempt + 1,
        lastError: 'downstream still busy',
      });
      expect(await get(refusedId)).toMatchObject({ state: MessageState.Dead, attempt: refused.attempt });
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
      await inbox().markProcessed([claimFor(completed)]);
      await inbox().forward([{ ...claimFor(forwarded), outbox: anOutboxMessage() }]);
      await inbox().markDead([{ ...claimFor(gaveUp), reason: 'no' }]);
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
      const processed = await inbox().markProcessed([claimOf(row)]);

      expect(claimed).toEqual([]);
      expect(reclaim).toEqual({ returned: 0, dead: 0 });
      expect(processed).toEqual(allStale([wasProcessing]));
      for (const id of ids) expect((await get(id)).state).toBe(MessageState.Failed);
    });
  });
}
