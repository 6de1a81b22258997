import { randomUUID } from 'node:crypto';
import type {
  InboxRow,
  NewInboxMessage,
  NewOutboxMessage,
  OutboxRow,
  RowClaim,
  RowId,
  SettleReport,
} from '@queuebox/core';
import { expect } from 'vitest';
import type { StoreHarness } from './store-harness.ts';

/** Lease of every claim in the suite: long enough that no lease expires unless a test expires it. */
export const LEASE_MS = 60_000;

/** Slack for comparing two database timestamps (SQL Server keeps milliseconds, rounded). */
export const CLOCK_SLACK_MS = 10;

/** Claim tokens are UUIDs; SQL Server spells them in capitals. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Row ids: positive 64-bit integers as decimal strings. */
export const ROW_ID = /^[1-9][0-9]*$/;

/** The harness of the running test; the suite swaps it for a fresh one after a failure. */
export type CurrentHarness = () => StoreHarness;

let sequence = 0;

/** A unique suffix for keys, sources and idempotency keys, so tests never collide by accident. */
export function unique(prefix: string): string {
  sequence += 1;
  return `${prefix}-${sequence}-${randomUUID().slice(0, 8)}`;
}

/** An outbox message with sensible defaults: unordered, five attempts, due now. */
export function anOutboxMessage(overrides: Partial<NewOutboxMessage> = {}): NewOutboxMessage {
  return { topic: 'orders.created', payload: { orderId: unique('o') }, maxAttempts: 5, ...overrides };
}

/** An inbox message of source `source-a` with a fresh idempotency key and five attempts. */
export function anInboxMessage(overrides: Partial<NewInboxMessage> = {}): NewInboxMessage {
  return {
    source: 'source-a',
    idempotencyKey: unique('evt'),
    payload: { id: unique('evt') },
    maxAttempts: 5,
    ...overrides,
  };
}

/** A token no claim ever handed out. */
export function foreignToken(): string {
  return randomUUID();
}

/** The claim of a claimed row. */
export function claimOf(row: OutboxRow | InboxRow): RowClaim {
  if (row.claimToken === null) throw new Error(`row ${row.id} carries no claim token`);
  return { id: row.id, claimToken: row.claimToken };
}

/** Ids of rows, as a set-like sorted list for comparisons. */
export function idsOf(rows: readonly { id: RowId }[]): RowId[] {
  return rows.map((r) => r.id).sort(byId);
}

/** Numeric order of decimal row ids. */
export function byId(a: RowId, b: RowId): number {
  const x = BigInt(a);
  const y = BigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** The report of a settle that found none of `ids` under a matching claim. */
export function allStale(ids: readonly RowId[]): SettleReport {
  return { settled: [], stale: [...ids] };
}

/** Fails unless `row` exists; returns it typed. */
export function present<T>(row: T | undefined, what = 'row'): T {
  expect(row, `${what} should exist`).toBeDefined();
  return row as T;
}

/** Sorts a settle report so two reports compare regardless of order. */
export function sortedReport<S extends string>(report: SettleReport<S>): SettleReport<S> {
  return {
    settled: [...report.settled].sort((a, b) => byId(a.id, b.id)),
    stale: [...report.stale].sort(byId),
  };
}

/** Milliseconds between two database timestamps. */
export function msBetween(from: Date, to: Date): number {
  return to.getTime() - from.getTime();
}

/** The database time of a claim, read back from its lease (lease_until = claim time + leaseMs). */
export function claimedAt(row: OutboxRow | InboxRow, leaseMs = LEASE_MS): Date {
  if (row.leaseUntil === null) throw new Error(`row ${row.id} has no lease`);
  return new Date(row.leaseUntil.getTime() - leaseMs);
}
