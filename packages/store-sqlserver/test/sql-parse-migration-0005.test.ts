/**
 * Migration 0005 (the install id) on SQL Server, without a server: its statements and the store's read of the install
 * id through node-sql-parser's T-SQL grammar (see tsql-check.ts), and the table against PostgreSQL's 0005. Nothing
 * here ran against a real SQL Server.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isInstallId } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { selectInstallIdStatement } from '../src/install-id.ts';
import { MIGRATIONS } from '../src/migrations.generated.ts';
import { renderMigration, splitBatches } from '../src/migrator.ts';
import { NAMED_DEFAULT } from './parse-tables.ts';
import { SCHEMA } from './statements.ts';
import { checkTsql, splitStatements } from './tsql-check.ts';

/** The statements of migration 0005, batch by batch in file order, with what the parser made of each. */
const MIGRATION_0005_PARSE_TABLE = [
  ['0005: CREATE TABLE install', { verbatim: 'failed', setAside: [NAMED_DEFAULT] }],
  ['0005: INSERT INTO install', { verbatim: 'parsed', setAside: [] }],
] as const;

const root = new URL('../../../', import.meta.url);
const postgres = readFileSync(new URL('migrations/postgres/0005_install_id.sql', root), 'utf8');

describe('the T-SQL parse check of migration 0005', () => {
  const sql = MIGRATIONS.find((m) => m.version === 5)?.sql ?? '';
  const batches = splitBatches(renderMigration(sql, SCHEMA));
  const statements = batches.flatMap(splitStatements);
  const flat = (text: string) => text.replace(/\s+/g, ' ');

  it('is embedded as install_id, the name and number of PostgreSQL 0005', () => {
    expect(MIGRATIONS.find((m) => m.version === 5)?.name).toBe('install_id');
    expect(postgres).toContain('CREATE TABLE install (');
  });

  it('is two batches (the table; its one row), each statement parsing as recorded, on [schema].[install]', () => {
    expect(batches).toHaveLength(2);
    expect(statements).toHaveLength(MIGRATION_0005_PARSE_TABLE.length);
    for (const [index, statement] of statements.entries()) {
      const outcome = checkTsql(statement);
      const [label, expected] = MIGRATION_0005_PARSE_TABLE[index] ?? [];
      expect({ label, verbatim: outcome.verbatim, setAside: outcome.setAside }).toEqual({
        label,
        verbatim: expected?.verbatim,
        setAside: [...(expected?.setAside ?? [])],
      });
      expect(outcome.parsed.tableList.map((t) => t.split('::').slice(1).join('.'))).toEqual([
        `${SCHEMA}.install`,
      ]);
    }
  });

  it('declares the columns and constraints of the PostgreSQL migration, in order, with the same widths', () => {
    /** `name TYPE(n)` column lines of the install table: [name, width or null]. */
    const columns = (text: string) =>
      (/CREATE TABLE [^\n]*install\]? \(\n([\s\S]*?)\n\);/.exec(text)?.[1] ?? '')
        .split('\n')
        .map((line) => /^\s+([a-z_]+)\s+([A-Z0-9]+)(?:\((\d+)\))?/.exec(line))
        .filter((m): m is RegExpExecArray => m !== null && m[1] !== 'CONSTRAINT')
        .map((m) => [m[1], /CHAR$/.test(m[2] ?? '') && m[3] ? Number(m[3]) : null]);
    const constraints = (text: string) =>
      [...text.matchAll(/CONSTRAINT (install_[a-z_]+)/g)].map((m) => m[1]).filter((n) => !n?.endsWith('_df'));

    expect(columns(sql)).toEqual(columns(postgres));
    expect(columns(sql)).toEqual([
      ['singleton', null],
      ['id', 32],
      ['created_at', null],
    ]);
    expect(constraints(sql)).toEqual(constraints(postgres));
    expect(constraints(sql)).toEqual(['install_pkey', 'install_singleton_ck', 'install_id_ck']);
  });

  it('keeps one row (its key can only be 1) holding 32 lower-case hex digits, compared binary', () => {
    expect(statements.map(flat)).toContainEqual(
      expect.stringContaining('CONSTRAINT install_pkey PRIMARY KEY CLUSTERED (singleton)'),
    );
    expect(statements.map(flat)).toContainEqual(
      expect.stringContaining('CONSTRAINT install_singleton_ck CHECK (singleton = 1)'),
    );
    expect(statements.map(flat)).toContainEqual(
      expect.stringContaining('id NVARCHAR(32) COLLATE Latin1_General_100_BIN2 NOT NULL,'),
    );
    expect(statements.map(flat)).toContainEqual(
      expect.stringContaining("CONSTRAINT install_id_ck CHECK (LEN(id) = 32 AND id NOT LIKE N'%[^0-9a-f]%')"),
    );
    expect(postgres).toContain("CONSTRAINT install_id_ck CHECK (id ~ '^[0-9a-f]{32}$')");
  });

  it('makes the id from NEWID() as core reads it: its 36 characters without dashes, in lower case', () => {
    const insert = statements[1] ?? '';
    expect(insert).toBe(
      `INSERT INTO [${SCHEMA}].[install] (id) VALUES (LOWER(REPLACE(CAST(NEWID() AS NVARCHAR(36)), N'-', N'')));`,
    );
    // NEWID() as NVARCHAR(36): upper-case 8-4-4-4-12 hex digits, as randomUUID's text in upper case.
    for (let i = 0; i < 100; i++) {
      const made = randomUUID().toUpperCase().replaceAll('-', '').toLowerCase();
      expect(isInstallId(made), made).toBe(true);
    }
  });

  it('is read by the store with a statement that parses as written', () => {
    const outcome = checkTsql(selectInstallIdStatement(SCHEMA).text);

    expect({ verbatim: outcome.verbatim, setAside: outcome.setAside }).toEqual({
      verbatim: 'parsed',
      setAside: [],
    });
    // It names the outbox's message_uid too (0009), so it fails while the schema lacks it.
    expect([...outcome.parsed.tableList].sort()).toEqual([
      `select::${SCHEMA}::install`,
      `select::${SCHEMA}::outbox`,
    ]);
  });
});
