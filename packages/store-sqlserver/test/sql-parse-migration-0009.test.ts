/**
 * Migration 0009 (the random part of every outbox message id) on SQL Server, without a server: its statement through
 * node-sql-parser's T-SQL grammar (see tsql-check.ts), against PostgreSQL's 0009. Nothing here ran against a real
 * SQL Server.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../src/migrations.generated.ts';
import { renderMigration, splitBatches } from '../src/migrator.ts';
import { OUTBOX_COLUMNS } from '../src/rows.ts';
import { SCHEMA } from './statements.ts';
import { checkTsql, splitStatements } from './tsql-check.ts';

const root = new URL('../../../', import.meta.url);
const postgres = readFileSync(new URL('migrations/postgres/0009_message_uid.sql', root), 'utf8');

describe('the T-SQL parse check of migration 0009', () => {
  const sql = MIGRATIONS.find((m) => m.version === 9)?.sql ?? '';
  const batches = splitBatches(renderMigration(sql, SCHEMA));
  const statements = batches.flatMap(splitStatements);
  const flat = (text: string) => text.replace(/\s+/g, ' ').trim();

  it('is embedded as message_uid, the name and number of PostgreSQL 0009', () => {
    expect(MIGRATIONS.find((m) => m.version === 9)?.name).toBe('message_uid');
  });

  it('adds a nullable uid with a NEWID() default and no WITH VALUES (existing rows keep NULL, no rewrite), as PostgreSQL adds a nullable uuid and then its default', () => {
    expect(statements.map(flat)).toEqual([
      `ALTER TABLE [${SCHEMA}].[outbox] ADD message_uid UNIQUEIDENTIFIER NULL CONSTRAINT outbox_message_uid_df DEFAULT NEWID();`,
    ]);
    // The grammar reads no named DEFAULT constraint in a column definition (0001's are set aside the same way).
    const outcome = checkTsql(statements[0] ?? '');
    expect(outcome.setAside).toEqual(['CONSTRAINT name DEFAULT']);
    expect(outcome.parsed.tableList).toEqual([`alter::${SCHEMA}::outbox`]);
    expect(statements.join('\n')).not.toMatch(/WITH VALUES/i);
    const pg = postgres
      .split('\n')
      .filter((line) => !line.startsWith('--') && line.trim() !== '')
      .map(flat);
    expect(pg).toEqual([
      'ALTER TABLE outbox ADD COLUMN message_uid UUID;',
      'ALTER TABLE outbox ALTER COLUMN message_uid SET DEFAULT gen_random_uuid();',
    ]);
  });

  it('is read with every outbox row', () => {
    expect(OUTBOX_COLUMNS.split(', ')).toContain('message_uid');
  });
});
