import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import { MigrationError, type QueueBoxError } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName, testPool } from '@queuebox/testing';
import { afterAll, describe, expect, it } from 'vitest';
import {
  adminRequeueCandidatesStatement,
  createPgExecutor,
  createPgliteExecutor,
  MIGRATIONS,
  type Migration,
  runMigrations,
  type SqlExecutor,
} from '../src/index.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const schemas: string[] = [];
dropSchemasAfterPass(() => schemas);

function schemaFor(prefix: string): string {
  const name = freshSchemaName(`pg_${prefix}`);
  schemas.push(name);
  return name;
}

const executors: SqlExecutor[] = [];
function pgExecutor(max = 2): SqlExecutor {
  const executor = createPgExecutor(testPool(max));
  executors.push(executor);
  return executor;
}
afterAll(async () => {
  await Promise.all(executors.map((e) => e.close()));
});

async function versions(executor: SqlExecutor, schema: string): Promise<number[]> {
  const { rows } = await executor.query<{ version: number }>(
    `SELECT version FROM "${schema}".schema_migrations ORDER BY version`,
  );
  return rows.map((r) => r.version);
}

async function tablesOf(executor: SqlExecutor, schema: string): Promise<string[]> {
  const { rows } = await executor.query<{ table_name: string }>(
    'SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name',
    [schema],
  );
  return rows.map((r) => r.table_name);
}

describe('embedded migrations', () => {
  it('match the .sql files of migrations/postgres (run `npx tsx scripts/embed-migrations.ts` when not)', () => {
    const folder = join(root, 'migrations/postgres');
    const files = readdirSync(folder)
      .filter((f) => f.endsWith('.sql'))
      .sort()
      .map((f) => {
        const [, version, name] = /^(\d{4})_(.+)\.sql$/.exec(f) ?? [];
        return {
          version: Number(version),
          name,
          sql: readFileSync(join(folder, f), 'utf8').replace(/\r\n/g, '\n'),
        };
      });

    expect(files.length).toBeGreaterThan(0);
    expect(MIGRATIONS).toEqual(files);
  });
});

