import type { NewOutboxMessage, OutboxRow, RowId } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { anOutboxMessage, type CurrentHarness, claimOf } from './fixtures.ts';

/** Default size of the concurrency test; a harness may scale it down (and says so). */
export const CONCURRENCY_ROWS = 10_000;
const CLAIMERS = 4;
const KEYS = 200;
const BATCH = 50;
/** Empty claims in a row after which a claimer reports the run stuck instead of spinning until the timeout. */
const MAX_IDLE_CLAIMS = 3_000;

/** Registers the concurrency part of the store contract. */
export function concurrencyContract(current: CurrentHarness): void {
  describe('outbox concurrency', () => {
    it('parallel claimers never hold one row at once, claim each row exactly once, in key order, and all end sent', async () => {
      const { store, concurrencyRows } = current();
      const total = concurrencyRows ?? CONCURRENCY_ROWS;
      // Every other row has one of KEYS keys; the rest are unordered.
      const messages: NewOutboxMessage[] = Array.from({ length: total }, (_, i) =>
        anOutboxMessage({ key: i % 2 === 0 ? `key-${(i / 2) % KEYS}` : null, payload: { i } }),
      );
      const insertStarted = performance.now();
      const ids: RowId[] = [];
      for (let i = 0; i < messages.length; i += 1_000) {
        ids.push(...(await store.outbox.insert(messages.slice(i, i + 1_000))));
      }
      // The row that must be settled before a keyed row may be claimed.
      const previousOfKey = new Map<RowId, RowId>();
      const lastOfKey = new Map<string, RowId>();
      ids.forEach((id, i) => {
        const key = messages[i]?.key;
        if (!key) return;
        const previous = lastOfKey.get(key);
        if (previous) previousOfKey.set(id, previous);
        lastOfKey.set(key, id);
      });

      const held = new Map<RowId, number>();
      const claims = new Map<RowId, number>();
      const settling = new Set<RowId>();
      const violations: string[] = [];
      let sent = 0;
      let claimCalls = 0;
      let emptyClaims = 0;

      const claimer = async (n: number) => {
        let idle = 0;
        while (sent < total) {
          const rows: OutboxRow[] = await store.outbox.claim({ batchSize: BATCH, leaseMs: 120_000 });
          claimCalls += 1;
          if (rows.length === 0) {
            emptyClaims += 1;
            idle += 1;
            if (idle > MAX_IDLE_CLAIMS) {
              throw new Error(
                `claimer ${n}: ${idle} empty claims in a row with ${total - sent} rows not sent`,
              );
            }
            await new Promise((resolve) => setTimeout(resolve, 2));
            continue;
          }
          idle = 0;
          for (const row of rows) {
            const holder = held.get(row.id);
            if (holder !== undefined)
              violations.push(`row ${row.id} claimed by ${n} while held by ${holder}`);
            held.set(row.id, n);
            claims.set(row.id, (claims.get(row.id) ?? 0) + 1);
            const previous = previousOfKey.get(row.id);
            if (previous && !settling.has(previous)) {
              violations.push(`row ${row.id} of ${row.key} claimed before row ${previous} was settled`);
            }
          }
          for (const row of rows) settling.add(row.id);
          const report = await store.outbox.markSent(
            rows.map((r) => ({ ...claimOf(r), destination: 'bench' })),
          );
          if (report.stale.length > 0) violations.push(`claimer ${n} lost ${report.stale.join(', ')}`);
          for (const row of rows) held.delete(row.id);
          sent += report.settled.length;
        }
      };

      const insertMs = Math.round(performance.now() - insertStarted);
      const started = performance.now();
      await Promise.all(Array.from({ length: CLAIMERS }, (_, n) => claimer(n)));
      console.info(
        `[store contract] ${CLAIMERS} claimers sent ${total} rows (${total / 2} keyed over ${KEYS} keys) ` +
          `in ${Math.round(performance.now() - started)} ms with ${claimCalls} claims (${emptyClaims} empty); ` +
          `inserting them took ${insertMs} ms`,
      );

      expect(violations).toEqual([]);
      expect(claims.size).toBe(total);
      expect([...claims.values()].every((count) => count === 1)).toBe(true);
      expect(await current().countByState('outbox')).toEqual({ sent: total });
    }, 180_000);
  });
}
