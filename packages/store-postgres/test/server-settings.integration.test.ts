/**
 * Settings a DBA may have made for the database, the role or the server (an RDS parameter group, ALTER ... SET,
 * PGOPTIONS), set here through the URL's `options`, which pg sends at start-up as PGOPTIONS would:
 * - a default isolation of serializable failed claims and settles with 40001 under contention (a settle that failed
 *   so left its delivered rows processing for their lease: delivered again, their keys held);
 * - a read-only session (a standby reached after a failover) answered the ping and failed every write, for as long
 *   as the pool kept the connection;
 * - a server lock_timeout failed a migration waiting for another migrator, and a role with only the rights to read
 *   and write the tables could not start on a schema another role migrated (CREATE SCHEMA checks the database's
 *   CREATE privilege first).
 */
import { randomUUID } from 'node:crypto';
import { MessageState, MigrationError, StoreError, StoreUnavailableError } from '@queuebox/core';
import { freshSchemaName, requireServices } from '@queuebox/testing';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createPgExecutor } from '../src/executor.ts';
import { MIGRATIONS, openPostgresStore } from '../src/index.ts';
import { SESSION_SETTINGS } from '../src/store.ts';
import { useMigratedSchema } from './support/migrated-schema.ts';

const needs = await requireServices('store-postgres: server settings', ['postgres']);