describe('runMigrations on PostgreSQL', () => {
  it('creates the schema, applies every migration once, and reports nothing to do the second time', async () => {
    const executor = pgExecutor();
    const schema = schemaFor('mig');

    const first = await runMigrations(executor, { schema });
    const second = await runMigrations(executor, { schema });

    expect(first.applied.map((m) => m.version)).toEqual(MIGRATIONS.map((m) => m.version));
    expect(second).toEqual({ applied: [], current: first.current });
    expect(await versions(executor, schema)).toEqual(MIGRATIONS.map((m) => m.version));
    expect(await tablesOf(executor, schema)).toEqual(['inbox', 'install', 'outbox', 'schema_migrations']);
  });

  it('applies each migration exactly once when several processes migrate a fresh schema at once', async () => {
    const schema = schemaFor('race');
    const racers = [pgExecutor(), pgExecutor(), pgExecutor(), pgExecutor()];

    const reports = await Promise.all(racers.map((executor) => runMigrations(executor, { schema })));

    const appliedVersions = reports.flatMap((r) => r.applied.map((m) => m.version)).sort((a, b) => a - b);
    expect(appliedVersions).toEqual(MIGRATIONS.map((m) => m.version));
    expect(reports.every((r) => r.current === MIGRATIONS.at(-1)?.version)).toBe(true);
    expect(await versions(racers[0] as SqlExecutor, schema)).toEqual(MIGRATIONS.map((m) => m.version));
  });

  /** The definition of `index` in `schema`, or undefined. */
  async function indexDefinition(executor: SqlExecutor, schema: string, index: string) {
    const { rows } = await executor.query<{ indexdef: string }>(
      'SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = $2',
      [schema, index],
    );
    return rows[0]?.indexdef;
  }

  it('0006 applies alone to a schema at 0005 that holds inbox rows, and indexes its active rows with an aggregate id', async () => {
    const executor = pgExecutor();
    const schema = schemaFor('mig6_upgrade');
    await runMigrations(executor, { schema, migrations: MIGRATIONS.filter((m) => m.version <= 5) });
    await executor.query(
      `INSERT INTO "${schema}".inbox (source, idempotency_key, aggregate_id, payload, max_attempts, state)
       SELECT 's', 'e' || g, CASE WHEN g % 3 = 0 THEN NULL ELSE 'k' || (g % 7) END, '{}', 3,
              (ARRAY['pending', 'processing', 'processed', 'dead'])[1 + g % 4]
       FROM generate_series(1, 2000) AS g`,
    );
    expect(await indexDefinition(executor, schema, 'inbox_active_aggregate')).toBeUndefined();

    const report = await runMigrations(executor, {
      schema,
      migrations: MIGRATIONS.filter((m) => m.version <= 6),
    });

    expect(report.applied).toEqual([{ version: 6, name: 'inbox_active_aggregate' }]);
    expect(await versions(executor, schema)).toEqual(
      MIGRATIONS.filter((m) => m.version <= 6).map((m) => m.version),
    );
    expect(await indexDefinition(executor, schema, 'inbox_active_aggregate')).toBe(
      `CREATE INDEX inbox_active_aggregate ON ${schema}.inbox USING btree (source, aggregate_id, id) WHERE (((state)::text = ANY ((ARRAY['pending'::character varying, 'processing'::character varying])::text[])) AND (aggregate_id IS NOT NULL))`,
    );
    // The index holds exactly the active rows with an aggregate id (read through it, as the relay's claim does).
    await executor.transaction(async (tx) => {
      await tx.query('SET LOCAL enable_seqscan = off');
      await tx.query('SET LOCAL enable_bitmapscan = off');
      const plan = await tx.query<{ 'QUERY PLAN': string }>(
        `EXPLAIN SELECT count(*) FROM "${schema}".inbox WHERE state IN ('pending', 'processing') AND aggregate_id IS NOT NULL AND source = 's'`,
      );
      expect(plan.rows.map((r) => r['QUERY PLAN']).join('\n')).toContain('inbox_active_aggregate');
      const { rows } = await tx.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${schema}".inbox WHERE state IN ('pending', 'processing') AND aggregate_id IS NOT NULL AND source = 's'`,
      );
      expect(rows[0]?.n).toBe(668);
    });
  });

  it('0009 applies alone to a schema at 0008 that holds rows, without rewriting the outbox: old rows keep no uid, new rows get one each', async () => {
    const executor = pgExecutor();
    const schema = schemaFor('mig9_upgrade');
    await runMigrations(executor, { schema, migrations: MIGRATIONS.filter((m) => m.version <= 8) });
    await executor.query(
      `INSERT INTO "${schema}".outbox (topic, payload, max_attempts) SELECT 't', '{}', 3 FROM generate_series(1, 1000)`,
    );
    const fileOf = async () =>
      (
        await executor.query<{ file: string }>(`SELECT pg_relation_filenode($1::regclass)::text AS file`, [
          `"${schema}".outbox`,
        ])
      ).rows[0]?.file;
    const before = await fileOf();

    const report = await runMigrations(executor, {
      schema,
      migrations: MIGRATIONS.filter((m) => m.version <= 9),
    });
    await executor.query(
      `INSERT INTO "${schema}".outbox (topic, payload, max_attempts) VALUES ('t', '{}', 3), ('t', '{}', 3)`,
    );

    expect(report.applied).toEqual([{ version: 9, name: 'message_uid' }]);
    // The same file: ADD COLUMN without a default and SET DEFAULT change the catalog only.
    expect(await fileOf()).toBe(before);
    const { rows } = await executor.query<{ old: number; uids: number; distinct_uids: number }>(
      `SELECT count(*) FILTER (WHERE message_uid IS NULL)::int AS old, count(message_uid)::int AS uids,
              count(DISTINCT message_uid)::int AS distinct_uids FROM "${schema}".outbox`,
    );
    expect(rows[0]).toEqual({ old: 1000, uids: 2, distinct_uids: 2 });
  });

  it('0007 applies alone to a schema at 0006: dead rows by id for the requeue, autovacuum at 1% of the rows', async () => {
    const executor = pgExecutor();
    const schema = schemaFor('mig7_upgrade');
    await runMigrations(executor, { schema, migrations: MIGRATIONS.filter((m) => m.version <= 6) });
    // 20,000 rows requeued before (pending again, the smallest ids) and sent rows, then 600 dead rows.
    await executor.query(
      `INSERT INTO "${schema}".outbox (topic, payload, max_attempts, state)
       SELECT 't', '{}', 3, CASE WHEN g <= 10000 THEN 'pending' ELSE 'sent' END FROM generate_series(1, 20000) g`,
    );
    await executor.query(
      `INSERT INTO "${schema}".outbox (topic, payload, max_attempts, state) SELECT 't', '{}', 3, 'dead' FROM generate_series(1, 600)`,
    );

    const report = await runMigrations(executor, {
      schema,
      migrations: MIGRATIONS.filter((m) => m.version <= 7),
    });
    await executor.query(`ANALYZE "${schema}".outbox`);
    const candidates = adminRequeueCandidatesStatement(schema, {}, 500);
    const plan = await executor.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN ${candidates.text}`,
      candidates.values,
    );
    const { rows: options } = await executor.query<{ relname: string; reloptions: string[] }>(
      `SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = $1 AND c.relname IN ('outbox', 'inbox') ORDER BY c.relname`,
      [schema],
    );

    expect(report.applied).toEqual([{ version: 7, name: 'dead_rows_and_autovacuum' }]);
    expect(await indexDefinition(executor, schema, 'outbox_dead')).toBe(
      `CREATE INDEX outbox_dead ON ${schema}.outbox USING btree (id) WHERE ((state)::text = 'dead'::text)`,
    );
    expect(await indexDefinition(executor, schema, 'inbox_dead')).toBeDefined();
    // A requeue's batch reads the dead rows by id, not the primary key from the smallest id.
    expect(plan.rows.map((r) => r['QUERY PLAN']).join('\n')).toContain('outbox_dead');
    const expected = [
      'autovacuum_vacuum_scale_factor=0.01',
      'autovacuum_vacuum_threshold=1000',
      'autovacuum_analyze_scale_factor=0.02',
      'autovacuum_analyze_threshold=1000',
    ];
    expect(options).toEqual([
      { relname: 'inbox', reloptions: expected },
      { relname: 'outbox', reloptions: expected },
    ]);
  });

  it('rolls a failing migration back with its version row and names the version and the SQL error', async () => {
    const executor = pgExecutor();
    const schema = schemaFor('broken');
    const migrations: Migration[] = [
      { version: 1, name: 'good', sql: 'CREATE TABLE first_table (id INT)' },
      {
        version: 2,
        name: 'broken',
        sql: 'CREATE TABLE half_done (id INT); CREATE INDEX half_done_ix ON half_done (id); SELECT no_such_column FROM half_done',
      },
      { version: 3, name: 'after', sql: 'CREATE TABLE never_reached (id INT)' },
    ];

    const error = await runMigrations(executor, { schema, migrations }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(MigrationError);
    expect((error as Error).message).toContain('0002_broken');
    expect((error as Error).message).toContain('no_such_column');
    expect((error as QueueBoxError).context).toMatchObject({ version: 2, name: 'broken', sqlState: '42703' });
    expect(await versions(executor, schema)).toEqual([1]);
    expect(await tablesOf(executor, schema)).toEqual(['first_table', 'schema_migrations']);
  });

  it('continues from the last applied version once the broken migration is fixed', async () => {
    const executor = pgExecutor();
    const schema = schemaFor('fixed');
    const good: Migration = { version: 1, name: 'good', sql: 'CREATE TABLE a (id INT)' };
    await runMigrations(executor, {
      schema,
      migrations: [good, { version: 2, name: 'two', sql: 'CREATE TABLE b (id INT REFERENCES nowhere)' }],
    }).catch(() => undefined);

    const report = await runMigrations(executor, {
      schema,
      migrations: [good, { version: 2, name: 'two', sql: 'CREATE TABLE b (id INT)' }],
    });

    expect(report).toEqual({ applied: [{ version: 2, name: 'two' }], current: 2 });
  });

  it('refuses a list that holds a version twice before touching the database', async () => {
    const executor = pgExecutor();
    const schema = schemaFor('twice');
    const migration: Migration = { version: 1, name: 'a', sql: 'SELECT 1' };

    await expect(
      runMigrations(executor, { schema, migrations: [migration, migration] }),
    ).rejects.toBeInstanceOf(MigrationError);
    const { rows } = await executor.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
    expect(rows).toEqual([]);
  });
});

// PGlite starts a WASM PostgreSQL: 28–44 s for this test under load 16 on the shared 2-core machine.
describe('runMigrations on PGlite', { timeout: 120_000 }, () => {
  it('applies the embedded migrations and leaves a failing one unrecorded', async () => {
    const executor = createPgliteExecutor(new PGlite());
    executors.push(executor);

    const report = await runMigrations(executor, { schema: 'queuebox' });
    const error = await runMigrations(executor, {
      schema: 'queuebox',
      migrations: [
        ...MIGRATIONS,
        { version: 99, name: 'broken', sql: 'CREATE TABLE x (id INT); SELECT 1/0' },
      ],
    }).catch((e: unknown) => e);

    expect(report.current).toBe(MIGRATIONS.at(-1)?.version);
    expect(error).toBeInstanceOf(MigrationError);
    expect(await versions(executor, 'queuebox')).toEqual(MIGRATIONS.map((m) => m.version));
    expect(await tablesOf(executor, 'queuebox')).toEqual(['inbox', 'install', 'outbox', 'schema_migrations']);
  });

  it('applies 0006 alone to a schema at 0005 that holds inbox rows', async () => {
    const executor = createPgliteExecutor(new PGlite());
    executors.push(executor);
    await runMigrations(executor, {
      schema: 'queuebox',
      migrations: MIGRATIONS.filter((m) => m.version <= 5),
    });
    await executor.query(
      `INSERT INTO queuebox.inbox (source, idempotency_key, aggregate_id, payload, max_attempts, state)
       VALUES ('s', 'e1', 'k', '{}', 3, 'processing'), ('s', 'e2', 'k', '{}', 3, 'pending'),
              ('s', 'e3', NULL, '{}', 3, 'pending'), ('s', 'e4', 'k', '{}', 3, 'processed')`,
    );

    const report = await runMigrations(executor, {
      schema: 'queuebox',
      migrations: MIGRATIONS.filter((m) => m.version <= 6),
    });
    const { rows } = await executor.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_indexes WHERE schemaname = 'queuebox' AND indexname = 'inbox_active_aggregate'",
    );

    expect(report.applied).toEqual([{ version: 6, name: 'inbox_active_aggregate' }]);
    expect(rows[0]?.n).toBe(1);
  });
});

describe('runMigrations on a schema a newer QueueBox migrated', () => {
  const latest = Math.max(...MIGRATIONS.map((m) => m.version));
  const newSchema = () => {
    const name = `lfix_pg_newer_${Math.random().toString(16).slice(2, 10)}`;
    schemas.push(name);
    return name;
  };

  it('keeps it as it is and reports the newer version (a rolling upgrade: old processes run on)', async () => {
    // Prepare: every migration applied, then one from the future (a newer version's 0042).
    const executor = pgExecutor();
    const schema = newSchema();
    const first = await runMigrations(executor, { schema });
    await executor.query(
      `INSERT INTO "${schema}".schema_migrations (version, name) VALUES (42, 'from_the_future')`,
    );
    // Act
    const report = await runMigrations(executor, { schema });
    // Assess: nothing applied or refused; the report says the schema is ahead of this version.
    expect(first.newer).toBeUndefined();
    expect(report).toEqual({ applied: [], current: 42, newer: { applied: 42, known: latest } });
    expect(await versions(executor, schema)).toEqual([...MIGRATIONS.map((m) => m.version), 42]);
  });

  it('reports it too when it still applies a known migration missing beside the newer one', async () => {
    // Prepare: the schema at the one before the latest, plus the future row.
    const executor = pgExecutor();
    const schema = newSchema();
    await runMigrations(executor, { schema, migrations: MIGRATIONS.filter((m) => m.version < latest) });
    await executor.query(
      `INSERT INTO "${schema}".schema_migrations (version, name) VALUES (42, 'from_the_future')`,
    );
    // Act
    const report = await runMigrations(executor, { schema });
    // Assess
    expect(report.applied.map((m) => m.version)).toEqual([latest]);
    expect(report.newer).toEqual({ applied: 42, known: latest });
  });

  it('reports nothing newer on a schema brought to this version', async () => {
    const executor = pgExecutor();
    const schema = newSchema();
    await runMigrations(executor, { schema, migrations: MIGRATIONS.filter((m) => m.version < latest) });
    const report = await runMigrations(executor, { schema });
    expect(report.newer).toBeUndefined();
    expect(report.current).toBe(latest);
  });
});

describe('runMigrations beside another tool’s schema_migrations', () => {
  it.each([
    [
      'dbmate',
      'version VARCHAR(128) PRIMARY KEY',
      "('001'), ('002'), ('003'), ('004'), ('005'), ('006'), ('007'), ('008'), ('009'), ('010'), ('011'), ('012')",
    ],
    ['golang-migrate', 'version BIGINT NOT NULL PRIMARY KEY, dirty BOOLEAN NOT NULL', '(20250101, false)'],
  ])('refuses %s’s table, naming its columns, and creates nothing', async (_tool, columns, values) => {
    // Prepare: the application's migration tool keeps its versions in the schema QueueBox is given
    const executor = pgExecutor();
    const schema = schemaFor('foreign_versions');
    await executor.query(`CREATE SCHEMA "${schema}"`);
    await executor.query(`CREATE TABLE "${schema}".schema_migrations (${columns})`);
    await executor.query(`INSERT INTO "${schema}".schema_migrations VALUES ${values}`);

    // Act: before, dbmate's twelve versions were read as QueueBox's (nothing applied, no table, "newer" reported)
    const error = await runMigrations(executor, { schema }).then(
      () => undefined,
      (e: unknown) => e,
    );

    // Assess
    expect(error).toBeInstanceOf(MigrationError);
    expect((error as Error).message).toMatch(
      new RegExp(
        `^Schema ${schema} has a table schema_migrations that is not QueueBox's \\(its columns: version `,
      ),
    );
    expect(await tablesOf(executor, schema)).toEqual(['schema_migrations']);
  });
});
