/**
 * What the admin part of the store contract (admin-list-contract.ts, admin-purge-contract.ts) shares: helpers over the current harness.
 */
import type { RowId } from '@queuebox/core';
import { expect } from 'vitest';
import {
  anInboxMessage,
  anOutboxMessage,
  byId,
  type CurrentHarness,
  claimOf,
  idsOf,
  LEASE_MS,
  present,
} from './fixtures.ts';

export const HOUR_MS = 3_600_000;

/** The helpers of the admin part of the store contract, over the current harness. */
export function adminContractKit(current: CurrentHarness) {
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
      await inbox().complete(claimed.map(claimOf));
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

  return { admin, outbox, inbox, getOutbox, getInbox, outboxRows, inboxRows, allPages };
}
