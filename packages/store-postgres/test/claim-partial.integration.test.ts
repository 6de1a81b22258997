/**
 * A claim runs up to four statements under one token (the light claim of unkeyed rows, then the keyed claim, again
 * while heads were lost to other claimers). Before, when a later statement failed (a statement or lock timeout,
 * a serialization failure), the rows an earlier one had claimed, committed, were lost with the error: processing
 * until their lease expired, their keys held, an attempt counted. The claim now answers them.
 *
 * The contention is real (another session holds a head's row lock, so the keyed claim skips it and runs again);
 * the failure of the second keyed statement is injected over the real executor.
 */
import { StoreError } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName, requireServices } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPgExecutor, runMigrations, type SqlExecutor } from '../src/index.ts';
import { createOutboxClaim } from '../src/outbox-claim.ts';

const needs = await requireServices('store-postgres: a claim that fails part way', ['postgres']);

describe.skipIf(needs.skipReason)('a claim whose second keyed statement fails', () => {
  const url = needs.url.postgres;
  const schema = freshSchemaName('pg_claim_partial');
  dropSchemasAfterPass(() => [schema], url);
  let executor: SqlExecutor;

  beforeAll(async () => {
    executor = createPgExecutor(new pg.Pool({ connectionString: url, max: 2 }));
    await runMigrations(executor, { schema });
  });
  afterAll(async () => {
    await executor?.close();
  });

  it('answers the rows its first keyed statement took', async () => {
    // Prepare: five keys with one row each, and a sixth whose head another session holds locked
    await executor.query(
      `INSERT INTO "${schema}".outbox (topic, key, payload, max_attempts)
       SELECT 'partial', k, '{}', 3 FROM unnest(ARRAY['a', 'b', 'c', 'd', 'e', 'x']) AS k`,
    );
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query(`SELECT id FROM "${schema}".outbox WHERE key = 'x' FOR UPDATE`);
    let keyedStatements = 0;
    const failing: SqlExecutor = {
      close: () => executor.close(),
      transaction: (fn) => executor.transaction(fn),
      query: (text, values, options) => {
        if (text.includes('WITH RECURSIVE walk') && ++keyedStatements === 2) {
          return Promise.reject(
            new StoreError('A database statement failed: canceling statement due to statement timeout'),
          );
        }
        return executor.query(text, values, options);
      },
    };
    const claim = createOutboxClaim({ executor: failing, schema });
    try {
      // Act
      const claimed = await claim({ batchSize: 10, leaseMs: 60_000 });

      // Assess: the five free heads, claimed by the first keyed statement, are answered
      expect(keyedStatements).toBe(2);
      expect(claimed.map((r) => r.key).sort()).toEqual(['a', 'b', 'c', 'd', 'e']);
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
  });
});
