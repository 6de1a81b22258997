/**
 * A migration's wait for a table's lock is bounded per try on a real SQL Server (found by @queuebox/testing's
 * findSqlServer; skipped with the reason when there is none, as on a machine without a container runtime). A schema
 * change waiting for its Sch-M lock behind a long transaction queues every later lock request on the table behind
 * it, the application's inserts included; before, it waited without a bound (LOCK_TIMEOUT -1), and so did they.
 */
import type { MigrationProgress } from '@queuebox/core';
import { dropSqlServerSchemaStatement, findSqlServer, freshSchemaName } from '@queuebox/testing';
import mssql from 'mssql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConnectionString } from '../src/connection-string.ts';
import { createSqlServerExecutor } from '../src/executor.ts';
import { MIGRATIONS } from '../src/migrations.generated.ts';
import { MIGRATION_LOCK_TIMEOUT_MAX_MS, runMigrations } from '../src/migrator.ts';

const sqlserver = await findSqlServer();
const skipReason = sqlserver.available ? undefined : sqlserver.reason;
if (skipReason !== undefined) console.info(`[sqlserver migration lock wait] skipped — ${skipReason}`);

describe.skipIf(skipReason !== undefined)('SQL Server migrations and table locks', () => {
  const pools: mssql.ConnectionPool[] = [];
  const schemas: string[] = [];
  const pool = async () => {
    if (!sqlserver.available) throw new Error(`SQL Server is unavailable: ${sqlserver.reason}`);
    const p = new mssql.ConnectionPool(parseConnectionString(sqlserver.url));
    pools.push(p);
    await p.connect();
    return p;
  };
  let admin: mssql.ConnectionPool;
  beforeAll(async () => {
    admin = await pool();
  });
  afterAll(async () => {
    for (const schema of schemas) {
      const drop = dropSqlServerSchemaStatement(schema);
      await admin.request().input('schema', mssql.NVarChar(128), drop.values.schema).query(drop.text);
    }
    await Promise.allSettled(pools.map((p) => p.close()));
  });

  it('a migration waits for a table lock a bounded time per try, so inserts queued behind it go on, and runs again', async () => {
    // Prepare: the schema at 0008; a long transaction holds a row lock in the outbox (an application's).
    const schema = freshSchemaName('mssql_mig_lockwait');
    schemas.push(schema);
    const executor = createSqlServerExecutor(await pool());
    await runMigrations(executor, { schema, migrations: MIGRATIONS.filter((m) => m.version <= 8) });
    const t = `[${schema}].[outbox]`;
    const holder = new mssql.Transaction(await pool());
    await holder.begin();
    await new mssql.Request(holder).query(
      `INSERT INTO ${t} (topic, payload, max_attempts) VALUES (N'long', N'{}', 3)`,
    );
    const app = await pool();

    // Act: 0009's ALTER TABLE waits for the holder's lock; an application inserts meanwhile. Without a bound the
    // insert queued behind the ALTER until the holder ended, and the holder here ends only after the insert.
    const events: MigrationProgress[] = [];
    const migrating = runMigrations(executor, { schema, onMigration: (p) => events.push(p) });
    await new Promise((resolve) => setTimeout(resolve, 500));
    const inserted = await Promise.race([
      app
        .request()
        .query(`INSERT INTO ${t} (topic, payload, max_attempts) VALUES (N'app', N'{}', 3)`)
        .then(() => 'inserted'),
      new Promise((resolve) => setTimeout(() => resolve('still waiting'), 2 * MIGRATION_LOCK_TIMEOUT_MAX_MS)),
    ]);
    await holder.commit();
    const report = await migrating;

    // Assess: the insert went through while the holder still held its lock, and the migration tried again.
    expect(inserted).toBe('inserted');
    expect(events.map((e) => e.phase)).toContain('retrying');
    expect(report.current).toBe(Math.max(...MIGRATIONS.map((m) => m.version)));
    await executor.close();
  }, 120_000);
});
