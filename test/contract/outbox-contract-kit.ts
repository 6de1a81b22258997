/**
 * What the outbox part of the store contract (outbox-state-contract.ts, outbox-fencing-contract.ts) shares: helpers over the current harness.
 */
import type { ClaimOptions, OutboxRow, RowClaim, SettleReport } from '@queuebox/core';
import { expect } from 'vitest';
import { type CurrentHarness, LEASE_MS, present } from './fixtures.ts';

/** The helpers of the outbox part of the store contract, over the current harness. */
export function outboxContractKit(current: CurrentHarness) {
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

  return { outbox, claim, get, claimOne, settles, settleNames, settle };
}
