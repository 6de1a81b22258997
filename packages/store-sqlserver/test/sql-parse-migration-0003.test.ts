import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../src/migrations.generated.ts';
import { renderMigration, splitBatches } from '../src/migrator.ts';
import { MIGRATION_0003_PARSE_TABLE } from './parse-tables.ts';
import { SCHEMA } from './statements.ts';
import { checkTsql, splitStatements } from './tsql-check.ts';

describe('the T-SQL parse check of migration 0003', () => {
  const sql = MIGRATIONS.find((m) => m.version === 3)?.sql ?? '';
  const batches = splitBatches(renderMigration(sql, SCHEMA));
  const statements = batches.flatMap(splitStatements);
  const flat = (text: string) => text.replace(/\s+/g, ' ');

  it('is three batches (drops; column changes; new constraints and indexes), each statement parsing as recorded', () => {
    expect(batches).toHaveLength(3);
    expect(statements).toHaveLength(MIGRATION_0003_PARSE_TABLE.length);
    for (const [index, statement] of statements.entries()) {
      const outcome = checkTsql(statement);
      const [label, expected] = MIGRATION_0003_PARSE_TABLE[index] ?? [];
      expect({ label, verbatim: outcome.verbatim, setAside: outcome.setAside }).toEqual({
        label,
        ...expected,
      });
    }
  });

  it.each([
    ['outbox', 'topic', 'NVARCHAR(400)', 'NOT NULL'],
    ['outbox', '[key]', 'NVARCHAR(450)', 'NULL'],
    ['inbox', 'source', 'NVARCHAR(200)', 'NOT NULL'],
    ['inbox', 'idempotency_key', 'NVARCHAR(600)', 'NOT NULL'],
  ])(
    'gives %s.%s the binary collation Latin1_General_100_BIN2, keeping its type and nullability',
    (table, column, type, nullable) => {
      expect(statements).toContain(
        `ALTER TABLE [${SCHEMA}].[${table}] ALTER COLUMN ${column} ${type} COLLATE Latin1_General_100_BIN2 ${nullable};`,
      );
    },
  );

  it('makes trailing spaces count in the inbox unique key through persisted byte lengths', () => {
    expect(statements).toContain(
      `ALTER TABLE [${SCHEMA}].[inbox] ADD source_bytes AS DATALENGTH(source) PERSISTED NOT NULL;`,
    );
    expect(statements).toContain(
      `ALTER TABLE [${SCHEMA}].[inbox] ADD idempotency_key_bytes AS DATALENGTH(idempotency_key) PERSISTED NOT NULL;`,
    );
    expect(statements.map(flat)).toContain(
      `ALTER TABLE [${SCHEMA}].[inbox] ADD CONSTRAINT inbox_source_idempotency_key_uq UNIQUE NONCLUSTERED (source, idempotency_key, source_bytes, idempotency_key_bytes);`,
    );
  });

  it.each(['outbox', 'inbox'])(
    'checks that a %s payload is exactly one JSON value, leaving stored rows alone',
    (table) => {
      expect(statements.map(flat)).toContain(
        `ALTER TABLE [${SCHEMA}].[${table}] WITH NOCHECK ADD CONSTRAINT ${table}_payload_json_ck CHECK (ISJSON(N'[' + payload + N']') = 1 AND ISJSON(N'{"v":' + payload + N'}') = 1);`,
      );
    },
  );

  it('admits exactly one JSON value with its payload check (JSON.parse standing in for ISJSON)', () => {
    // The wraps as the migration writes them: ISJSON(N'<prefix>' + payload + N'<suffix>') = 1, all of which must hold.
    const check = /outbox_payload_json_ck\s+CHECK \((.*)\);/.exec(sql)?.[1] ?? '';
    const wraps = [...check.matchAll(/ISJSON\(N'([^']*)' \+ payload \+ N'([^']*)'\) = 1/g)].map((m) => [
      m[1] ?? '',
      m[2] ?? '',
    ]);
    // ISJSON without a type constraint accepts a JSON object or array (every wrap makes one).
    const isjson = (text: string) => {
      try {
        const value: unknown = JSON.parse(text);
        return typeof value === 'object' && value !== null;
      } catch {
        return false;
      }
    };
    const passes = (payload: string) =>
      wraps.every(([prefix, suffix]) => isjson(`${prefix}${payload}${suffix}`));

    expect(wraps).toEqual([
      ['[', ']'],
      ['{"v":', '}'],
    ]);
    for (const one of ['{"a":1}', '[1,2]', '"x"', '""', '0', '-1.5e3', 'true', 'null', ' 7 ', '{}', '[]']) {
      expect(passes(one), one).toBe(true);
    }
    for (const notOne of [
      '',
      ' ',
      '1,2',
      '1,"a":2',
      '"a":1',
      '1},{"a":2',
      '[1],[2]',
      '1]',
      '{"a":1',
      'nul',
      ',',
    ]) {
      expect(passes(notOne), notOne).toBe(false);
    }
    // 0001's check alone let these through.
    expect(['', '1,2'].every((p) => isjson(`[${p}]`))).toBe(true);
  });

  it('builds again every index and constraint it dropped, and keys inbox_lease by (source, lease_until)', () => {
    const dropped = statements
      .map((s) => /^(?:DROP INDEX|ALTER TABLE \S+ DROP CONSTRAINT) ([a-z_]+)/.exec(s)?.[1])
      .filter(Boolean);
    const built = statements
      .map((s) => /^(?:CREATE INDEX|ALTER TABLE \S+ (?:WITH NOCHECK )?ADD CONSTRAINT) ([a-z_]+)/.exec(s)?.[1])
      .filter(Boolean);

    expect([...built].sort()).toEqual([...dropped].sort());
    expect(statements.map(flat)).toContain(
      `CREATE INDEX inbox_lease ON [${SCHEMA}].[inbox] (source, lease_until) WHERE state = N'processing';`,
    );
  });
});
