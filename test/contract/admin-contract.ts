import {
  ADMIN_LIST_MAX_LIMIT,
  type InboxRow,
  MessageState,
  type OutboxRow,
  QueueBoxError,
  type RowId,
} from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import {
  anInboxMessage,
  anOutboxMessage,
  byId,
  type CurrentHarness,
  claimOf,
  idsOf,
  LEASE_MS,
  present,
  ROW_ID,
} from './fixtures.ts';

const HOUR_MS = 3_600_000;

/**
 * Registers the admin part of the store contract (core's `AdminStore`: stats, list, requeue, replay, purge,
 * nextDue).
 */
export function adminContract(current: CurrentHarness): void {
  const admin = () => current().store.admin;
  const outbox = () => current().store.outbox;
  const inbox = () => current().store.inbox;
  const getOutbox = async (id: RowId) => present(await outbox().get(id), `outbox row ${id}`);
  const getInbox = async (id: RowId) => present(await inbox().get(id), `inbox row ${id}`);

  /** Inserts outbox rows and settles each as `settle` says, through the port itself. */
  async function outboxRows(
    count: number,
    settle: 'pending' | 'sent' | 'dead',
    overrides: Parameters<typeof anOutboxMessage>[0] = {},
  ): Promise<RowId[]> {
    const ids = await outbox().insert(Array.from({ length: count }, () => anOutboxMessage(overrides)));
    if (settle === 'pending') return ids;
    const all = await outbox().claim({ batchSize: 1000, leaseMs: LEASE_MS });
    // Rows of earlier calls that were left pending go back untouched.
    await outbox().release(all.filter((r) => !ids.includes(r.id)).map(claimOf));
    const claimed = all.filter((r) => ids.includes(r.id));
    expect(idsOf(claimed)).toEqual([...ids].sort(byId));
    if (settle === 'sent') await outbox().markSent(claimed.map((r) => ({ ...claimOf(r), destination: 'd' })));
    else
      await outbox().markDead(claimed.map((r) => ({ ...claimOf(r), reason: 'HTTP 410', attempted: true })));
    return ids;
  }

  /** Stores inbox rows of `source` and settles them: processed through a claim, or dead as a source stores it. */
  async function inboxRows(count: number, settle: 'pending' | 'processed' | 'dead', source = 'source-a') {
    const ids: RowId[] = [];
    for (let i = 0; i < count; i++) {
      const message = anInboxMessage({ source });
      const stored =
        settle === 'dead' ? await inbox().storeDead(message, 'not JSON') : await inbox().store(message);
      ids.push(stored.id);
    }
    if (settle === 'processed') {
      // The inbox has no release: callers store processed rows of a source before its pending ones.
      const claimed = await inbox().claim({ sources: [source], batchSize: 1000, leaseMs: LEASE_MS });
      expect(idsOf(claimed)).toEqual([...ids].sort(byId));
      await inbox().markProcessed(claimed.map(claimOf));
    }
    return ids;
  }

  /** Every page of a listing, following the cursors. */
  async function allPages(table: 'outbox' | 'inbox', limit: number): Promise<RowId[][]> {
    const pages: RowId[][] = [];
    let cursor: string | undefined;
    for (let guard = 0; guard < 100; guard++) {
      const page =
        table === 'outbox'
          ? await admin().list('outbox', { limit, ...(cursor ? { cursor } : {}) })
          : await admin().list('inbox', { limit, ...(cursor ? { cursor } : {}) });
      pages.push(page.rows.map((r) => r.id));
      if (page.nextCursor === null) return pages;
      cursor = page.nextCursor;
    }
    throw new Error('the listing never ended');
  }

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

  describe('admin: replay', () => {
    it('copies a sent row into a new pending row; the sent row stays as it was', async () => {
      const [id] = (await outboxRows(1, 'sent', {
        topic: 'orders.shipped',
        key: 'order-9',
        payload: { n: 9, list: [1, 'two'] },
        headers: { 'X-Trace': 't9' },
        maxAttempts: 7,
      })) as [RowId];
      const original = await getOutbox(id);

      const result = await admin().replay(id);

      expect(result.status).toBe('replayed');
      const newId = (result as { id: RowId }).id;
      expect(byId(newId, id)).toBe(1);
      expect(await getOutbox(newId)).toMatchObject({
        topic: 'orders.shipped',
        key: 'order-9',
        payload: { n: 9, list: [1, 'two'] },
        headers: { 'X-Trace': 't9' },
        maxAttempts: 7,
        state: MessageState.Pending,
        attempt: 0,
        sentAt: null,
        destination: null,
        lastError: null,
      });
      expect(await getOutbox(id)).toEqual(original);
    });

    it('refuses rows that are not sent, and answers not_found for missing or malformed ids', async () => {
      const [pending] = (await outboxRows(1, 'pending')) as [RowId];
      const [dead] = (await outboxRows(1, 'dead')) as [RowId];

      expect(await admin().replay(pending)).toEqual({ status: 'not_sent', state: MessageState.Pending });
      expect(await admin().replay(dead)).toEqual({ status: 'not_sent', state: MessageState.Dead });
      expect(await admin().replay('999999999999')).toEqual({ status: 'not_found' });
      expect(await admin().replay('nope')).toEqual({ status: 'not_found' });
      expect(await current().countByState('outbox')).toEqual({ pending: 1, dead: 1 });
    });
  });

  describe('admin: purge', () => {
    it('deletes only rows of the state older than the age; pending rows are never purged', async () => {
      const oldSent = await outboxRows(2, 'sent');
      const newSent = await outboxRows(1, 'sent');
      const oldDead = await outboxRows(1, 'dead');
      const oldPending = await outboxRows(1, 'pending');
      await current().backdate('outbox', [...oldSent, ...oldDead, ...oldPending], 2 * HOUR_MS);

      const sent = await admin().purge({
        table: 'outbox',
        state: 'Sent',
        olderThanMs: HOUR_MS,
        batchSize: 100,
      });

      expect(sent).toBe(2);
      for (const id of oldSent) expect(await outbox().get(id)).toBeUndefined();
      expect((await getOutbox(newSent[0] as RowId)).state).toBe(MessageState.Sent);
      expect((await getOutbox(oldDead[0] as RowId)).state).toBe(MessageState.Dead);
      expect(
        await admin().purge({ table: 'outbox', state: 'Dead', olderThanMs: 3 * HOUR_MS, batchSize: 100 }),
      ).toBe(0);
      expect(
        await admin().purge({ table: 'outbox', state: 'Dead', olderThanMs: HOUR_MS, batchSize: 100 }),
      ).toBe(1);
      expect(await current().countByState('outbox')).toEqual({ sent: 1, pending: 1 });
    });

    it('deletes at most batchSize rows per call, so callers loop until a call deletes fewer', async () => {
      const ids = await outboxRows(5, 'sent');
      await current().backdate('outbox', ids, HOUR_MS);
      const purge = () => admin().purge({ table: 'outbox', state: 'Sent', olderThanMs: 1000, batchSize: 2 });

      const counts = [await purge(), await purge(), await purge(), await purge()];

      expect(counts).toEqual([2, 2, 1, 0]);
      expect(await current().countByState('outbox')).toEqual({});
    });

    it('inbox: purges processed rows as Sent and dead rows as Dead', async () => {
      const processed = await inboxRows(2, 'processed');
      const dead = await inboxRows(1, 'dead');
      const pending = await inboxRows(1, 'pending');
      await current().backdate('inbox', [...processed, ...dead, ...pending], HOUR_MS);

      const sent = await admin().purge({ table: 'inbox', state: 'Sent', olderThanMs: 1000, batchSize: 10 });
      const gone = await admin().purge({ table: 'inbox', state: 'Dead', olderThanMs: 1000, batchSize: 10 });

      expect([sent, gone]).toEqual([2, 1]);
      expect(await current().countByState('inbox')).toEqual({ pending: 1 });
    });

    it('refuses a negative or non-numeric age instead of deleting more', async () => {
      const ids = await outboxRows(1, 'sent');
      await current().backdate('outbox', ids, HOUR_MS);

      for (const olderThanMs of [-1, Number.NaN]) {
        await expect(
          admin().purge({ table: 'outbox', state: 'Sent', olderThanMs, batchSize: 10 }),
        ).rejects.toBeInstanceOf(QueueBoxError);
      }
      expect(await current().countByState('outbox')).toEqual({ sent: 1 });
    });
  });

  describe('admin: nextDue', () => {
    it('answers null when no pending row is scheduled later: empty tables, due rows, sent and dead rows', async () => {
      expect(await admin().nextDue('outbox')).toBeNull();
      expect(await admin().nextDue('inbox')).toBeNull();
      await outboxRows(1, 'pending');
      await outboxRows(1, 'sent');
      await outboxRows(1, 'dead');
      await inboxRows(1, 'pending');

      expect(await admin().nextDue('outbox')).toBeNull();
      expect(await admin().nextDue('inbox')).toBeNull();
    });

    it('outbox: the earliest scheduled_at of the rows scheduled later, by the database clock', async () => {
      await outboxRows(1, 'pending');
      const [later] = await outbox().insert([anOutboxMessage({ delayMs: 2 * HOUR_MS })]);
      const [sooner] = await outbox().insert([anOutboxMessage({ delayMs: 3 * 60_000 })]);

      const due = await admin().nextDue('outbox');

      const row = await getOutbox(sooner as RowId);
      expect(due).toBeInstanceOf(Date);
      expect(due?.getTime()).toBe(row.scheduledAt.getTime());
      expect(due?.getTime()).toBeLessThan((await getOutbox(later as RowId)).scheduledAt.getTime());
    });

    it('inbox: a retried row scheduled later, only among the given sources', async () => {
      await inboxRows(1, 'pending', 'push-source');
      await inboxRows(1, 'pending', 'pull-source');
      const claimed = await inbox().claim({
        sources: ['push-source', 'pull-source'],
        batchSize: 10,
        leaseMs: LEASE_MS,
      });
      const bySource = (source: string) =>
        present(
          claimed.find((r) => r.source === source),
          source,
        );
      await inbox().retry([
        { ...claimOf(bySource('push-source')), error: 'HTTP 503', delayMs: HOUR_MS },
        { ...claimOf(bySource('pull-source')), error: 'busy', delayMs: 60_000 },
      ]);
      const push = await getInbox(bySource('push-source').id);
      const pull = await getInbox(bySource('pull-source').id);

      expect((await admin().nextDue('inbox'))?.getTime()).toBe(pull.scheduledAt.getTime());
      expect((await admin().nextDue('inbox', { sources: ['push-source'] }))?.getTime()).toBe(
        push.scheduledAt.getTime(),
      );
      expect(await admin().nextDue('inbox', { sources: ['other'] })).toBeNull();
      expect(await admin().nextDue('inbox', { sources: [] })).toBeNull();
    });
  });
}
