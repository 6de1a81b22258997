import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../src/migrations.generated.ts';
import { renderMigration, splitBatches } from '../src/migrator.ts';
import { type Ast, first, MIGRATION_PARSE_TABLE } from './parse-tables.ts';
import { SCHEMA } from './statements.ts';
import { checkTsql, splitStatements } from './tsql-check.ts';

describe('the T-SQL parse check of migration 0001', () => {
  const batches = splitBatches(renderMigration(MIGRATIONS[0]?.sql ?? '', SCHEMA));
  const statements = splitStatements(batches[0] ?? '');

  it('is one batch of ten statements, each parsing as MIGRATION_PARSE_TABLE records', () => {
    expect(batches).toHaveLength(1);
    expect(statements).toHaveLength(MIGRATION_PARSE_TABLE.length);
    for (const [index, statement] of statements.entries()) {
      const outcome = checkTsql(statement);
      const [label, expected] = MIGRATION_PARSE_TABLE[index] ?? [];
      expect({ label, verbatim: outcome.verbatim, setAside: outcome.setAside }).toEqual({
        label,
        ...expected,
      });
    }
  });

  /** [column, type, length, nullable] per SCHEMA.md's SQL Server column. */
  const OUTBOX: readonly (readonly [string, string, number | 'max' | undefined, boolean])[] = [
    ['id', 'BIGINT', undefined, false],
    ['topic', 'NVARCHAR', 400, false],
    ['key', 'NVARCHAR', 450, true],
    ['payload', 'NVARCHAR', 'max', false],
    ['headers', 'NVARCHAR', 'max', false],
    ['state', 'NVARCHAR', 50, false],
    ['attempt', 'INT', undefined, false],
    ['max_attempts', 'INT', undefined, false],
    ['scheduled_at', 'DATETIME2', 3, false],
    ['claim_token', 'UNIQUEIDENTIFIER', undefined, true],
    ['lease_until', 'DATETIME2', 3, true],
    ['created_at', 'DATETIME2', 3, false],
    ['updated_at', 'DATETIME2', 3, false],
    ['sent_at', 'DATETIME2', 3, true],
    ['last_error', 'NVARCHAR', 'max', true],
    ['destination', 'NVARCHAR', 200, true],
  ];
  const INBOX: typeof OUTBOX = [
    ['id', 'BIGINT', undefined, false],
    ['source', 'NVARCHAR', 200, false],
    ['idempotency_key', 'NVARCHAR', 600, false],
    ['event_type', 'NVARCHAR', 400, true],
    ['aggregate_id', 'NVARCHAR', 450, true],
    ['correlation_id', 'NVARCHAR', 200, true],
    ['payload', 'NVARCHAR', 'max', false],
    ['headers', 'NVARCHAR', 'max', false],
    ['state', 'NVARCHAR', 50, false],
    ['attempt', 'INT', undefined, false],
    ['max_attempts', 'INT', undefined, false],
    ['scheduled_at', 'DATETIME2', 3, false],
    ['claim_token', 'UNIQUEIDENTIFIER', undefined, true],
    ['lease_until', 'DATETIME2', 3, true],
    ['received_at', 'DATETIME2', 3, false],
    ['updated_at', 'DATETIME2', 3, false],
    ['processed_at', 'DATETIME2', 3, true],
    ['last_error', 'NVARCHAR', 'max', true],
  ];

  function columnsOf(table: string) {
    const statement = statements.find((s) => s.startsWith(`CREATE TABLE [${SCHEMA}].[${table}]`)) ?? '';
    const ast = first(checkTsql(statement).parsed.ast);
    const definitions = ast.create_definitions as Ast[];
    const columns = definitions
      .filter((d) => d.resource === 'column')
      .map((d) => {
        const definition = d.definition as { dataType: string; length?: number | string; scale?: number };
        const nullable = (d.nullable as { type: string } | undefined)?.type !== 'not null';
        const length = definition.length ?? definition.scale;
        return [(d.column as { column: string }).column, definition.dataType, length, nullable] as const;
      });
    const constraints = definitions.filter((d) => d.resource === 'constraint');
    return { ast, columns, constraints, definitions };
  }

  it.each([
    ['outbox', OUTBOX],
    ['inbox', INBOX],
  ] as const)('declares the %s columns of SCHEMA.md', (table, expected) => {
    const { ast, columns } = columnsOf(table);

    expect(ast.table).toEqual([expect.objectContaining({ db: SCHEMA, table })]);
    expect(columns).toEqual(expected);
  });

  it('makes id an IDENTITY(1, 1) clustered primary key and inbox (source, idempotency_key) unique', () => {
    for (const table of ['outbox', 'inbox']) {
      const { definitions, constraints } = columnsOf(table);
      const id = definitions.find((d) => (d.column as { column?: string } | undefined)?.column === 'id');
      expect(JSON.stringify(id?.auto_increment)).toContain('"identity"');
      expect(constraints).toContainEqual(
        expect.objectContaining({ constraint: `${table}_pkey`, constraint_type: 'primary key' }),
      );
    }
    const unique = columnsOf('inbox').constraints.find(
      (c) => c.constraint === 'inbox_source_idempotency_key_uq',
    );
    expect(JSON.stringify(unique?.definition)).toBe(
      JSON.stringify([
        { type: 'column_ref', table: null, db: null, schema: null, column: 'source', collate: null },
        { type: 'column_ref', table: null, db: null, schema: null, column: 'idempotency_key', collate: null },
      ]),
    );
  });

  it('checks the JSON columns with ISJSON and max_attempts > 0', () => {
    for (const table of ['outbox', 'inbox']) {
      const { definitions, constraints } = columnsOf(table);
      const checks = [...definitions.map((d) => d.check), ...constraints].filter(Boolean);
      const named = checks.map((c) => (c as { constraint?: string }).constraint);
      expect(named).toEqual(
        expect.arrayContaining([
          `${table}_payload_json_ck`,
          `${table}_headers_json_ck`,
          `${table}_max_attempts_ck`,
        ]),
      );
      expect(JSON.stringify(checks).match(/"ISJSON"/g)).toHaveLength(2);
    }
  });

  /** [index, table, columns, filtered] as SCHEMA.md lists them. */
  const INDEXES = [
    ['outbox_due_unkeyed', 'outbox', ['scheduled_at', 'id'], "state = N'pending' AND [key] IS NULL"],
    [
      'outbox_active_key',
      'outbox',
      ['key', 'id'],
      "state IN (N'pending', N'processing') AND [key] IS NOT NULL",
    ],
    ['outbox_lease', 'outbox', ['lease_until'], "state = N'processing'"],
    ['outbox_state_updated', 'outbox', ['state', 'updated_at'], undefined],
    ['inbox_due', 'inbox', ['source', 'scheduled_at', 'id'], "state = N'pending'"],
    ['inbox_lease', 'inbox', ['lease_until'], "state = N'processing'"],
    ['inbox_state_updated', 'inbox', ['state', 'updated_at'], undefined],
  ] as const;

  it.each(INDEXES)(
    'creates index %s on %s (%s), filtered as SCHEMA.md says',
    (name, table, columns, filter) => {
      const statement = statements.find((s) => s.startsWith(`CREATE INDEX ${name} `)) ?? '';
      const ast = first(checkTsql(statement).parsed.ast);

      expect(ast.index).toBe(name);
      expect(ast.table).toEqual(expect.objectContaining({ db: SCHEMA, table }));
      expect((ast.index_columns as { column: string }[]).map((c) => c.column)).toEqual(columns);
      expect(ast.where === null || ast.where === undefined).toBe(filter === undefined);
      if (filter) expect(statement.replace(/\s+/g, ' ')).toContain(`WHERE ${filter};`);
    },
  );
});
