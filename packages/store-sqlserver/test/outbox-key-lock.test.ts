/**
 * The per-key outbox lock on SQL Server without a server (none runs here): the lock batch's parameters, and the
 * sequence of statements the store's insert and forward hand to the executor. The executor below only records
 * what it is given and answers what SQL Server would; the batch's T-SQL is parsed in sql-parse.test.ts. That SQL
 * Server grants, queues and releases the locks as described is not exercised here (test/contract where a server
 * is available, and PostgreSQL's twin in store-postgres/test/key-order.integration.test.ts).
 */
import { StoreError } from '@queuebox/core';
import mssql from 'mssql';
import { describe, expect, it } from 'vitest';
import type { QueryResult, SqlExecutor, SqlParams } from '../src/executor.ts';
import { createSqlServerInboxStore } from '../src/inbox-store.ts';
import { outboxKeyLockResource } from '../src/outbox-key-lock.ts';
import { LOCKS_PER_BATCH, lockOutboxKeysStatement } from '../src/outbox-sql.ts';
import { createSqlServerOutboxStore } from '../src/outbox-store.ts';
import { anOutboxMessage, SCHEMA } from './statements.ts';

const TOKEN = '6f1c2b8e-3d4a-4f5b-9c6d-7e8f9a0b1c2d';

/** The resources a lock batch binds, in the order it requests them. */
const resourcesOf = (values: SqlParams) => Object.values(values).map((p) => p.value as string);

/** What SQL Server answers each kind of batch: lock status, OUTPUT ids. */
type Answer = (text: string, values: SqlParams) => QueryResult<Record<string, unknown>>;

/** Records each statement (with `tx:` inside a transaction) and answers `answer(text)`. */
function recordingExecutor(answer: Answer) {
  const seen: { label: string; values: SqlParams }[] = [];
  const label = (text: string) =>
    text.includes('sp_getapplock')
      ? 'lock'
      : text.startsWith('INSERT INTO')
        ? 'insert'
        : text.startsWith('UPDATE b')
          ? 'complete'
          : 'other';
  const make = (inTransaction: boolean): SqlExecutor => {
    const executor: SqlExecutor = {
      async query<R>(text: string, values?: SqlParams) {
        seen.push({ label: `${inTransaction ? 'tx:' : ''}${label(text)}`, values: values ?? {} });
        return answer(text, values ?? {}) as unknown as QueryResult<R>;
      },
      transaction: (fn) => {
        if (!inTransaction) seen.push({ label: 'begin', values: {} });
        return fn(make(true));
      },
      close: async () => {},
    };
    return executor;
  };
  return { executor: make(false), seen, labels: () => seen.map((s) => s.label) };
}

/** Grants every lock; an insert answers one id per message; a complete answers the items it was given. */
const granting: Answer = (text, values) => {
  if (text.includes('sp_getapplock')) return { rows: [{ status: 0 }], rowCount: 1 };
  const json = JSON.parse(String(values.messages?.value ?? values.items?.value ?? '[]')) as { id?: string }[];
  const rows = json.map((item, i) => ({ id: item.id ?? String(100 + i), state: 'processed' }));
  return { rows, rowCount: rows.length };
};

describe('lockOutboxKeysStatement', () => {
  it('locks each distinct key once, in ascending resource order, as NVARCHAR(255) parameters', () => {
    const { values } = lockOutboxKeysStatement(SCHEMA, ['b', 'a', 'b', '']);

    const expected = ['b', 'a', ''].map((key) => outboxKeyLockResource(SCHEMA, key)).sort();
    expect(resourcesOf(values)).toEqual(expected);
    expect(Object.keys(values)).toEqual(['resource0', 'resource1', 'resource2']);
    for (const param of Object.values(values)) {
      const type = param.type as { type: unknown; length: number };
      expect([type.type, type.length]).toEqual([mssql.NVarChar, 255]);
    }
  });

  it(`takes at most ${LOCKS_PER_BATCH} keys, and refuses an invalid schema name`, () => {
    const keys = Array.from({ length: LOCKS_PER_BATCH + 1 }, (_, i) => `k${i}`);

    expect(Object.keys(lockOutboxKeysStatement(SCHEMA, keys.slice(1)).values)).toHaveLength(LOCKS_PER_BATCH);
    expect(() => lockOutboxKeysStatement(SCHEMA, keys)).toThrow(StoreError);
    expect(() => lockOutboxKeysStatement('bad]name', ['k'])).toThrow(/not a valid schema name/);
  });

  it('names a resource that fits sp_getapplock for the longest schema and key, and tells case apart', () => {
    const resource = outboxKeyLockResource('s'.repeat(63), '🔑'.repeat(225));

    expect(resource.length).toBeLessThanOrEqual(255);
    expect(resource).toMatch(/^queuebox\.outbox-key:s{63}:[0-9a-f]{64}$/);
    expect(outboxKeyLockResource(SCHEMA, 'A')).not.toBe(outboxKeyLockResource(SCHEMA, 'a'));
  });
});

