/**
 * A schema a newer QueueBox migrated (a version above every one this version knows) on a real SQL Server (found by
 * @queuebox/testing's findSqlServer; skipped with the reason when there is none): used as it is, and reported.
 */
import { randomBytes } from 'node:crypto';
import { dropSqlServerSchemaStatement, findSqlServer } from '@queuebox/testing';
import mssql from 'mssql';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConnectionString } from '../src/connection-string.ts';
import { createSqlServerExecutor } from '../src/executor.ts';
import { MIGRATIONS } from '../src/migrations.generated.ts';
import { runMigrations } from '../src/migrator.ts';

const sqlserver = await findSqlServer();
const skipReason = sqlserver.available ? undefined : sqlserver.reason;
if (skipReason !== undefined) console.info(`[sqlserver newer schema] skipped — ${skipReason}`);

describe.skipIf(skipReason !== undefined)('SQL Server runMigrations on a newer schema', () => {
  const schema = `lfix_mssql_newer_${randomBytes(4).toString('hex')}`;
  let pool: mssql.ConnectionPool | undefined;
  afterAll(async () => {
    if (pool === undefined) return;
    const drop = dropSqlServerSchemaStatement(schema);
    await pool.request().input('schema', mssql.NVarChar(128), drop.values.schema).query(drop.text);
    await pool.close();
  });

  it('keeps the schema as it is and reports the newer version', async () => {
    // Prepare: every migration applied, then one from the future.
    if (!sqlserver.available) throw new Error(`SQL Server is unavailable: ${sqlserver.reason}`);
    pool = new mssql.ConnectionPool(parseConnectionString(sqlserver.url));
    await pool.connect();
    const executor = createSqlServerExecutor(pool);
    await runMigrations(executor, { schema });
    await pool
      .request()
      .query(`INSERT INTO [${schema}].[schema_migrations] (version, name) VALUES (42, N'from_the_future')`);
    // Act
    const report = await runMigrations(executor, { schema });
    // Assess
    const latest = Math.max(...MIGRATIONS.map((m) => m.version));
    expect(report).toEqual({ applied: [], current: 42, newer: { applied: 42, known: latest } });
  });
});
