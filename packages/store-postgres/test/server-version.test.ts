/**
 * The migrator's server-version gate, without a server: the only PostgreSQL here is 15 (an outside audit ran
 * 13.22 and 18.4 by hand: on 13 every outbox claim failed on `pg_column_compression` while migrations, the start and
 * /health succeeded). The executor below answers the version query and fails anything after it, so the test shows
 * whether the migrator stopped before its first statement of schema work.
 */
import { MigrationError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import type { SqlExecutor } from '../src/executor.ts';
import { runMigrations } from '../src/index.ts';

class PastTheGate extends Error {}

function serverAt(num: string, version: string): { executor: SqlExecutor; statements: string[] } {
  const statements: string[] = [];
  const executor: SqlExecutor = {
    query: async (text) => {
      statements.push(text);
      if (text.includes('server_version_num')) return { rows: [{ num, version }] as never[], rowCount: 1 };
      throw new PastTheGate(text);
    },
    transaction: async () => {
      throw new PastTheGate('transaction');
    },
    close: async () => {},
  };
  return { executor, statements };
}

describe('the migrator and the server version', () => {
  it('refuses PostgreSQL 13 with a MigrationError naming the version, before any schema work', async () => {
    const { executor, statements } = serverAt('130022', '13.22');

    const error = await runMigrations(executor, { schema: 'qb_version_gate' }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(MigrationError);
    expect((error as Error).message).toBe(
      'QueueBox needs PostgreSQL 14 or later; this server is PostgreSQL 13.22. Nothing was migrated.',
    );
    expect(statements).toHaveLength(1);
  });

  it('goes on past the gate on PostgreSQL 14', async () => {
    const { executor } = serverAt('140000', '14.0');

    const error = await runMigrations(executor, { schema: 'qb_version_gate' }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(PastTheGate);
  });
});
