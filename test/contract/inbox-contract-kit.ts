/**
 * What the inbox part of the store contract (inbox-state-contract.ts, inbox-fencing-contract.ts) shares: helpers over the current harness.
 */
import type { InboxClaimOptions, InboxRow, RowClaim, SettleReport } from '@queuebox/core';
import { expect } from 'vitest';
import { anInboxMessage, anOutboxMessage, type CurrentHarness, LEASE_MS, present } from './fixtures.ts';

export const SOURCE = 'source-a';
export const OTHER_SOURCE = 'source-b';

/** The helpers of the inbox part of the store contract, over the current harness. */
export function inboxContractKit(current: CurrentHarness) {
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

  return { inbox, claim, get, storeNew, claimOne, outboxCount, settles, settleNames, settle };
}