describe.skipIf(needs.skipReason)('server and role settings', () => {
  const url = needs.url.postgres;
  const { schema, opened } = useMigratedSchema(url, 'pg_settings');

  const withOptions = (options: string, base = url) => {
    const parsed = new URL(base);
    parsed.searchParams.set('options', options);
    return parsed.toString();
  };
  const open = async (storeUrl: string, poolSize = 2, storeSchema = schema) => {
    const store = await openPostgresStore({ url: storeUrl, schema: storeSchema, poolSize });
    opened.push(store);
    return store;
  };
  async function sql<T extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<T[]> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return (await client.query<T>(text, values)).rows;
    } finally {
      await client.end();
    }
  }

  it('claims and settles under a default isolation of serializable without serialization failures', async () => {
    // Prepare: 400 rows of 40 keys, four claimers side by side on a store whose sessions default to serializable
    const store = await open(withOptions('-c default_transaction_isolation=serializable'), 8);
    const topic = `iso.${randomUUID()}`;
    await store.outbox.insert(
      Array.from({ length: 400 }, (_, i) => ({ topic, key: `k${i % 40}`, payload: { i }, maxAttempts: 3 })),
    );
    const failures: unknown[] = [];

    // Act
    const claimer = async () => {
      for (let idle = 0; idle < 20; ) {
        try {
          const rows = await store.outbox.claim({ batchSize: 25, leaseMs: 60_000 });
          if (rows.length === 0) {
            idle += 1;
            await new Promise((resolve) => setTimeout(resolve, 5));
            continue;
          }
          idle = 0;
          await store.outbox.markSent(
            rows.map((r) => ({ id: r.id, claimToken: r.claimToken as string, destination: 'd' })),
          );
        } catch (error) {
          failures.push(error);
        }
      }
    };
    await Promise.all([claimer(), claimer(), claimer(), claimer()]);

    // Assess
    expect(failures.map((f) => (f as Error).message)).toEqual([]);
    const [counts] = await sql<{ sent: number }>(
      `SELECT count(*) FILTER (WHERE state = 'sent')::int AS sent FROM "${schema}".outbox WHERE topic = $1`,
      [topic],
    );
    expect(counts?.sent).toBe(400);
  });

  it('runs the very first statements of a pool read committed too, while the set-up that tells the default runs', async () => {
    // Prepare: a pool whose sessions default to serializable, three statements before any connection was set up
    const pool = new pg.Pool({
      connectionString: withOptions('-c default_transaction_isolation=serializable'),
      max: 4,
    });
    const executor = createPgExecutor(pool, { sessionSetup: SESSION_SETTINGS });
    const isolation = "SELECT current_setting('transaction_isolation') AS iso";
    try {
      // Act
      const first = await Promise.all([1, 2, 3].map(() => executor.query<{ iso: string }>(isolation)));
      const later = await executor.query<{ iso: string }>(isolation);

      // Assess
      expect(first.map((r) => r.rows[0]?.iso)).toEqual([
        'read committed',
        'read committed',
        'read committed',
      ]);
      expect(later.rows[0]?.iso).toBe('read committed');
    } finally {
      await executor.close();
    }
  });

  it('plans a named statement again under a serializable default when the session had lost it (no DEALLOCATE fails its transaction)', async () => {
    // Prepare: one connection, a clock the test moves; the session loses the name (what a pooler's server
    // connection looks like: PgBouncer 1.21+ keeps prepared statements under names of its own)
    const pool = new pg.Pool({
      connectionString: withOptions('-c default_transaction_isolation=serializable'),
      max: 1,
    });
    let clock = 0;
    const executor = createPgExecutor(pool, {
      sessionSetup: SESSION_SETTINGS,
      replanAfterMs: 1000,
      now: () => clock,
    });
    try {
      await executor.query('SELECT $1::int AS n', [1], { name: 'queuebox_probe_lost' });
      await executor.query('DEALLOCATE ALL');
      clock += 2000;

      // Act
      const again = await executor.query<{ n: number }>('SELECT $1::int AS n', [2], {
        name: 'queuebox_probe_lost',
      });

      // Assess
      expect(again.rows).toEqual([{ n: 2 }]);
    } finally {
      await executor.close();
    }
  });

  it('takes a read-only session (a standby after a failover) for an outage: the ping fails, a write is unavailable', async () => {
    const store = await open(withOptions('-c default_transaction_read_only=on'));

    await expect(store.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(store.outbox.insert([{ topic: 'ro', payload: {}, maxAttempts: 3 }])).rejects.toBeInstanceOf(
      StoreUnavailableError,
    );
  });

  it('throws a read-only session away at the ping, so the next ping opens a new one (the endpoint moved to the writer)', async () => {
    // Prepare: a role whose sessions start read-only, as every session on a reader does.
    const role = `t_ro_${randomUUID().slice(0, 8)}`;
    await sql(`CREATE ROLE "${role}" LOGIN`);
    const roleUrl = new URL(url);
    roleUrl.username = role;
    const store = await openPostgresStore({ url: roleUrl.toString(), schema, poolSize: 1 });
    try {
      await sql(`ALTER ROLE "${role}" SET default_transaction_read_only = on`);
      await expect(store.ping()).rejects.toBeInstanceOf(StoreUnavailableError);

      // Act: the database takes writes again for new sessions (a DNS flip to the writer keeps old ones on the reader).
      await sql(`ALTER ROLE "${role}" RESET default_transaction_read_only`);

      // Assess: the read-only session did not go back to the pool (an outside failover audit: reused at every ping,
      // the runtime never started).
      await expect(store.ping()).resolves.toBeUndefined();
    } finally {
      await store.close();
      await sql(`DROP ROLE "${role}"`);
    }
  });

  it("migrates past a server lock_timeout while another migrator holds the schema's lock", async () => {
    // Prepare: another migrator (a second replica starting) holds the advisory lock for 300 ms
    const fresh = freshSchemaName('pg_settings_lock');
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
        `queuebox.migrate:${fresh}`,
      ]);
      const store = await openPostgresStore({ url: withOptions('-c lock_timeout=10'), schema: fresh });
      opened.push(store);
      const release = new Promise((resolve) => setTimeout(resolve, 300)).then(() => holder.query('COMMIT'));

      // Act
      const report = await store.migrate();
      await release;

      // Assess
      expect(report.current).toBeGreaterThanOrEqual(8);
    } finally {
      await holder.end();
      await sql(`DROP SCHEMA IF EXISTS "${fresh}" CASCADE`);
    }
  });

  it('starts with a role that may only read and write the tables, on a schema another role migrated', async () => {
    // Prepare: a role without CREATE on the database, granted the tables alone
    const role = `t_pg_dml_${randomUUID().slice(0, 8)}`;
    await sql(`CREATE ROLE ${role} LOGIN`);
    try {
      await sql(`GRANT USAGE ON SCHEMA "${schema}" TO ${role}`);
      await sql(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${schema}" TO ${role}`);
      const parsed = new URL(url);
      parsed.username = role;
      const store = await open(parsed.toString());

      // Act
      const report = await store.migrate();
      const [id] = await store.outbox.insert([{ topic: 'dml', payload: {}, maxAttempts: 3 }]);
      // Inbox stores go through the group commit's statement, which must need no privilege on the id sequences
      const stored = await Promise.all(
        ['k-2', 'k-10'].map((key) =>
          store.inbox.store({ source: 'dml', idempotencyKey: key, payload: {}, maxAttempts: 3 }),
        ),
      );

      // Assess
      expect(report.applied).toEqual([]);
      expect((await store.outbox.get(id as string))?.state).toBe(MessageState.Pending);
      expect(stored.map((r) => r.status)).toEqual(['stored', 'stored']);
    } finally {
      for (const store of opened.splice(0)) await store.close();
      await sql(`DROP OWNED BY ${role}`);
      await sql(`DROP ROLE ${role}`);
    }
  });

  /** A login role granted `grants` (run with ROLE replaced by its name); answers a store opened as it. */
  async function asRole(grants: string[], storeSchema = schema) {
    const role = `t_pg_dml_${randomUUID().slice(0, 8)}`;
    await sql(`CREATE ROLE ${role} LOGIN`);
    for (const grant of grants) await sql(grant.replaceAll('ROLE', role));
    const parsed = new URL(url);
    parsed.username = role;
    return { role, store: await open(parsed.toString(), 2, storeSchema) };
  }

  it('says which grant is missing when the role may not read the install table', async () => {
    // Prepare: the two tables and the version table, not install (an outside audit's DBA granted table by table)
    const { role, store } = await asRole([
      `GRANT USAGE ON SCHEMA "${schema}" TO ROLE`,
      `GRANT SELECT, INSERT, UPDATE, DELETE ON "${schema}".outbox, "${schema}".inbox TO ROLE`,
      `GRANT SELECT ON "${schema}".schema_migrations TO ROLE`,
    ]);
    try {
      // Act
      const failure = await store.installId().then(
        () => undefined,
        (error: unknown) => error,
      );

      // Assess
      expect(failure).toBeInstanceOf(StoreError);
      expect((failure as Error).message).toContain(`may not read "${schema}".install: grant it SELECT`);
      expect((failure as StoreError).context.sqlState).toBe('42501');
    } finally {
      for (const each of opened.splice(0)) await each.close();
      await sql(`DROP OWNED BY ${role}`);
      await sql(`DROP ROLE ${role}`);
    }
  });

  it('says to migrate as the owner when the role may not apply a pending migration', async () => {
    // Prepare: a schema another role migrated, with its last migration not yet applied, and a role that may create
    // schemas in the database but owns nothing
    const fresh = freshSchemaName('pg_settings_owner');
    const owner = await open(url, 2, fresh);
    await owner.migrate();
    const last = Math.max(...MIGRATIONS.map((m) => m.version));
    await sql(`DELETE FROM "${fresh}".schema_migrations WHERE version = $1`, [last]);
    const database = new URL(url).pathname.slice(1);
    const { role, store } = await asRole(
      [
        `GRANT CREATE ON DATABASE "${database}" TO ROLE`,
        `GRANT USAGE, CREATE ON SCHEMA "${fresh}" TO ROLE`,
        `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${fresh}" TO ROLE`,
      ],
      fresh,
    );
    try {
      // Act
      const failure = await store.migrate().then(
        () => undefined,
        (error: unknown) => error,
      );

      // Assess
      expect(failure).toBeInstanceOf(MigrationError);
      expect((failure as Error).message).toMatch(/must be owner/);
      expect((failure as Error).message).toContain(
        'apply the migrations as a role that may, the owner of the schema',
      );
    } finally {
      for (const each of opened.splice(0)) await each.close();
      await sql(`DROP SCHEMA IF EXISTS "${fresh}" CASCADE`);
      await sql(`REVOKE CREATE ON DATABASE "${database}" FROM ${role}`);
      await sql(`DROP OWNED BY ${role}`);
      await sql(`DROP ROLE ${role}`);
    }
  });
});
