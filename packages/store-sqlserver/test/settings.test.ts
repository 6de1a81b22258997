/**
 * The settings check and where the store runs it, without a server: the executor answers the settings query as
 * SQL Server's catalog would (`sys.databases`, `sys.triggers`); the statement's T-SQL is parsed in
 * sql-parse.test.ts.
 */
import { StoreError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import type { QueryResult, SqlExecutor, SqlParams } from '../src/executor.ts';
import { checkServerSettings, MIN_COMPATIBILITY_LEVEL } from '../src/settings.ts';
import { createSqlServerStore } from '../src/store.ts';
import { SCHEMA } from './statements.ts';

interface Catalog {
  compatibility_level: number;
  read_committed_snapshot: boolean;
  triggers: number;
}

/** Answers the settings query from `catalog` (changeable between calls) and everything else with no rows. */
function catalogExecutor(catalog: Catalog) {
  const seen: string[] = [];
  const executor: SqlExecutor = {
    async query<R>(text: string, _values?: SqlParams) {
      const settings = text.includes('sys.databases');
      seen.push(settings ? 'settings' : (text.split('\n')[0] ?? ''));
      const rows = settings ? [{ ...catalog }] : [];
      return { rows, rowCount: rows.length } as unknown as QueryResult<R>;
    },
    transaction: (fn) => fn(executor),
    close: async () => {},
  };
  return { executor, seen };
}

describe('checkServerSettings', () => {
  it('accepts compatibility level 130 and no triggers, and reports READ_COMMITTED_SNAPSHOT', async () => {
    const { executor } = catalogExecutor({
      compatibility_level: 130,
      read_committed_snapshot: false,
      triggers: 0,
    });

    expect(await checkServerSettings(executor, SCHEMA)).toEqual({
      compatibilityLevel: 130,
      readCommittedSnapshot: false,
      triggers: 0,
    });
  });

  it(`refuses a compatibility level below ${MIN_COMPATIBILITY_LEVEL} (no OPENJSON), saying how to change it`, async () => {
    const { executor } = catalogExecutor({
      compatibility_level: 120,
      read_committed_snapshot: true,
      triggers: 0,
    });

    const error = await checkServerSettings(executor, SCHEMA).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(StoreError);
    expect((error as StoreError).message).toMatch(
      /compatibility level is 120; QueueBox needs 130 .*OPENJSON/,
    );
    expect((error as StoreError).message).toContain('SET COMPATIBILITY_LEVEL = 130');
    expect((error as StoreError).context).toEqual({ setting: 'compatibility_level', value: 120 });
  });

  it('refuses an enabled trigger on either table (OUTPUT without INTO fails with error 334)', async () => {
    const { executor } = catalogExecutor({
      compatibility_level: 160,
      read_committed_snapshot: true,
      triggers: 1,
    });

    const error = await checkServerSettings(executor, SCHEMA).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(StoreError);
    expect((error as StoreError).message).toMatch(/trigger.*\[qb_test\]\.\[outbox\].*error 334/);
  });
});

describe('the store runs the check', () => {
  it('once before the first repository statement, again after a refusal, and at the start of migrate()', async () => {
    const catalog = { compatibility_level: 120, read_committed_snapshot: true, triggers: 0 };
    const { executor, seen } = catalogExecutor(catalog);
    const store = createSqlServerStore({ executor, schema: SCHEMA });

    await expect(store.outbox.get('1')).rejects.toThrow(/compatibility level is 120/);
    catalog.compatibility_level = 150;
    await store.outbox.get('1');
    await store.inbox.get('1');
    await store.ping();
    await expect(store.migrate()).rejects.toBeDefined();

    expect(seen.slice(0, 6)).toEqual([
      'settings',
      'settings',
      'SELECT id, topic, [key], payload, headers, state, attempt, max_attempts, scheduled_at, claim_token, lease_until, created_at, updated_at, sent_at, last_error, destination FROM [qb_test].[outbox] WHERE id = @id;',
      'SELECT id, source, idempotency_key, event_type, aggregate_id, correlation_id, payload, headers, state, attempt, max_attempts, scheduled_at, claim_token, lease_until, received_at, updated_at, processed_at, last_error FROM [qb_test].[inbox] WHERE id = @id;',
      'SELECT 1 AS ok;',
      'settings',
    ]);
  });

  it('refuses migrate() before applying anything when a trigger is there', async () => {
    const { executor, seen } = catalogExecutor({
      compatibility_level: 160,
      read_committed_snapshot: false,
      triggers: 2,
    });

    await expect(createSqlServerStore({ executor, schema: SCHEMA }).migrate()).rejects.toThrow(
      /2 enabled trigger/,
    );
    expect(seen).toEqual(['settings']);
  });
});
