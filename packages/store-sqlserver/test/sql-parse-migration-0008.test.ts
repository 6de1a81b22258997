/**
 * Migration 0008 (the indexes of the admin list pages of unknown state literals) on SQL Server,
 * without a server: its statements through node-sql-parser's T-SQL grammar (see tsql-check.ts), against
 * PostgreSQL's 0008. Nothing here ran against a real SQL Server.
 */
import { readFileSync } from 'node:fs';
import { STATE_LITERALS } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../src/migrations.generated.ts';
import { renderMigration, splitBatches } from '../src/migrator.ts';
import { SCHEMA } from './statements.ts';
import { checkTsql, splitStatements } from './tsql-check.ts';

const root = new URL('../../../', import.meta.url);
const postgres = readFileSync(new URL('migrations/postgres/0008_admin_list_indexes.sql', root), 'utf8');

describe('the T-SQL parse check of migration 0008', () => {
  const sql = MIGRATIONS.find((m) => m.version === 8)?.sql ?? '';
  const batches = splitBatches(renderMigration(sql, SCHEMA));
  const statements = batches.flatMap(splitStatements);
  const flat = (text: string) => text.replace(/\s+/g, ' ').trim();

  it('is embedded as admin_list_indexes, the name and number of PostgreSQL 0008', () => {
    expect(MIGRATIONS.find((m) => m.version === 8)?.name).toBe('admin_list_indexes');
  });

  it("creates PostgreSQL's partial indexes as filtered ones, one batch, each statement parsing as written", () => {
    expect(batches).toHaveLength(1);
    expect(statements.map(flat)).toEqual([
      `CREATE INDEX outbox_unknown_state ON [${SCHEMA}].[outbox] (id) WHERE state <> N'pending' AND state <> N'processing' AND state <> N'sent' AND state <> N'dead';`,
      `CREATE INDEX inbox_unknown_state ON [${SCHEMA}].[inbox] (id) WHERE state <> N'pending' AND state <> N'processing' AND state <> N'processed' AND state <> N'dead';`,
    ]);
    for (const statement of statements) {
      const outcome = checkTsql(statement);
      expect({ verbatim: outcome.verbatim, setAside: outcome.setAside }).toEqual({
        verbatim: 'parsed',
        setAside: [],
      });
    }
    // Neither dialect indexes the pending rows here: every stored, retried or requeued row would write that index.
    const created = (sql: string) => [...sql.matchAll(/CREATE INDEX (\w+)/g)].map((m) => m[1]);
    expect(created(sql)).toEqual(['outbox_unknown_state', 'inbox_unknown_state']);
    expect(created(postgres)).toEqual(['outbox_unknown_state', 'inbox_unknown_state']);
  });

  it.each(['outbox', 'inbox'] as const)(
    'filters %s_unknown_state by every state literal core knows, as PostgreSQL does',
    (table) => {
      const literals = Object.values(STATE_LITERALS[table]);
      const filter = flat(
        /WHERE ([^;]*);/.exec(statements.find((s) => s.includes(`${table}_unknown_state`)) ?? '')?.[1] ?? '',
      );
      const pgFilter = new RegExp(
        `CREATE INDEX ${table}_unknown_state ON ${table} \\(id\\) WHERE state NOT IN \\(([^)]*)\\);`,
      ).exec(postgres)?.[1];

      expect(filter).toBe(literals.map((literal) => `state <> N'${literal}'`).join(' AND '));
      expect(pgFilter).toBe(literals.map((literal) => `'${literal}'`).join(', '));
    },
  );
});
