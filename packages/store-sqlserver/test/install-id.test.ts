/**
 * The install id on SQL Server, without a server: the executor answers the settings query and the install-id read
 * as SQL Server would (the statement's T-SQL is parsed in sql-parse-migration-0005.test.ts). Nothing here ran
 * against a real SQL Server.
 */
import { isMissingInstallIdError, StoreError, StoreUnavailableError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { translateError } from '../src/errors.ts';
import type { QueryResult, SqlExecutor } from '../src/executor.ts';
import { readInstallId, selectInstallIdStatement } from '../src/install-id.ts';
import { createSqlServerStore } from '../src/store.ts';
import { SCHEMA } from './statements.ts';

const INSTALL = '0123456789abcdef0123456789abcdef';

/** What the install-id read answers: rows, or a driver error (`number` as mssql sets it). */
type Answer = { readonly rows: readonly Record<string, unknown>[] } | { readonly number: number };

/** Answers the settings query as a healthy database, the install-id read with `answer`, anything else with nothing. */
function fakeExecutor(answer: Answer) {
  const seen: string[] = [];
  const executor: SqlExecutor = {
    async query<R>(text: string) {
      if (text.includes('sys.databases')) {
        seen.push('settings');
        const rows = [{ compatibility_level: 150, read_committed_snapshot: true, triggers: 0 }];
        return { rows, rowCount: 1 } as unknown as QueryResult<R>;
      }
      if (text === selectInstallIdStatement(SCHEMA).text) {
        seen.push('install id');
        if ('number' in answer) {
          throw translateError(Object.assign(new Error('Invalid object name'), { number: answer.number }));
        }
        return { rows: answer.rows, rowCount: answer.rows.length } as unknown as QueryResult<R>;
      }
      seen.push(text.includes('UPDATE') ? 'claim' : 'other');
      return { rows: [], rowCount: 0 } as unknown as QueryResult<R>;
    },
    transaction: (fn) => fn(executor),
    close: async () => {},
  };
  return { executor, seen };
}

describe('the install id of a SQL Server store', () => {
  it('reads [schema].[install] once, after the settings check, and keeps it', async () => {
    const { executor, seen } = fakeExecutor({ rows: [{ id: INSTALL }] });
    const store = createSqlServerStore({ executor, schema: SCHEMA });

    expect(await store.installId()).toBe(INSTALL);
    expect(await store.installId()).toBe(INSTALL);
    await store.outbox.claim({ batchSize: 10, leaseMs: 1000 });

    expect(selectInstallIdStatement(SCHEMA).text).toBe(
      `SELECT id FROM [${SCHEMA}].[install] WHERE NOT EXISTS (SELECT o.message_uid FROM [${SCHEMA}].[outbox] o WHERE 1 = 0);`,
    );
    expect(seen.filter((s) => s === 'install id')).toHaveLength(1);
    expect(seen.slice(0, 2)).toEqual(['settings', 'install id']);
  });

  it('fails a claim before migration 0005 (error 208) with a StoreError that says to migrate, claiming nothing', async () => {
    const { executor, seen } = fakeExecutor({ number: 208 });
    const store = createSqlServerStore({ executor, schema: SCHEMA });

    const error = await store.outbox.claim({ batchSize: 10, leaseMs: 1000 }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).toContain(`schema "${SCHEMA}" has no install id`);
    expect((error as Error).message).toMatch(/migration 0005 .*npx queuebox migrate/s);
    expect((error as StoreError).context).toEqual({ schema: SCHEMA, migration: 5 });
    expect(seen).not.toContain('claim');
  });

  it('fails a claim before migration 0009 (error 207, no outbox.message_uid) with a StoreError that says to migrate, claiming nothing', async () => {
    const { executor, seen } = fakeExecutor({ number: 207 });
    const store = createSqlServerStore({ executor, schema: SCHEMA });

    const error = await store.outbox.claim({ batchSize: 10, leaseMs: 1000 }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).toMatch(
      /no outbox\.message_uid column: migration 0009 .*npx queuebox migrate/s,
    );
    expect((error as StoreError).context).toEqual({ schema: SCHEMA, migration: 9 });
    expect(isMissingInstallIdError(error)).toBe(true);
    expect(seen).not.toContain('claim');
  });

  it('refuses an install row that is not 32 lower-case hex digits, and an empty table', async () => {
    for (const rows of [[{ id: INSTALL.toUpperCase() }], [{ id: `${INSTALL} ` }], []]) {
      const { executor } = fakeExecutor({ rows });
      await expect(readInstallId(executor, SCHEMA)).rejects.toThrow(/has no install id/);
    }
  });

  it('leaves an outage as StoreUnavailableError, and reads again on the next call', async () => {
    let calls = 0;
    const executor: SqlExecutor = {
      async query<R>() {
        calls++;
        if (calls === 1) throw new StoreUnavailableError('The database is unavailable: ECONNRESET');
        return { rows: [{ id: INSTALL }], rowCount: 1 } as unknown as QueryResult<R>;
      },
      transaction: (fn) => fn(executor),
      close: async () => {},
    };

    await expect(readInstallId(executor, SCHEMA)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await readInstallId(executor, SCHEMA)).toBe(INSTALL);
  });
});
