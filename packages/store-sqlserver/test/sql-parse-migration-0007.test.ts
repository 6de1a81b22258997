/**
 * Migration 0007 (the dead rows by id, for the requeue) on SQL Server, without a server: its statements through
 * node-sql-parser's T-SQL grammar (see tsql-check.ts), against PostgreSQL's 0007. Nothing here ran against a real
 * SQL Server.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../src/migrations.generated.ts';
import { renderMigration, splitBatches } from '../src/migrator.ts';
import { SCHEMA } from './statements.ts';
import { checkTsql, splitStatements } from './tsql-check.ts';

const root = new URL('../../../', import.meta.url);
const postgres = readFileSync(new URL('migrations/postgres/0007_dead_rows_and_autovacuum.sql', root), 'utf8');

describe('the T-SQL parse check of migration 0007', () => {
  const sql = MIGRATIONS.find((m) => m.version === 7)?.sql ?? '';
  const statements = splitBatches(renderMigration(sql, SCHEMA)).flatMap(splitStatements);
  const flat = (text: string) => text.replace(/\s+/g, ' ').trim();

  it('is embedded as dead_rows_and_autovacuum, the name and number of PostgreSQL 0007', () => {
    expect(MIGRATIONS.find((m) => m.version === 7)?.name).toBe('dead_rows_and_autovacuum');
  });

  it("creates PostgreSQL's partial indexes of dead rows as filtered ones, each parsing as written", () => {
    expect(statements.map(flat)).toEqual([
      `CREATE INDEX outbox_dead ON [${SCHEMA}].[outbox] (id) WHERE state = N'dead';`,
      `CREATE INDEX inbox_dead ON [${SCHEMA}].[inbox] (id) WHERE state = N'dead';`,
    ]);
    for (const statement of statements) {
      const outcome = checkTsql(statement);
      expect({ verbatim: outcome.verbatim, setAside: outcome.setAside }).toEqual({
        verbatim: 'parsed',
        setAside: [],
      });
    }
    expect(postgres).toContain("CREATE INDEX outbox_dead ON outbox (id) WHERE state = 'dead';");
    expect(postgres).toContain("CREATE INDEX inbox_dead ON inbox (id) WHERE state = 'dead';");
  });
});