describe('outbox.insert', () => {
  it('inserts unkeyed rows in one autocommit batch, without locks', async () => {
    const { executor, labels } = recordingExecutor(granting);

    const ids = await createSqlServerOutboxStore({ executor, schema: SCHEMA }).insert([
      anOutboxMessage({ key: null }),
    ]);

    expect(ids).toHaveLength(1);
    expect(labels()).toEqual(['insert']);
  });

  it('takes the locks of the keys, then inserts, in one transaction', async () => {
    const { executor, seen, labels } = recordingExecutor(granting);

    await createSqlServerOutboxStore({ executor, schema: SCHEMA }).insert([
      anOutboxMessage({ key: 'o-2' }),
      anOutboxMessage({ key: null }),
      anOutboxMessage({ key: 'o-1' }),
      anOutboxMessage({ key: 'o-2' }),
    ]);

    expect(labels()).toEqual(['begin', 'tx:lock', 'tx:insert']);
    expect(resourcesOf(seen[1]?.values ?? {})).toEqual(
      ['o-1', 'o-2'].map((key) => outboxKeyLockResource(SCHEMA, key)).sort(),
    );
  });

  it(`locks more than ${LOCKS_PER_BATCH} keys in batches that follow one resource order`, async () => {
    const { executor, seen, labels } = recordingExecutor(granting);
    const keys = Array.from({ length: 2 * LOCKS_PER_BATCH + 1 }, (_, i) => `key-${i}`);

    await createSqlServerOutboxStore({ executor, schema: SCHEMA }).insert(
      [...keys, ...keys].map((key) => anOutboxMessage({ key })),
    );

    expect(labels()).toEqual(['begin', 'tx:lock', 'tx:lock', 'tx:lock', 'tx:insert']);
    const batches = seen.filter((s) => s.label === 'tx:lock').map((s) => resourcesOf(s.values));
    expect(batches.map((b) => b.length)).toEqual([LOCKS_PER_BATCH, LOCKS_PER_BATCH, 1]);
    expect(batches.flat()).toEqual(keys.map((key) => outboxKeyLockResource(SCHEMA, key)).sort());
  });

  it('stops with a StoreError and inserts nothing when a lock is refused (-3: deadlock victim)', async () => {
    const { executor, labels } = recordingExecutor((text, values) =>
      text.includes('sp_getapplock') ? { rows: [{ status: -3 }], rowCount: 1 } : granting(text, values),
    );
    const insert = createSqlServerOutboxStore({ executor, schema: SCHEMA }).insert([anOutboxMessage()]);

    await expect(insert).rejects.toThrow(StoreError);
    await expect(insert).rejects.toThrow(/sp_getapplock -3/);
    expect(labels()).toEqual(['begin', 'tx:lock']);
  });
});

describe('inbox.forward', () => {
  const item = (id: string, key: string | null) => ({
    id,
    claimToken: TOKEN,
    outbox: anOutboxMessage({ key }),
  });

  it('takes the locks of the outbox keys before the forward, in its transaction', async () => {
    const { executor, seen, labels } = recordingExecutor(granting);

    const report = await createSqlServerInboxStore({ executor, schema: SCHEMA }).forward([
      item('7', 'k-b'),
      item('8', null),
      item('9', 'k-a'),
    ]);

    expect(labels()).toEqual(['begin', 'tx:lock', 'tx:complete', 'tx:insert']);
    expect(resourcesOf(seen[1]?.values ?? {})).toEqual(
      ['k-a', 'k-b'].map((key) => outboxKeyLockResource(SCHEMA, key)).sort(),
    );
    expect(report.outboxIds).toHaveLength(3);
  });

  it('takes no lock when no outbox row has a key', async () => {
    const { executor, labels } = recordingExecutor(granting);

    await createSqlServerInboxStore({ executor, schema: SCHEMA }).forward([item('7', null)]);

    expect(labels()).toEqual(['begin', 'tx:complete', 'tx:insert']);
  });
});
