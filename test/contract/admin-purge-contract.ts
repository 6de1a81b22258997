/** The admin port of the store contract: replay, purge by age, nextDue. */
import { MessageState, QueueBoxError, type RowId } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { adminContractKit, HOUR_MS } from './admin-contract-kit.ts';
import { anOutboxMessage, byId, type CurrentHarness, claimOf, LEASE_MS, present } from './fixtures.ts';

/** Two instants read on two clocks (this process's, the database's) that may differ by a round trip. */
function expectSameInstant(actual: Date | null | undefined, expected: Date): void {
  expect(actual).toBeInstanceOf(Date);
  expect(Math.abs((actual?.getTime() ?? 0) - expected.getTime())).toBeLessThan(1_000);
}

export function adminReplayPurgeNextDueContract(current: CurrentHarness): void {
  const { admin, outbox, inbox, getOutbox, getInbox, outboxRows, inboxRows } = adminContractKit(current);

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
      // nextDue is on this process's clock, scheduled_at on the database's: the same instant within a round trip.
      expectSameInstant(due, row.scheduledAt);
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

      expectSameInstant(await admin().nextDue('inbox'), pull.scheduledAt);
      expectSameInstant(await admin().nextDue('inbox', { sources: ['push-source'] }), push.scheduledAt);
      expect(await admin().nextDue('inbox', { sources: ['other'] })).toBeNull();
      expect(await admin().nextDue('inbox', { sources: [] })).toBeNull();
    });
  });
}
