/**
 * Message ids of outbox rows (migration 0005, `withMessageIds`), on PostgreSQL and on PGlite: unique across schemas
 * although row ids are not, the same on every claim of a row and in every process, new after a schema reset, and a
 * clear failure before the migration.
 */
import { PGlite } from '@electric-sql/pglite';
import {
  type ClaimedOutboxRow,
  INSTALL_ID_MIGRATION,
  isMissingInstallIdError,
  MESSAGE_UID_MIGRATION,
  type Store,
  StoreError,
} from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName, testPool } from '@queuebox/testing';
import { afterAll, describe, expect, it } from 'vitest';
import {
  createPgExecutor,
  createPgliteExecutor,
  createPostgresStore,
  MIGRATIONS,
  runMigrations,
  type SqlExecutor,
} from '../src/index.ts';
import { anOutboxMessage } from './messages.ts';

const LEASE = { leaseMs: 60_000 };
/** <install id>-<row id>-<uid>: every row these tests claim was written after migration 0009. */
const MESSAGE_ID = /^[0-9a-f]{32}-\d+-[0-9a-f]{32}$/;

const schemas: string[] = [];
dropSchemasAfterPass(() => schemas);

interface Target {
  readonly name: string;
  /** One database for the whole describe: every store of it shares its executor's database. */
  readonly executor: () => SqlExecutor;
  readonly schema: (prefix: string) => string;
}

const targets: Target[] = [
  {
    name: 'PostgreSQL',
    executor: () => createPgExecutor(testPool(4)),
    schema: (prefix) => {
      const name = freshSchemaName(`pg_${prefix}`);
      schemas.push(name);
      return name;
    },
  },
  (() => {
    let n = 0;
    return {
      name: 'PGlite',
      executor: () => createPgliteExecutor(new PGlite()),
      schema: (prefix: string) => `${prefix}_${++n}`,
    };
  })(),
];

