import type { RowId, Table } from '@queuebox/core';
import { assertSchemaName, dropSqlServerSchemaStatement } from '@queuebox/testing';
import mssql from 'mssql';
import type { StoreHooks } from './store-harness.ts';

/** The same hooks as `createPostgresHooks`, in T-SQL through an `mssql` pool. */
export function createSqlServerHooks(pool: mssql.ConnectionPool, schema: string): StoreHooks {
  const s = `[${assertSchemaName(schema)}]`;
  const table = (t: Table) => `${s}.${t === 'outbox' ? '[outbox]' : '[inbox]'}`;
  // Ids travel as one JSON array so a single statement serves any number of them.
  const request = (ids: readonly RowId[] | undefined) => {
    const r = pool.request();
    if (ids) r.input('ids', mssql.NVarChar(mssql.MAX), JSON.stringify(ids));
    return r;
  };
  const idFilter = (ids: readonly RowId[] | undefined) =>
    ids ? ' AND id IN (SELECT CAST([value] AS BIGINT) FROM OPENJSON(@ids))' : '';

  return {
    async expireLeases(t, ids) {
      const result = await request(ids).query(
        `UPDATE ${table(t)} SET lease_until = DATEADD(second, -1, SYSUTCDATETIME())
         WHERE state = N'processing'${idFilter(ids)}`,
      );
      return result.rowsAffected[0] ?? 0;
    },
    async makeDue(t, ids) {
      const result = await request(ids).query(
        `UPDATE ${table(t)} SET scheduled_at = DATEADD(second, -1, SYSUTCDATETIME())
         WHERE state = N'pending'${idFilter(ids)}`,
      );
      return result.rowsAffected[0] ?? 0;
    },
    async backdate(t, ids, ms) {
      const stamps =
        t === 'outbox'
          ? ['created_at', 'updated_at', 'scheduled_at', 'sent_at']
          : ['received_at', 'updated_at', 'scheduled_at', 'processed_at'];
      await request(ids)
        .input('ms', mssql.Int, ms)
        .query(
          `UPDATE ${table(t)} SET ${stamps.map((c) => `${c} = DATEADD(millisecond, -@ms, ${c})`).join(', ')}
           WHERE 1 = 1${idFilter(ids)}`,
        );
    },
    async setStateLiteral(t, id, literal) {
      const result = await pool
        .request()
        .input('id', mssql.BigInt, id)
        .input('literal', mssql.NVarChar(50), literal)
        .query(`UPDATE ${table(t)} SET state = @literal WHERE id = @id`);
      if (result.rowsAffected[0] !== 1) throw new Error(`setStateLiteral: no ${t} row ${id}`);
    },
    async makeUnreadable(t, id) {
      const check = `${t}_payload_json_ck`;
      // The constraint is switched off for one UPDATE and back on without re-reading the rows (as WITH NOCHECK).
      const result = await pool
        .request()
        .input('id', mssql.BigInt, id)
        .query(
          `ALTER TABLE ${table(t)} NOCHECK CONSTRAINT ${check};
           UPDATE ${table(t)} SET payload = N'1,2' WHERE id = @id;
           ALTER TABLE ${table(t)} CHECK CONSTRAINT ${check};`,
        );
      if (!result.rowsAffected.includes(1)) throw new Error(`makeUnreadable: no ${t} row ${id}`);
    },
    async countByState(t) {
      const result = await pool
        .request()
        .query<{ state: string; n: number }>(`SELECT state, COUNT(*) AS n FROM ${table(t)} GROUP BY state`);
      return Object.fromEntries(result.recordset.map((r) => [r.state, r.n]));
    },
    async deleteAllRows() {
      await pool.request().query(`DELETE FROM ${table('outbox')}; DELETE FROM ${table('inbox')};`);
    },
    async dropSchema() {
      const { text, values } = dropSqlServerSchemaStatement(schema);
      await pool.request().input('schema', mssql.NVarChar(128), values.schema).query(text);
    },
  };
}

/** `createForeignVersionTable` of postgres-hooks.ts in T-SQL: golang-migrate's sqlserver driver uses BIGINT and BIT. */
export async function createSqlServerForeignVersionTable(
  pool: mssql.ConnectionPool,
  schema: string,
): Promise<void> {
  const s = `[${assertSchemaName(schema)}]`;
  await pool.request().query(`EXEC(N'CREATE SCHEMA ${s}');`);
  await pool.request().query(
    `CREATE TABLE ${s}.[schema_migrations] (version BIGINT NOT NULL PRIMARY KEY, dirty BIT NOT NULL);
       INSERT INTO ${s}.[schema_migrations] (version, dirty) VALUES (12, 0);`,
  );
}
