/**
 * The settings check and where the store runs it, without a server: the executor answers the settings query as
 * SQL Server's catalog would (`sys.databases`, `sys.triggers`); the statement's T-SQL is parsed in
 * sql-parse.test.ts.
 */
import { type LogFields, StoreError } from '@queuebox/core';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { QueryResult, SqlExecutor, SqlParams } from '../src/executor.ts';
import {
  checkServerSettings,
  MIN_COMPATIBILITY_LEVEL,
  RCSI_OFF_WARNING_CODE,
  settingsWarnings,
} from '../src/settings.ts';
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
      'SELECT id, topic, [key], payload, headers, state, attempt, max_attempts, scheduled_at, claim_token, lease_until, created_at, updated_at, sent_at, last_error, destination, message_uid FROM [qb_test].[outbox] WHERE id = @id;',
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

/** A logger that keeps what it was told to warn. */
function warnings() {
  const told: { message: string; fields: LogFields | undefined }[] = [];
  return { logger: { warn: (message: string, fields?: LogFields) => told.push({ message, fields }) }, told };
}

describe('settingsWarnings', () => {
  it('warns when READ_COMMITTED_SNAPSHOT is off: what it costs and the ALTER DATABASE that turns it on', () => {
    const [warning, ...more] = settingsWarnings({
      compatibilityLevel: 160,
      readCommittedSnapshot: false,
      triggers: 0,
    });

    expect(more).toEqual([]);
    expect(warning?.code).toBe(RCSI_OFF_WARNING_CODE);
    expect(warning?.setting).toBe('is_read_committed_snapshot_on');
    expect(warning?.message).toMatch(/^READ_COMMITTED_SNAPSHOT is off in this database: /);
    // What it costs: an open application transaction with a keyed row stalls every claim, after the lock timeout.
    expect(warning?.message).toContain('application transaction that enqueued a keyed outbox row stays open');
    expect(warning?.message).toContain('every outbox claim waits 1000 ms');
    expect(warning?.message).toContain('claims nothing, keyed or unkeyed');
    // The remedy, and what it needs.
    expect(warning?.message).toContain('ALTER DATABASE CURRENT SET READ_COMMITTED_SNAPSHOT ON');
    expect(warning?.message).toContain('WITH ROLLBACK IMMEDIATE');
  });

  it('says nothing when READ_COMMITTED_SNAPSHOT is on', () => {
    expect(settingsWarnings({ compatibilityLevel: 130, readCommittedSnapshot: true, triggers: 0 })).toEqual(
      [],
    );
  });
});

describe('the store warns about READ_COMMITTED_SNAPSHOT', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('once, at the first check that passes, however often the settings are read again', async () => {
    // Prepare
    const catalog = { compatibility_level: 120, read_committed_snapshot: false, triggers: 0 };
    const { executor } = catalogExecutor(catalog);
    const { logger, told } = warnings();
    const store = createSqlServerStore({ executor, schema: SCHEMA, logger });

    // Act: a refused check, then a passing one, then more statements and a migrate() that reads them again.
    await expect(store.outbox.get('1')).rejects.toThrow(/compatibility level/);
    const beforePassing = told.length;
    catalog.compatibility_level = 160;
    await store.outbox.get('1');
    await store.inbox.get('1');
    await store.migrate().catch(() => undefined);

    // Assess
    expect(beforePassing).toBe(0);
    expect(told).toHaveLength(1);
    expect(told[0]?.message).toMatch(/^READ_COMMITTED_SNAPSHOT is off/);
    expect(told[0]?.fields).toEqual({
      code: RCSI_OFF_WARNING_CODE,
      setting: 'is_read_committed_snapshot_on',
    });
  });

  it('not at all when it is on', async () => {
    const { executor } = catalogExecutor({
      compatibility_level: 160,
      read_committed_snapshot: true,
      triggers: 0,
    });
    const { logger, told } = warnings();

    await createSqlServerStore({ executor, schema: SCHEMA, logger }).outbox.get('1');

    expect(told).toEqual([]);
  });

  it('as a Node process warning when no logger is given (what openStore does)', async () => {
    // Prepare
    const emitted = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    const { executor } = catalogExecutor({
      compatibility_level: 160,
      read_committed_snapshot: false,
      triggers: 0,
    });

    // Act
    await createSqlServerStore({ executor, schema: SCHEMA }).outbox.get('1');

    // Assess
    expect(emitted).toHaveBeenCalledTimes(1);
    expect(emitted.mock.calls[0]?.[0]).toMatch(/^READ_COMMITTED_SNAPSHOT is off/);
    expect(emitted.mock.calls[0]?.[1]).toEqual({ type: 'QueueBoxWarning', code: RCSI_OFF_WARNING_CODE });
  });
});
