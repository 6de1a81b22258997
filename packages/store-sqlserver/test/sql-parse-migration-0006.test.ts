/**
 * Migration 0006 (the index of the relay's order of one aggregate id) on SQL Server, without a server: its statement
 * through node-sql-parser's T-SQL grammar (see tsql-check.ts), against PostgreSQL's 0006, and the key size against
 * SQL Server's limit for a nonclustered index. Nothing here ran against a real SQL Server.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../src/migrations.generated.ts';
import { renderMigration, splitBatches } from '../src/migrator.ts';
import { SCHEMA } from './statements.ts';
import { checkTsql, splitStatements } from './tsql-check.ts';

const root = new URL('../../../', import.meta.url);
const postgres = readFileSync(new URL('migrations/postgres/0006_inbox_active_aggregate.sql', root), 'utf8');
const init = MIGRATIONS.find((m) => m.version === 1)?.sql ?? '';

describe('the T-SQL parse check of migration 0006', () => {
  const sql = MIGRATIONS.find((m) => m.version === 6)?.sql ?? '';
  const batches = splitBatches(renderMigration(sql, SCHEMA));
  const statements = batches.flatMap(splitStatements);
  const flat = (text: string) => text.replace(/\s+/g, ' ').trim();

  it('is embedded as inbox_active_aggregate, the name and number of PostgreSQL 0006', () => {
    expect(MIGRATIONS.find((m) => m.version === 6)?.name).toBe('inbox_active_aggregate');
    expect(postgres).toContain('CREATE INDEX inbox_active_aggregate ON inbox');
  });

  it('is one batch of one statement that parses as written', () => {
    expect(batches).toHaveLength(1);
    expect(statements).toHaveLength(1);
    const outcome = checkTsql(statements[0] ?? '');

    expect({ verbatim: outcome.verbatim, setAside: outcome.setAside }).toEqual({
      verbatim: 'parsed',
      setAside: [],
    });
  });

  it("creates PostgreSQL's partial index as a filtered one: same name, key columns and filter", () => {
    const pgIndex = flat(/CREATE INDEX inbox_active_aggregate[\s\S]*?;/.exec(postgres)?.[0] ?? '');

    expect(flat(statements[0] ?? '')).toBe(
      `CREATE INDEX inbox_active_aggregate ON [${SCHEMA}].[inbox] (source, aggregate_id, id) WHERE state IN (N'pending', N'processing') AND aggregate_id IS NOT NULL;`,
    );
    expect(pgIndex).toBe(
      "CREATE INDEX inbox_active_aggregate ON inbox (source, aggregate_id, id) WHERE state IN ('pending', 'processing') AND aggregate_id IS NOT NULL;",
    );
    // Built inside the migration's transaction, as PostgreSQL's 0004 rebuilt its indexes.
    expect(postgres).not.toContain('CONCURRENTLY');
  });

  it('keeps its key within the 1,700 bytes of a nonclustered index key', () => {
    const width = (column: string) => {
      const match = new RegExp(`\\n\\s+${column}\\s+(NVARCHAR\\((\\d+)\\)|BIGINT)`).exec(init);
      if (!match) throw new Error(`no column ${column} in 0001`);
      return match[2] ? Number(match[2]) * 2 : 8;
    };
    const bytes = width('source') + width('aggregate_id') + width('id');

    expect(bytes).toBe(400 + 900 + 8);
    expect(bytes).toBeLessThanOrEqual(1700);
  });
});
