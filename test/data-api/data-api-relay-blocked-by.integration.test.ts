import { MAX_SKIPPED_AGGREGATES } from '@queuebox/core';
import { requireServices } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { useDataApiStore } from './data-api-store.ts';

const needs = await requireServices('data api relay blocked_by', ['postgres']);

describe.skipIf(needs.skipReason)(
  "relay claim on the Data API: blocked_by beside a row's large headers",
  () => {
    const fixture = useDataApiStore(needs.url.postgres, 'lp_dapi_blocked_by');
    const { pool, schema } = fixture;

    it('claims a row with 54 KB of headers while skipping 1000 held ids, and answers all 1000 in blockedBy', async () => {
      // Prepare: row ids of 11 digits (a table that has stored ten billion rows); a crashed relay holds the first row
      // of 1000 aggregate ids; then one pending row of another id with 54 KB of headers.
      const t = `"${schema.name}".inbox`;
      await pool.query(`SELECT setval(pg_get_serial_sequence('${t}', 'id'), 10000000000)`);
      const { rows: held } = await pool.query<{ id: string }>(
        `INSERT INTO ${t} (source, idempotency_key, aggregate_id, payload, max_attempts, state, claim_token, lease_until)
       SELECT 's', 'h' || g, 'h' || g, '{}', 5, 'processing', gen_random_uuid(), now() + interval '1 hour'
       FROM generate_series(1, 1000) AS g
       RETURNING id::text AS id`,
      );
      const heads = held.map((r) => r.id).sort();
      const big = 'y'.repeat(54_000);
      await pool.query(
        `INSERT INTO ${t} (source, idempotency_key, aggregate_id, payload, headers, max_attempts)
       VALUES ('s', 'x1', 'x', '{}', jsonb_build_object('big', $1::text), 5)`,
        [big],
      );

      // Act: a relay claim of one row that skips the 1000 held ids (each still held: all named again)
      const claimed = await fixture.store.inbox.claimForRelay({
        sources: ['s'],
        batchSize: 1,
        leaseMs: 60_000,
        skipAggregatesOf: heads,
      });

      // Assess
      expect(heads[0]).toHaveLength(11);
      expect(claimed.map((r) => r.aggregateId)).toEqual(['x']);
      expect(claimed[0]?.headers).toEqual({ big });
      expect([...(claimed.blockedBy ?? [])].sort()).toEqual(heads);
      expect(MAX_SKIPPED_AGGREGATES).toBe(1000);
    });
  },
);
