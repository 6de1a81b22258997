/**
 * Text keys compare exactly on every store: letter case, trailing spaces and characters outside the Basic
 * Multilingual Plane (two UTF-16 units each) all count, as PostgreSQL compares them. SQL Server's default
 * collations are case-insensitive and T-SQL pads with spaces before comparing, which migration 0003 and the
 * statements' length checks undo; these cases hold every store to the PostgreSQL answers. Also: a claimed row
 * the store cannot read goes dead alone, and the rest of its batch is answered.
 */
import type { OutboxRow } from '@queuebox/core';
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
  unique,
} from './fixtures.ts';

/** `text` with its first letter in upper case. */
function capitalised(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** Registers the exact-text and unreadable-row part of the store contract. */
export function textContract(current: CurrentHarness): void {
  const store = () => current().store;
  const h = () => current();

  describe('text keys compare exactly (case, trailing spaces, astral characters)', () => {
    it('stores idempotency keys that differ only by letter case or trailing spaces as different messages', async () => {
      const base = unique('ab');
      const keys = [base, capitalised(base), `${base} `, `${base}  `];

      const first = await Promise.all(
        keys.map((idempotencyKey) => store().inbox.store(anInboxMessage({ idempotencyKey }))),
      );
      const again = await Promise.all(
        keys.map((idempotencyKey) => store().inbox.store(anInboxMessage({ idempotencyKey }))),
      );

      expect(first.map((r) => r.status)).toEqual(['stored', 'stored', 'stored', 'stored']);
      expect(new Set(first.map((r) => r.id)).size).toBe(keys.length);
      expect(again).toEqual(first.map((r) => ({ status: 'duplicate', id: r.id })));
      for (const [i, stored] of first.entries()) {
        expect(present(await store().inbox.get(stored.id)).idempotencyKey).toBe(keys[i]);
      }
    });

    it('keeps sources that differ only by letter case or trailing spaces apart, in store and claim', async () => {
      const source = unique('src');
      const sources = [source, capitalised(source), `${source} `];
      const idempotencyKey = unique('evt');
      const stored = [];
      for (const s of sources)
        stored.push(await store().inbox.store(anInboxMessage({ source: s, idempotencyKey })));

      const claimed = await store().inbox.claim({ sources: [source], batchSize: 10, leaseMs: LEASE_MS });
      const padded = await store().inbox.claim({ sources: [`${source} `], batchSize: 10, leaseMs: LEASE_MS });

      expect(stored.map((r) => r.status)).toEqual(['stored', 'stored', 'stored']);
      expect(claimed.map((r) => [r.id, r.source])).toEqual([[stored[0]?.id, source]]);
      expect(padded.map((r) => [r.id, r.source])).toEqual([[stored[2]?.id, `${source} `]]);
    });

    it('orders outbox keys that differ only by letter case or trailing spaces as separate keys', async () => {
      const key = unique('K');
      const keys = [key, key.toLowerCase(), `${key} `];
      const heads: string[] = [];
      for (const k of keys) {
        const [head] = (await store().outbox.insert([
          anOutboxMessage({ key: k }),
          anOutboxMessage({ key: k }),
        ])) as [string, string];
        heads.push(head);
      }

      const claimed = await store().outbox.claim({ batchSize: 10, leaseMs: LEASE_MS });

      // One head per key: with a shared chain only the first key's head would be claimable.
      expect(idsOf(claimed)).toEqual([...heads].sort(byId));
      expect(claimed.map((r) => r.key).sort()).toEqual([...keys].sort());
    });

    it('filters and groups dead outbox rows by the exact topic', async () => {
      const topic = unique('orders.created');
      const topics = [topic, capitalised(topic), `${topic} `];
      await store().outbox.insert(topics.map((t) => anOutboxMessage({ topic: t })));
      const claimed = await store().outbox.claim({ batchSize: 10, leaseMs: LEASE_MS });
      await store().outbox.markDead(claimed.map((r) => ({ ...claimOf(r), reason: 'no route' })));
      const exact = claimed.find((r) => r.topic === topic) as OutboxRow;

      const listed = await store().admin.list('outbox', { topic, limit: 10 });
      const dryRun = await store().admin.requeue('outbox', { topic }, { dryRun: true });
      const stats = await store().admin.stats();

      expect(listed.rows.map((r) => r.id)).toEqual([exact.id]);
      expect([dryRun.count, dryRun.ids]).toEqual([1, [exact.id]]);
      for (const t of topics) expect(stats.outbox.deadByTopic[t]).toBe(1);
    });

    it('keeps astral characters (two UTF-16 units each) exact and within the declared widths', async () => {
      // 225 × '🎉' is 450 UTF-16 units (SQL Server's NVARCHAR(450)) and 225 characters on PostgreSQL.
      const key = '🎉'.repeat(225);
      const topic = `t${'🔑'.repeat(199)}`;
      const source = `s${'🌍'.repeat(99)}`;
      const idempotencyKey = '😀'.repeat(300);
      const [first] = (await store().outbox.insert([anOutboxMessage({ topic, key })])) as [string];
      const [other] = (await store().outbox.insert([anOutboxMessage({ key: `${'🎉'.repeat(224)}🎊` })])) as [
        string,
      ];
      const stored = await store().inbox.store(anInboxMessage({ source, idempotencyKey }));
      const sibling = await store().inbox.store(
        anInboxMessage({ source, idempotencyKey: `${'😀'.repeat(299)}😁` }),
      );

      const claimed = await store().outbox.claim({ batchSize: 10, leaseMs: LEASE_MS });

      expect(present(await store().outbox.get(first))).toMatchObject({ topic, key });
      expect(idsOf(claimed)).toEqual(idsOf([{ id: first }, { id: other }]));
      expect(present(await store().inbox.get(stored.id))).toMatchObject({ source, idempotencyKey });
      expect([stored.status, sibling.status]).toEqual(['stored', 'stored']);
      expect(await store().inbox.store(anInboxMessage({ source, idempotencyKey }))).toEqual({
        status: 'duplicate',
        id: stored.id,
      });
    });
  });

  describe('a claimed row the store cannot read', () => {
    it('goes dead alone in the outbox; the rest of the batch is claimed', async () => {
      const ids = (await store().outbox.insert([
        anOutboxMessage(),
        anOutboxMessage(),
        anOutboxMessage(),
      ])) as [string, string, string];
      await h().makeUnreadable('outbox', ids[1]);

      const claimed = await store().outbox.claim({ batchSize: 10, leaseMs: LEASE_MS });
      const again = await store().outbox.claim({ batchSize: 10, leaseMs: LEASE_MS });

      expect(idsOf(claimed)).toEqual([ids[0], ids[2]]);
      expect(again).toEqual([]);
      expect(await h().countByState('outbox')).toEqual({ processing: 2, dead: 1 });
    });

    it('goes dead alone in the inbox; the rest of the batch is claimed', async () => {
      const rows = [];
      for (let i = 0; i < 3; i++) rows.push(await store().inbox.store(anInboxMessage()));
      await h().makeUnreadable('inbox', rows[1]?.id as string);

      const claimed = await store().inbox.claim({ sources: ['source-a'], batchSize: 10, leaseMs: LEASE_MS });
      const again = await store().inbox.claim({ sources: ['source-a'], batchSize: 10, leaseMs: LEASE_MS });

      expect(idsOf(claimed)).toEqual(idsOf([rows[0], rows[2]] as { id: string }[]));
      expect(again).toEqual([]);
      expect(await h().countByState('inbox')).toEqual({ processing: 2, dead: 1 });
    });
  });
}
