import { readFileSync } from 'node:fs';
import { ConfigError, MigrationError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import {
  DIALECT_TARGETS,
  readMigrationFiles,
  renderMigrationsModule,
} from '../../../scripts/embed-migrations.ts';
import type { QueryResult, SqlExecutor } from '../src/executor.ts';
import { MIGRATIONS } from '../src/migrations.generated.ts';
import {
  acquireMigrationLock,
  boundedBatch,
  MIGRATION_LOCK_TIMEOUT_MAX_MS,
  migrationLockResource,
  migrationLockTimeoutMs,
  renderMigration,
  runMigrations,
  SCHEMA_PLACEHOLDER,
  splitBatches,
  withNewerSchema,
} from '../src/migrator.ts';
import { quoteSchema, tablesOf } from '../src/schema-name.ts';

const root = new URL('../../../', import.meta.url);
const init = MIGRATIONS.find((m) => m.version === 1)?.sql ?? '';

describe('schema placeholder substitution', () => {
  it('puts the schema name wherever the migration writes $(schema), and nothing of $(…) remains', () => {
    const rendered = renderMigration(init, 'tenant_42');

    expect(init.split(SCHEMA_PLACEHOLDER).length - 1).toBeGreaterThan(10);
    expect(rendered).not.toContain('$(');
    expect(rendered).toContain('CREATE TABLE [tenant_42].[outbox] (');
    expect(rendered).toContain("IF SCHEMA_ID(N'tenant_42') IS NULL EXEC(N'CREATE SCHEMA [tenant_42]');");
  });

  it.each([
    ['a closing bracket', 'x]; DROP TABLE users; --'],
    ['a quote', "x'); DROP TABLE users; --"],
    ['a dot', 'dbo.outbox'],
    ['a space', 'my schema'],
    ['a leading digit', '1queuebox'],
    ['a hyphen', 'queue-box'],
    ['non-ASCII letters', 'schéma'],
    ['nothing', ''],
    ['64 characters', `q${'x'.repeat(63)}`],
  ])('refuses a schema name with %s', (_what, schema) => {
    expect(() => renderMigration(init, schema)).toThrow(ConfigError);
    expect(() => tablesOf(schema)).toThrow(ConfigError);
  });

  it('accepts a 63-character name with underscores and digits, quoted in brackets', () => {
    const schema = `_Q${'9'.repeat(61)}`;

    expect(quoteSchema(schema)).toBe(`[${schema}]`);
    expect(renderMigration(init, schema)).toContain(`[${schema}].[inbox]`);
  });

  it('names the refused value and the config path', () => {
    try {
      renderMigration(init, 'bad name');
      expect.unreachable();
    } catch (error) {
      expect((error as ConfigError).issues).toEqual([
        {
          path: 'database.schema',
          message: expect.stringContaining('"bad name" is not a valid schema name'),
        },
      ]);
    }
  });

  it('refuses a migration that uses a sqlcmd variable nothing fills', () => {
    expect(() => renderMigration('CREATE TABLE [$(schema)].[t_$(suffix)] (a INT);', 'queuebox')).toThrow(
      MigrationError,
    );
  });
});

describe('the migration lock', () => {
  it('names one lock for a schema however its letters are cased, as SQL Server resolves the schema', () => {
    // Prepare: two migrators of one schema, configured `QueueBox` and `queuebox` (one schema under a
    // case-insensitive collation; sp_getapplock compares resource names binary).
    const first = acquireMigrationLock('QueueBox', 1000);
    const second = acquireMigrationLock('queuebox', 1000);

    // Assess
    expect(first.values.resource?.value).toBe('queuebox.migrate:queuebox');
    expect(second.values.resource?.value).toBe(first.values.resource?.value);
    expect(migrationLockResource('Tenant_A1')).toBe('queuebox.migrate:tenant_a1');
  });
});

describe('GO batches', () => {
  it('splits on lines that hold only GO, in any case, and drops empty batches', () => {
    const script =
      'CREATE TABLE a (x INT);\nGO\n\n  go  \nCREATE VIEW v AS SELECT x FROM a;\nGO -- done\n-- only a comment\n';

    expect(splitBatches(script)).toEqual(['CREATE TABLE a (x INT);', 'CREATE VIEW v AS SELECT x FROM a;']);
  });

  it('leaves GO inside a line alone', () => {
    expect(splitBatches("SELECT N'GO' AS go_column;")).toEqual(["SELECT N'GO' AS go_column;"]);
  });
});

describe('migrations/sqlserver', () => {
  const postgres = readFileSync(new URL('migrations/postgres/0001_init.sql', root), 'utf8');
  const sqlserver = readFileSync(new URL('migrations/sqlserver/0001_init.sql', root), 'utf8');

  it('is embedded as scripts/embed-migrations.ts generates it', () => {
    const target = DIALECT_TARGETS.find((t) => t.dialect === 'sqlserver');
    if (!target) throw new Error('embed-migrations.ts has no sqlserver target');
    const files = readMigrationFiles(new URL(target.folder, root).pathname);
    const generated = readFileSync(new URL(target.module, root), 'utf8');

    expect(generated).toBe(renderMigrationsModule(target, files));
    expect(MIGRATIONS.map((m) => [m.version, m.name])).toEqual([
      [1, 'init'],
      [2, 'wake_up_triggers'],
      [3, 'exact_keys_and_source_leases'],
      [5, 'install_id'],
      [6, 'inbox_active_aggregate'],
      [7, 'dead_rows_and_autovacuum'],
      [8, 'admin_list_indexes'],
      [9, 'message_uid'],
    ]);
  });

  /** `name … (n)` column lines of a CREATE TABLE of either dialect: [name, width or null]. */
  function columns(sql: string, table: string): [string, number | null][] {
    const body =
      new RegExp(`CREATE TABLE [^\\n]*\\b${table}\\]? \\(\\n([\\s\\S]*?)\\n\\);`).exec(sql)?.[1] ?? '';
    return body
      .split('\n')
      .map((line) => /^\s+\[?([a-z_]+)\]?\s+([A-Z0-9]+)(?:\((\d+)\))?/.exec(line))
      .filter((m): m is RegExpExecArray => m !== null && m[1] !== undefined && !/^CONSTRAINT$/i.test(m[1]))
      .map((m) => [m[1] ?? '', /CHAR$/.test(m[2] ?? '') && m[3] ? Number(m[3]) : null]);
  }

  it.each(['outbox', 'inbox'])(
    'declares the %s columns of the PostgreSQL migration, in order, with the same widths',
    (table) => {
      expect(columns(sqlserver, table)).toEqual(columns(postgres, table));
      expect(columns(sqlserver, table).length).toBeGreaterThan(15);
    },
  );

  it('uses the index and constraint names of the PostgreSQL migration', () => {
    const names = (sql: string) =>
      [...sql.matchAll(/(?:CREATE INDEX|CONSTRAINT) ([a-z_]+)/g)]
        .map((m) => m[1])
        .filter((n) => !/_(df|json_ck|pkey)$/.test(n ?? ''));

    expect(names(sqlserver)).toEqual(names(postgres));
  });
});

describe('the bound of a migration statement’s wait for a table lock', () => {
  it('waits 1.2 s at the first try, half as long again at each later one, and 5 s at most', () => {
    expect([1, 2, 3, 4, 5, 6, 20].map(migrationLockTimeoutMs)).toEqual([
      1200, 1800, 2700, 4050, 5000, 5000, 5000,
    ]);
    expect(MIGRATION_LOCK_TIMEOUT_MAX_MS).toBe(5000);
  });

  it('sets LOCK_TIMEOUT first in every batch of every migration, in the batch itself (sp_executesql restores it after)', () => {
    for (const migration of MIGRATIONS) {
      for (const batch of splitBatches(renderMigration(migration.sql, 'queuebox'))) {
        const bounded = boundedBatch(batch, 1800);
        expect(bounded, `${migration.version}`).toBe(`SET LOCK_TIMEOUT 1800;\n${batch}`);
      }
    }
  });

  it('leaves alone a batch that must begin with its CREATE, such as a view or a trigger, even after comments', () => {
    const view = '-- the view\nCREATE VIEW [q].[v] AS SELECT 1 AS one;';
    const trigger = 'CREATE OR ALTER TRIGGER [q].[t] ON [q].[outbox] AFTER INSERT AS SELECT 1;';

    expect(boundedBatch(view, 1200)).toBe(view);
    expect(boundedBatch(trigger, 1200)).toBe(trigger);
    expect(boundedBatch('ALTER TABLE [q].[outbox] ADD x INT NULL;', 1200)).toBe(
      'SET LOCK_TIMEOUT 1200;\nALTER TABLE [q].[outbox] ADD x INT NULL;',
    );
  });
});

describe('a schema a newer QueueBox migrated', () => {
  const known = MIGRATIONS.map((m) => ({ version: m.version }));
  const latest = Math.max(...MIGRATIONS.map((m) => m.version));

  it('is reported with the version it is at and the latest this version knows, not refused', () => {
    expect(withNewerSchema({ applied: [], current: 42 }, known)).toEqual({
      applied: [],
      current: 42,
      newer: { applied: 42, known: latest },
    });
  });

  it('is not reported at or below the latest known version', () => {
    expect(withNewerSchema({ applied: [], current: latest }, known)).toEqual({
      applied: [],
      current: latest,
    });
    expect(withNewerSchema({ applied: [], current: 0 }, [])).toEqual({ applied: [], current: 0 });
  });
});

/**
 * An executor that answers as a server whose schema already holds a `schema_migrations` with `columns` (name and
 * TYPE_NAME, in order) and the versions `versions`: the lock is granted, `IF OBJECT_ID(…) IS NULL CREATE TABLE`
 * creates nothing, and every other batch answers no rows.
 */
function aSchemaWithVersionTable(columns: readonly [string, string][], versions: readonly number[]) {
  const sent: string[] = [];
  const executor: SqlExecutor = {
    async query<R>(text: string) {
      sent.push(text);
      const rows = text.includes('FROM sys.columns AS c')
        ? columns.map(([name, type]) => ({ name, type }))
        : text.includes('sp_getapplock')
          ? [{ status: 0 }]
          : /SELECT m\.version FROM/.test(text)
            ? versions.map((version) => ({ version }))
            : [];
      return { rows, rowCount: rows.length } as unknown as QueryResult<R>;
    },
    transaction: (fn) => fn(executor),
    close: async () => {},
  };
  return { executor, sent };
}

describe("a schema whose schema_migrations is another tool's", () => {
  const own: [string, string][] = [
    ['version', 'int'],
    ['name', 'nvarchar'],
    ['applied_at', 'datetime2'],
  ];

  it.each([
    [
      'golang-migrate',
      [
        ['version', 'bigint'],
        ['dirty', 'bit'],
      ],
      'version bigint, dirty bit',
    ],
    ['dbmate', [['version', 'nvarchar']], 'version nvarchar'],
    ['Rails', [['version', 'nvarchar']], 'version nvarchar'],
    [
      'a table with an extra column',
      [...own, ['checksum', 'nvarchar']],
      'version int, name nvarchar, applied_at datetime2, checksum nvarchar',
    ],
    [
      'bigint versions',
      [['version', 'bigint'], own[1], own[2]],
      'version bigint, name nvarchar, applied_at datetime2',
    ],
  ] as [string, [string, string][], string][])(
    "is refused before anything is locked or created (%s), naming its columns as PostgreSQL's migrator does",
    async (_tool, columns, named) => {
      // Prepare: another tool's twelve versions.
      const { executor, sent } = aSchemaWithVersionTable(
        columns,
        Array.from({ length: 12 }, (_, i) => i + 1),
      );

      // Act
      const run = runMigrations(executor, { schema: 'dbo' });

      // Assess
      await expect(run).rejects.toThrow(MigrationError);
      await expect(run).rejects.toThrow(
        `Schema dbo has a table schema_migrations that is not QueueBox's (its columns: ${named}): another migration tool keeps its versions there (Rails, dbmate and golang-migrate use that name). Give QueueBox a schema of its own (database.schema)`,
      );
      expect(sent).toHaveLength(1);
      expect(sent[0]).toContain("WHERE c.object_id = OBJECT_ID(@table, N'U')");
    },
  );

  it("goes on with QueueBox's own table, and with none", async () => {
    // Prepare
    const applied = MIGRATIONS.map((m) => m.version);
    const ours = aSchemaWithVersionTable(own, applied);
    const fresh = aSchemaWithVersionTable([], applied);

    // Act
    const reports = [
      await runMigrations(ours.executor, { schema: 'dbo' }),
      await runMigrations(fresh.executor, { schema: 'dbo' }),
    ];

    // Assess
    expect(reports.map((r) => r.current)).toEqual([Math.max(...applied), Math.max(...applied)]);
    expect(ours.sent.some((t) => t.includes('sp_getapplock'))).toBe(true);
  });
});
