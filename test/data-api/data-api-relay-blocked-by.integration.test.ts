/**
 * The relay's claim answers, in its first row, the rows holding its blocked rows back (`blocked_by`): up to
 * MAX_SKIPPED_AGGREGATES (1000) row ids. Through the RDS Data API a row of the answer may hold 64 KB, and a claim of
 * a small batch answers a row's headers inline up to that less a margin, so the relay's claim keeps room for those
 * ids beside them (`BLOCKED_BY_MAX_BYTES`): a first row with 54 KB of headers and 1000 ids of 11 digits broke the
 * row limit, and the claim failed at every try. Real SDK client, local Data API endpoint, real PostgreSQL.
 */
import type { Store } from '@queuebox/core';
import { MAX_SKIPPED_AGGREGATES } from '@queuebox/core';
import { openDataApiStore } from '@queuebox/store-postgres';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalDataApi, startLocalDataApi } from './local-data-api.ts';

const needs = await requireServices('data api relay blocked_by', ['postgres']);

describe.skipIf(needs.skipReason)(
  "relay claim on the Data API: blocked_by beside a row's large headers",
  () => {
    const { pool, schema } = usePostgresSchema(needs.url.postgres, 'lp_dapi_blocked_by', 2);
    let endpoint: LocalDataApi;
    let store: Store;

    beforeAll(async () => {
      endpoint = await startLocalDataApi({ postgresUrl: needs.url.postgres, poolSize: 4 });
      store = await openDataApiStore({
        resourceArn: endpoint.resourceArn,
        secretArn: endpoint.secretArn,
        endpoint: endpoint.url,
        region: 'us-east-1',
        credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
        schema: schema.name,
      });
      await store.migrate();
    });
    afterAll(async () => {
      await store?.close();
      await endpoint?.close();
    });

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
      const claimed = await store.inbox.claimForRelay({
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