for (const target of targets) {
  describe(`message ids on ${target.name}`, () => {
    const executor = target.executor();
    /** Stores over the shared executor; closing one must not close it, so `close` is left to afterAll. */
    const storeOf = (schema: string): Store => ({
      ...createPostgresStore({ executor, schema }),
      close: async () => undefined,
    });
    afterAll(async () => {
      await executor.close();
    });

    const claimOne = async (store: Store): Promise<ClaimedOutboxRow> => {
      const [row] = await store.outbox.claim({ batchSize: 1, ...LEASE });
      if (!row) throw new Error('nothing claimed');
      return row as ClaimedOutboxRow;
    };

    it('differ for row 1 of two schemas: the install id is part of them', async () => {
      // Prepare: two installs (two services) in one database, each with its first outbox row.
      const orders = storeOf(target.schema('orders'));
      const billing = storeOf(target.schema('billing'));
      await orders.migrate();
      await billing.migrate();
      const [orderId] = await orders.outbox.insert([anOutboxMessage()]);
      const [billingId] = await billing.outbox.insert([anOutboxMessage()]);

      // Act
      const order = await claimOne(orders);
      const bill = await claimOne(billing);

      // Assess: one row id, two message ids, each <install id>-<row id>-<uid>.
      expect(orderId).toBe('1');
      expect(billingId).toBe('1');
      expect(order.messageId).toMatch(MESSAGE_ID);
      expect(bill.messageId).toMatch(MESSAGE_ID);
      expect(order.messageId).not.toBe(bill.messageId);
      expect(order.messageId.startsWith(`${await orders.installId()}-1-`)).toBe(true);
      expect(bill.messageId.startsWith(`${await billing.installId()}-1-`)).toBe(true);
    });

    it('differ for a row id used again after the database went back in time (a restore, a failover that lost commits)', async () => {
      // Prepare: row 1 delivered; then the database loses it (as a point-in-time restore to before it would: the row
      // is gone and the identity is back), keeping the install id; the application writes another row.
      const schema = target.schema('restore');
      const store = storeOf(schema);
      await store.migrate();
      await store.outbox.insert([anOutboxMessage({ payload: { order: 'before' } })]);
      const delivered = await claimOne(store);
      await executor.query(`DELETE FROM "${schema}".outbox`);
      await executor.query(`ALTER TABLE "${schema}".outbox ALTER COLUMN id RESTART WITH 1`);
      const [again] = await store.outbox.insert([anOutboxMessage({ payload: { order: 'after' } })]);

      // Act
      const next = await claimOne(store);

      // Assess: the same install and row id, another message id, so a receiver that deduplicates does not drop it.
      expect(again).toBe(delivered.id);
      expect(next.messageId).toMatch(MESSAGE_ID);
      expect(next.messageId).not.toBe(delivered.messageId);
    });

    it('refuse to claim before migration 0009, saying to migrate, claiming nothing; a row written before keeps its old id', async () => {
      // Prepare: a schema migrated by the version before 0009, with a row written then.
      const schema = target.schema('uid_upgrade');
      const store = storeOf(schema);
      await runMigrations(executor, {
        schema,
        migrations: MIGRATIONS.filter((m) => m.version < MESSAGE_UID_MIGRATION),
      });
      const [id] = await executor
        .query<{ id: string }>(
          `INSERT INTO "${schema}".outbox (topic, payload, max_attempts) VALUES ('t', '{}', 3) RETURNING id::text AS id`,
        )
        .then((r) => r.rows.map((row) => row.id));

      // Act
      const refused = await store.outbox.claim({ batchSize: 10, ...LEASE }).catch((e: unknown) => e);
      const untouched = await executor.query<{ state: string }>(`SELECT state FROM "${schema}".outbox`);
      await store.migrate();
      const claimed = await claimOne(store);

      // Assess
      expect(refused).toBeInstanceOf(StoreError);
      expect((refused as Error).message).toMatch(
        /no outbox\.message_uid column.*migration 0009.*queuebox migrate/s,
      );
      expect(isMissingInstallIdError(refused)).toBe(true);
      expect(untouched.rows.map((r) => r.state)).toEqual(['pending']);
      expect(claimed.id).toBe(id);
      expect(claimed.messageId).toBe(`${await store.installId()}-${id}`);
    });

    it('stay the same on every claim of a row, in every process of the schema', async () => {
      // Prepare: a row claimed, retried, and claimed again by a second store (another process) over the schema.
      const schema = target.schema('retry');
      const first = storeOf(schema);
      await first.migrate();
      const [id] = await first.outbox.insert([anOutboxMessage({ maxAttempts: 5 })]);
      const claimed = await claimOne(first);
      await first.outbox.retry([
        { id: claimed.id, claimToken: claimed.claimToken ?? '', error: 'e', delayMs: 0 },
      ]);

      // Act
      const again = await claimOne(storeOf(schema));

      // Assess
      expect(again.id).toBe(id);
      expect(again.attempt).toBe(1);
      expect(again.messageId).toMatch(MESSAGE_ID);
      expect(again.messageId).toBe(claimed.messageId);
    });

    it('change when the schema is dropped and migrated again (its row ids start at 1 again)', async () => {
      // Prepare
      const schema = target.schema('reset');
      const before = storeOf(schema);
      await before.migrate();
      await before.outbox.insert([anOutboxMessage()]);
      const old = await claimOne(before);
      await executor.query(`DROP SCHEMA "${schema}" CASCADE`);

      // Act: a new store, as a restarted process would open it.
      const after = storeOf(schema);
      await after.migrate();
      await after.outbox.insert([anOutboxMessage()]);
      const renewed = await claimOne(after);

      // Assess
      expect(renewed.id).toBe(old.id);
      expect(renewed.messageId).toMatch(MESSAGE_ID);
      expect(renewed.messageId).not.toBe(old.messageId);
    });

    it('refuse to claim before migration 0005, saying to migrate, and work once it ran', async () => {
      // Prepare: a schema migrated by the version before 0005, with a row written then.
      const schema = target.schema('upgrade');
      const store = storeOf(schema);
      await runMigrations(executor, {
        schema,
        migrations: MIGRATIONS.filter((m) => m.version < INSTALL_ID_MIGRATION),
      });
      const [id] = await store.outbox.insert([anOutboxMessage()]);

      // Act
      const refused = await store.outbox.claim({ batchSize: 10, ...LEASE }).catch((e: unknown) => e);
      // (Read by hand: the store's reads select message_uid, which 0009 adds.)
      const untouched = (
        await executor.query<{ state: string }>(`SELECT state FROM "${schema}".outbox WHERE id = $1`, [id])
      ).rows[0];
      const report = await store.migrate();
      const claimed = await claimOne(store);

      // Assess: the claim failed before claiming anything; the upgrade's migration gave the schema its id.
      expect(refused).toBeInstanceOf(StoreError);
      expect((refused as Error).message).toMatch(/has no install id.*migration 0005.*queuebox migrate/s);
      expect((refused as StoreError).context).toMatchObject({ schema, migration: 5 });
      expect(untouched?.state).toBe('pending');
      expect(report.applied.map((m) => m.version)).toEqual(
        MIGRATIONS.filter((m) => m.version >= INSTALL_ID_MIGRATION).map((m) => m.version),
      );
      expect(report.applied[0]?.version).toBe(INSTALL_ID_MIGRATION);
      expect(claimed.id).toBe(id);
      expect(claimed.messageId).toBe(`${await store.installId()}-${id}`);
    });

    it('hold one install row of 32 lower-case hex digits, which the table keeps the only one', async () => {
      // Prepare
      const schema = target.schema('one_row');
      const store = storeOf(schema);
      await store.migrate();

      // Act
      const installId = await store.installId();
      const second = await executor
        .query(`INSERT INTO "${schema}".install (id) VALUES ($1)`, ['0'.repeat(32)])
        .catch((e: unknown) => e);
      const upper = await executor
        .query(`UPDATE "${schema}".install SET id = upper(id)`)
        .catch((e: unknown) => e);

      // Assess
      expect(installId).toMatch(/^[0-9a-f]{32}$/);
      expect(second).toBeInstanceOf(StoreError);
      // (A random id of 32 decimal digits, which upper() leaves alone, has a chance of 16^-32 · 10^32.)
      expect(upper).toBeInstanceOf(StoreError);
    });
  });
}
