import type { RowId, Table } from '@queuebox/core';
import { assertSchemaName, dropPostgresSchemaStatement } from '@queuebox/testing';
import type { PostgresQuery, StoreHooks } from './store-harness.ts';

/** The harness hooks for `schema`, written once for PostgreSQL and PGlite (same SQL, different connections). */
export function createPostgresHooks(query: PostgresQuery, schema: string): StoreHooks {
  const s = `"${assertSchemaName(schema)}"`;
  const table = (t: Table) => `${s}.${t === 'outbox' ? 'outbox' : 'inbox'}`;
  const idFilter = (ids: readonly RowId[] | undefined) => (ids ? ' AND id = ANY($1::bigint[])' : '');
  const idValues = (ids: readonly RowId[] | undefined) => (ids ? [ids] : []);

  return {
    async expireLeases(t, ids) {
      const { rows } = await query(
        `UPDATE ${table(t)} SET lease_until = now() - interval '1 second'
         WHERE state = 'processing'${idFilter(ids)} RETURNING id`,
        idValues(ids),
      );
      return rows.length;
    },
    async makeDue(t, ids) {
      const { rows } = await query(
        `UPDATE ${table(t)} SET scheduled_at = now() - interval '1 second'
         WHERE state = 'pending'${idFilter(ids)} RETURNING id`,
        idValues(ids),
      );
      return rows.length;
    },
    async backdate(t, ids, ms) {
      const stamps =
        t === 'outbox'
          ? ['created_at', 'updated_at', 'scheduled_at', 'sent_at']
          : ['received_at', 'updated_at', 'scheduled_at', 'processed_at'];
      await query(
        `UPDATE ${table(t)} SET ${stamps.map((c) => `${c} = ${c} - $2::float8 * interval '1 millisecond'`).join(', ')}
         WHERE id = ANY($1::bigint[])`,
        [ids, ms],
      );
    },
    async setStateLiteral(t, id, literal) {
      const { rows } = await query(`UPDATE ${table(t)} SET state = $2 WHERE id = $1::bigint RETURNING id`, [
        id,
        literal,
      ]);
      if (rows.length !== 1) throw new Error(`setStateLiteral: no ${t} row ${id}`);
    },
    async makeUnreadable(t, id) {
      const stamp = t === 'outbox' ? 'created_at' : 'received_at';
      const { rows } = await query(
        `UPDATE ${table(t)} SET ${stamp} = '294000-01-01 00:00:00+00' WHERE id = $1::bigint RETURNING id`,
        [id],
      );
      if (rows.length !== 1) throw new Error(`makeUnreadable: no ${t} row ${id}`);
    },
    async countByState(t) {
      const { rows } = await query(`SELECT state, count(*)::int AS n FROM ${table(t)} GROUP BY state`);
      return Object.fromEntries((rows as { state: string; n: number }[]).map((r) => [r.state, r.n]));
    },
    async deleteAllRows() {
      await query(`DELETE FROM ${table('outbox')}`);
      await query(`DELETE FROM ${table('inbox')}`);
    },
    async dropSchema() {
      const { text, values } = dropPostgresSchemaStatement(schema);
      await query(text, values);
    },
  };
}

/**
 * Creates `schema` holding only golang-migrate's version table at its 12th migration (one row: the latest version
 * and whether it failed halfway), as a schema an application shares with QueueBox may hold.
 */
export async function createForeignVersionTable(query: PostgresQuery, schema: string): Promise<void> {
  const s = `"${assertSchemaName(schema)}"`;
  await query(`CREATE SCHEMA ${s}`);
  await query(
    `CREATE TABLE ${s}.schema_migrations (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL)`,
  );
  await query(`INSERT INTO ${s}.schema_migrations (version, dirty) VALUES (12, false)`);
}
