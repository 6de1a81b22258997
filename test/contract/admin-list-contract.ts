/** The admin port of the store contract: stats, filtered lists with keyset paging, requeue. */
import {
  ADMIN_LIST_MAX_LIMIT,
  type InboxRow,
  MessageState,
  type OutboxRow,
  QueueBoxError,
  type RowId,
} from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { adminContractKit, HOUR_MS } from './admin-contract-kit.ts';
import {
  anOutboxMessage,
  byId,
  type CurrentHarness,
  claimOf,
  idsOf,
  LEASE_MS,
  present,
  ROW_ID,
} from './fixtures.ts';

export function adminStatsListRequeueContract(current: CurrentHarness): void {
  const { admin, outbox, inbox, getOutbox, getInbox, outboxRows, inboxRows, allPages } =
    adminContractKit(current);

  describe('admin: stats', () => {
    it('answers zeros and no oldest pending row for empty tables', async () => {
      const stats = await admin().stats();

      const zero = { Pending: 0, Processing: 0, Sent: 0, Dead: 0, Failed: 0 };
      expect(stats).toEqual({
        outbox: { counts: zero, oldestPendingAgeMs: null, deadByTopic: {} },
        inbox: { counts: zero, oldestPendingAgeMs: null, deadBySource: {} },
      });
    });

    it('counts every state, an unknown literal as Failed, and dead rows per topic and per source', async () => {
      await outboxRows(2, 'pending');
      await outboxRows(1, 'sent');
      await outboxRows(3, 'dead', { topic: 'orders.created' });
      await outboxRows(1, 'dead', { topic: 'orders.paid' });
      const [claimed] = await outboxRows(1, 'pending');
      await outbox().claim({ batchSize: 1000, leaseMs: LEASE_MS });
      const [archived] = await outboxRows(1, 'sent');
      await current().setStateLiteral('outbox', archived as RowId, 'archived');
      await inboxRows(1, 'processed', 'stripe');
      await inboxRows(2, 'pending', 'stripe');
      await inboxRows(2, 'dead', 'github');
      const [odd] = await inboxRows(1, 'pending', 'github');
      await current().setStateLiteral('inbox', odd as RowId, 'quarantined');

      const stats = await admin().stats();

      expect(claimed).toMatch(ROW_ID);
      expect(stats.outbox.counts).toEqual({ Pending: 0, Processing: 3, Sent: 1, Dead: 4, Failed: 1 });
      expect(stats.outbox.deadByTopic).toEqual({ 'orders.created': 3, 'orders.paid': 1 });
      expect(Object.keys(stats.outbox.deadByTopic)).toEqual(['orders.created', 'orders.paid']);
      expect(stats.inbox.counts).toEqual({ Pending: 2, Processing: 0, Sent: 1, Dead: 2, Failed: 1 });
      expect(stats.inbox.deadBySource).toEqual({ github: 2 });
    });

    it('gauges: the unfinished states counted exactly as stats counts them, the finished rows an estimate', async () => {
      await outboxRows(2, 'pending');
      await outboxRows(3, 'sent');
      await outboxRows(2, 'dead');
      await outboxRows(1, 'pending');
      await outbox().claim({ batchSize: 1, leaseMs: LEASE_MS });
      const [archived] = await outboxRows(1, 'sent');
      await current().setStateLiteral('outbox', archived as RowId, 'archived');
      await inboxRows(2, 'processed', 'stripe');
      await inboxRows(1, 'pending', 'stripe');
      await inboxRows(1, 'dead', 'github');

      const stats = await admin().stats();
      const gauges = await admin().gauges();

      for (const table of ['outbox', 'inbox'] as const) {
        const { Sent: _finished, ...unfinished } = stats[table].counts;
        expect(gauges[table].counts).toEqual(unfinished);
        expect(gauges[table].oldestPendingAgeMs === null).toBe(stats[table].oldestPendingAgeMs === null);
        // From the table's statistics: none yet on a fresh table (null), or a count that is never negative.
        const estimate = gauges[table].finishedEstimate;
        if (estimate !== null) expect(estimate).toBeGreaterThanOrEqual(0);
      }
      expect(gauges.outbox.counts).toEqual({ Pending: 2, Processing: 1, Dead: 2, Failed: 1 });
    });

    it('measures the oldest pending age from when the row became due, by the database clock', async () => {
      const [old, fresh] = await outboxRows(2, 'pending');
      await outbox().insert([anOutboxMessage({ delayMs: 10 * HOUR_MS })]);
      await current().backdate('outbox', [old as RowId], HOUR_MS);
      await current().backdate('outbox', [fresh as RowId], 60_000);
      const [waiting] = await inboxRows(1, 'pending');
      await current().backdate('inbox', [waiting as RowId], 2 * HOUR_MS);

      const stats = await admin().stats();

      expect(stats.outbox.oldestPendingAgeMs).toBeGreaterThanOrEqual(HOUR_MS);
      expect(stats.outbox.oldestPendingAgeMs).toBeLessThan(HOUR_MS + 60_000);
      expect(stats.inbox.oldestPendingAgeMs).toBeGreaterThanOrEqual(2 * HOUR_MS);
      expect(stats.inbox.oldestPendingAgeMs).toBeLessThan(2 * HOUR_MS + 60_000);
    });

    it('leaves rows scheduled for later out of the oldest pending age', async () => {
      await outbox().insert([anOutboxMessage({ delayMs: HOUR_MS })]);

      const stats = await admin().stats();

      expect(stats.outbox.counts.Pending).toBe(1);
      expect(stats.outbox.oldestPendingAgeMs).toBeNull();
    });

    it('answers the oldest pending age of one table alone (oldestPendingAgeMs), as stats measures it', async () => {
      expect(await admin().oldestPendingAgeMs('outbox')).toBeNull();
      expect(await admin().oldestPendingAgeMs('inbox')).toBeNull();
      const [old] = await outboxRows(2, 'pending');
      await outboxRows(1, 'dead');
      await outbox().insert([anOutboxMessage({ delayMs: 10 * HOUR_MS })]);
      await current().backdate('outbox', [old as RowId], HOUR_MS);
      const [waiting] = await inboxRows(1, 'pending');
      await current().backdate('inbox', [waiting as RowId], 2 * HOUR_MS);

      const outboxAge = await admin().oldestPendingAgeMs('outbox');
      const inboxAge = await admin().oldestPendingAgeMs('inbox');
      const stats = await admin().stats();

      expect(outboxAge).toBeGreaterThanOrEqual(HOUR_MS);
      expect(outboxAge).toBeLessThan(HOUR_MS + 60_000);
      expect(inboxAge).toBeGreaterThanOrEqual(2 * HOUR_MS);
      expect(inboxAge).toBeLessThan(2 * HOUR_MS + 60_000);
      expect(Math.abs((stats.outbox.oldestPendingAgeMs ?? 0) - (outboxAge ?? 0))).toBeLessThan(60_000);
    });

    it('counts and ages keyed and unkeyed pending rows alike, and answers the dead rows of one table (deadRows)', async () => {
      // The statements read keyed and unkeyed pending rows from different indexes: each kind must count.
      const [keyedOld, keyedNext] = await outbox().insert([
        anOutboxMessage({ key: 'k' }),
        anOutboxMessage({ key: 'k' }),
      ]);
      const [unkeyed] = await outbox().insert([anOutboxMessage()]);
      await outbox().insert([anOutboxMessage({ key: 'later', delayMs: 10 * HOUR_MS })]);
      await current().backdate('outbox', [keyedOld as RowId, keyedNext as RowId], 3 * HOUR_MS);
      await current().backdate('outbox', [unkeyed as RowId], HOUR_MS);
      await outboxRows(2, 'dead');
      await inboxRows(3, 'dead', 'github');

      const stats = await admin().stats();
      const age = await admin().oldestPendingAgeMs('outbox');
      const dead = { outbox: await admin().deadRows('outbox'), inbox: await admin().deadRows('inbox') };

      expect(stats.outbox.counts).toMatchObject({ Pending: 4, Processing: 0, Dead: 2 });
      expect(age).toBeGreaterThanOrEqual(3 * HOUR_MS);
      expect(age).toBeLessThan(3 * HOUR_MS + 60_000);
      expect(dead).toEqual({ outbox: 2, inbox: 3 });
      expect(dead.outbox).toBe(stats.outbox.counts.Dead);
    });
  });

  describe('admin: list', () => {
    it('filters outbox rows by state and topic, in ascending id order', async () => {
      const paid = await outboxRows(2, 'dead', { topic: 'orders.paid' });
      await outboxRows(1, 'dead', { topic: 'orders.created' });
      await outboxRows(2, 'pending', { topic: 'orders.paid' });

      const dead = await admin().list('outbox', { state: MessageState.Dead, limit: 50 });
      const deadPaid = await admin().list('outbox', {
        state: MessageState.Dead,
        topic: 'orders.paid',
        limit: 50,
      });
      const paidAny = await admin().list('outbox', { topic: 'orders.paid', limit: 50 });

      expect(dead.rows).toHaveLength(3);
      expect(deadPaid.rows.map((r) => r.id)).toEqual([...paid].sort(byId));
      expect(deadPaid.rows[0]).toMatchObject({ topic: 'orders.paid', state: MessageState.Dead });
      expect(deadPaid.nextCursor).toBeNull();
      expect(paidAny.rows).toHaveLength(4);
      const ids = paidAny.rows.map((r) => r.id);
      expect(ids).toEqual([...ids].sort(byId));
    });

    it('filters inbox rows by state and source; Failed lists rows of unknown literals', async () => {
      const dead = await inboxRows(2, 'dead', 'github');
      await inboxRows(1, 'pending', 'github');
      const [odd] = await inboxRows(1, 'pending', 'stripe');
      await current().setStateLiteral('inbox', odd as RowId, 'quarantined');

      const deadGithub = await admin().list('inbox', {
        state: MessageState.Dead,
        source: 'github',
        limit: 10,
      });
      const failed = await admin().list('inbox', { state: MessageState.Failed, limit: 10 });
      const stripe = await admin().list('inbox', { source: 'stripe', limit: 10 });

      expect(deadGithub.rows.map((r: InboxRow) => r.id)).toEqual([...dead].sort(byId));
      expect(deadGithub.rows[0]).toMatchObject({
        source: 'github',
        state: MessageState.Dead,
        lastError: 'not JSON',
      });
      expect(failed.rows.map((r) => [r.id, r.state])).toEqual([[odd, MessageState.Failed]]);
      expect(stripe.rows.map((r) => r.id)).toEqual([odd]);
    });

    it('pages with cursors: every row exactly once, the last page without a cursor', async () => {
      const ids = await outboxRows(7, 'pending');

      const pages = await allPages('outbox', 3);

      expect(pages.map((p) => p.length)).toEqual([3, 3, 1]);
      expect(pages.flat()).toEqual([...ids].sort(byId));
    });

    it('keeps pages stable while rows are inserted, settled and deleted between pages', async () => {
      const ids = [...(await outboxRows(6, 'pending'))].sort(byId);
      const first = await admin().list('outbox', { limit: 2 });
      // Between pages: a row of the first page goes dead, a later row is sent and purged, new rows arrive.
      const claimed = await outbox().claim({ batchSize: 1000, leaseMs: LEASE_MS });
      const byRow = new Map(claimed.map((r) => [r.id, r]));
      const gone = ids[3] as RowId;
      await outbox().markDead([{ ...claimOf(present(byRow.get(ids[0] as RowId))), reason: 'x' }]);
      await outbox().markSent([{ ...claimOf(present(byRow.get(gone))), destination: 'd' }]);
      await current().backdate('outbox', [gone], HOUR_MS);
      expect(await admin().purge({ table: 'outbox', state: 'Sent', olderThanMs: 1000, batchSize: 10 })).toBe(
        1,
      );
      const added = await outbox().insert([anOutboxMessage(), anOutboxMessage()]);

      const rest: RowId[] = [];
      let cursor = first.nextCursor;
      while (cursor !== null) {
        const page = await admin().list('outbox', { limit: 2, cursor });
        rest.push(...page.rows.map((r) => r.id));
        cursor = page.nextCursor;
      }

      expect(first.rows.map((r) => r.id)).toEqual(ids.slice(0, 2));
      expect(rest).toEqual([...ids.slice(2).filter((id) => id !== gone), ...[...added].sort(byId)]);
    });

    it('clamps the limit to 1…ADMIN_LIST_MAX_LIMIT and refuses a cursor it never handed out', async () => {
      await outboxRows(2, 'pending');

      const tiny = await admin().list('outbox', { limit: 0 });
      const huge = await admin().list('outbox', { limit: ADMIN_LIST_MAX_LIMIT * 10 });

      expect(tiny.rows).toHaveLength(1);
      expect(tiny.nextCursor).not.toBeNull();
      expect(huge.rows).toHaveLength(2);
      await expect(admin().list('outbox', { limit: 5, cursor: 'abc' })).rejects.toBeInstanceOf(QueueBoxError);
    });
  });

  describe('admin: requeue', () => {
    it('dead → pending by id: attempt 0, due now, no claim, the last error kept; the row is claimable', async () => {
      const [id] = (await outboxRows(1, 'dead', { maxAttempts: 3 })) as [RowId];
      const before = await getOutbox(id);

      const result = await admin().requeue('outbox', { ids: [id] });

      expect(before).toMatchObject({ state: MessageState.Dead, attempt: 1, lastError: 'HTTP 410' });
      expect(result).toEqual({ dryRun: false, count: 1, ids: [id], more: false });
      expect(await getOutbox(id)).toMatchObject({
        state: MessageState.Pending,
        attempt: 0,
        maxAttempts: 3,
        claimToken: null,
        leaseUntil: null,
        lastError: 'HTTP 410',
      });
      const claimed = await outbox().claim({ batchSize: 10, leaseMs: LEASE_MS });
      expect(claimed.map((r: OutboxRow) => [r.id, r.attempt])).toEqual([[id, 0]]);
    });

    it('ignores ids of rows that are not dead, unknown and malformed ids, and unknown literals', async () => {
      const [dead] = (await outboxRows(1, 'dead')) as [RowId];
      const [pending] = (await outboxRows(1, 'pending')) as [RowId];
      const [sent] = (await outboxRows(1, 'sent')) as [RowId];
      const [odd] = (await outboxRows(1, 'dead')) as [RowId];
      await current().setStateLiteral('outbox', odd, 'archived');
      const pendingBefore = await getOutbox(pending);

      const result = await admin().requeue('outbox', {
        ids: [pending, sent, odd, '999999999999', 'x', dead],
      });

      expect(result).toEqual({ dryRun: false, count: 1, ids: [dead], more: false });
      expect(await getOutbox(pending)).toEqual(pendingBefore);
      expect((await getOutbox(sent)).state).toBe(MessageState.Sent);
      expect((await getOutbox(odd)).state).toBe(MessageState.Failed);
      expect(await admin().requeue('outbox', { ids: [pending] })).toEqual({
        dryRun: false,
        count: 0,
        ids: [],
        more: false,
      });
    });

    it('dry run: changes nothing and answers every matching row, the first batch of ids', async () => {
      const created = [...(await outboxRows(5, 'dead', { topic: 'orders.created' }))].sort(byId);
      await outboxRows(2, 'dead', { topic: 'orders.paid' });
      const before = await current().countByState('outbox');

      const preview = await admin().requeue(
        'outbox',
        { topic: 'orders.created' },
        { dryRun: true, batchSize: 2 },
      );
      const none = await admin().requeue('outbox', { topic: 'nothing.here' }, { dryRun: true });

      expect(preview).toEqual({ dryRun: true, count: 5, ids: created.slice(0, 2), more: true });
      expect(none).toEqual({ dryRun: true, count: 0, ids: [], more: false });
      expect(await current().countByState('outbox')).toEqual(before);
    });

    it('dry run and bulk by topic pass over the sent rows of that topic', async () => {
      const sent = await outboxRows(3, 'sent', { topic: 'orders.shipped' });
      const dead = [...(await outboxRows(2, 'dead', { topic: 'orders.shipped' }))].sort(byId);

      const preview = await admin().requeue(
        'outbox',
        { topic: 'orders.shipped' },
        { dryRun: true, batchSize: 2 },
      );
      const done = await admin().requeue('outbox', { topic: 'orders.shipped' }, { batchSize: 2 });

      expect(preview).toEqual({ dryRun: true, count: 2, ids: dead, more: false });
      expect(done).toMatchObject({ count: 2, ids: dead });
      for (const id of sent) expect((await getOutbox(id)).state).toBe(MessageState.Sent);
    });

    it('bulk by topic in bounded batches until done, leaving other topics dead', async () => {
      const created = [...(await outboxRows(5, 'dead', { topic: 'orders.created' }))].sort(byId);
      const paid = await outboxRows(2, 'dead', { topic: 'orders.paid' });

      const batches = [];
      for (let more = true; more; ) {
        const batch = await admin().requeue('outbox', { topic: 'orders.created' }, { batchSize: 2 });
        batches.push(batch.ids);
        more = batch.more;
        expect(batches.length).toBeLessThan(10);
      }

      expect(batches).toEqual([created.slice(0, 2), created.slice(2, 4), created.slice(4)]);
      for (const id of created) expect((await getOutbox(id)).state).toBe(MessageState.Pending);
      for (const id of paid) expect((await getOutbox(id)).state).toBe(MessageState.Dead);
    });

    it('a requeued keyed row is its key head again and goes before the later rows of its key', async () => {
      const [head] = (await outboxRows(1, 'dead', { key: 'order-7' })) as [RowId];
      const [next] = (await outbox().insert([anOutboxMessage({ key: 'order-7' })])) as [RowId];

      await admin().requeue('outbox', { ids: [head] });
      const first = await outbox().claim({ batchSize: 10, leaseMs: LEASE_MS });

      expect(first.map((r) => r.id)).toEqual([head]);
      await outbox().markSent([{ ...claimOf(first[0] as OutboxRow), destination: 'd' }]);
      expect((await outbox().claim({ batchSize: 10, leaseMs: LEASE_MS })).map((r) => r.id)).toEqual([next]);
    });

    it('inbox: dead → pending by source (a row stored dead included) and claimable again', async () => {
      const github = await inboxRows(2, 'dead', 'github');
      const stripe = await inboxRows(1, 'dead', 'stripe');

      const result = await admin().requeue('inbox', { source: 'github' });

      expect(result).toEqual({ dryRun: false, count: 2, ids: [...github].sort(byId), more: false });
      expect(await getInbox(github[0] as RowId)).toMatchObject({
        state: MessageState.Pending,
        attempt: 0,
        lastError: 'not JSON',
      });
      expect((await getInbox(stripe[0] as RowId)).state).toBe(MessageState.Dead);
      const claimed = await inbox().claim({ sources: ['github'], batchSize: 10, leaseMs: LEASE_MS });
      expect(idsOf(claimed)).toEqual([...github].sort(byId));
    });
  });
}
