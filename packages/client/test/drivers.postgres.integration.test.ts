/**
 * enqueue through other PostgreSQL drivers and ORMs — postgres.js, Knex, Kysely, Drizzle, TypeORM, Prisma, and a pg
 * client that cannot tell its transaction status — each as the client README shows it, on a real PostgreSQL: the rows
 * commit and roll back with the library's own transaction, the key lock is held by it, and a query function that
 * runs outside a transaction is refused with nothing written.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chmodSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { PrismaPg } from '@prisma/adapter-pg';
import { outboxKeyLockName } from '@queuebox/store-postgres';
import { testPostgresUrl, useTestStore } from '@queuebox/testing';
import { sql as drizzleSql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import knex from 'knex';
import { CompiledQuery, Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import postgres from 'postgres';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueue, enqueueMany } from '../src/enqueue.ts';
import { TransactionRequiredError } from '../src/errors.ts';
import type { EnqueueMessage } from '../src/message.ts';
import { type SqlQueryable, sqlTemplate } from '../src/queryable.ts';

const db = useTestStore('client_drivers', { poolSize: 4, storePoolSize: 2 });
const options = () => ({ schema: db.schema });
const url = testPostgresUrl();

/** Thrown inside a library's transaction callback to make it roll back. */
class RollBack extends Error {}

/** One library as an application uses it: its transaction, and its connection outside any transaction. */
interface Driver {
  readonly name: string;
  open(): Promise<void>;
  /** Runs `fn` in the library's transaction, committed — or rolled back when `rollback` — when `fn` ends. */
  inTransaction(fn: (tx: SqlQueryable) => Promise<void>, rollback?: boolean): Promise<void>;
  /** The library's connection outside any transaction (each statement commits alone). */
  outside(): SqlQueryable;
  close(): Promise<void>;
}

/** Runs `fn`, then throws `RollBack` when `rollback`, so the library's transaction helper rolls back. */
async function thenMaybeRollBack(fn: () => Promise<void>, rollback: boolean): Promise<void> {
  await fn();
  if (rollback) throw new RollBack();
}

/** Swallows the `RollBack` a rolled-back transaction rethrows. */
async function ignoringRollBack(run: Promise<unknown>): Promise<void> {
  try {
    await run;
  } catch (error) {
    if (!(error instanceof RollBack)) throw error;
  }
}

function pgWithoutStatus(): Driver {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  // A pg client as an application's own wrapper hands it over: only `query`, no `getTransactionStatus`.
  const queryable = (client: pg.PoolClient | pg.Pool): SqlQueryable => ({
    query: (text, values) => client.query(text, values),
  });
  return {
    name: 'pg through { query }',
    open: async () => undefined,
    async inTransaction(fn, rollback = false) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await fn(queryable(client));
        await client.query(rollback ? 'ROLLBACK' : 'COMMIT');
      } catch (error) {
        await client.query('ROLLBACK');
        throw error;
      } finally {
        client.release();
      }
    },
    outside: () => queryable(pool),
    close: () => pool.end(),
  };
}

function postgresJs(): Driver {
  const sql = postgres(url, { max: 2, onnotice: () => undefined });
  return {
    name: 'postgres.js (sqlTemplate)',
    open: async () => undefined,
    inTransaction: (fn, rollback = false) =>
      ignoringRollBack(
        sql.begin((tx) =>
          thenMaybeRollBack(
            () => fn(sqlTemplate((strings, ...values) => tx(strings, ...(values as never[])))),
            rollback,
          ),
        ),
      ),
    outside: () => sqlTemplate((strings, ...values) => sql(strings, ...(values as never[]))),
    close: () => sql.end(),
  };
}

function postgresJsUnsafe(): Driver {
  const sql = postgres(url, { max: 2, onnotice: () => undefined });
  return {
    name: 'postgres.js (unsafe)',
    open: async () => undefined,
    inTransaction: (fn, rollback = false) =>
      ignoringRollBack(
        sql.begin((tx) =>
          thenMaybeRollBack(
            () => fn({ query: (text, values) => tx.unsafe(text, values as never[]) }),
            rollback,
          ),
        ),
      ),
    outside: () => ({ query: (text, values) => sql.unsafe(text, values as never[]) }),
    close: () => sql.end(),
  };
}

function knexDriver(): Driver {
  const k = knex({ client: 'pg', connection: url, pool: { min: 0, max: 2 } });
  return {
    name: 'Knex',
    open: async () => undefined,
    inTransaction: (fn, rollback = false) =>
      ignoringRollBack(
        k.transaction((trx) =>
          thenMaybeRollBack(
            () => fn(sqlTemplate((strings, ...values) => trx.raw(strings.join('?'), values as never[]))),
            rollback,
          ),
        ),
      ),
    outside: () => sqlTemplate((strings, ...values) => k.raw(strings.join('?'), values as never[])),
    close: () => k.destroy(),
  };
}

function kyselyDriver(): Driver {
  const kdb = new Kysely<unknown>({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 2 }) }),
  });
  return {
    name: 'Kysely',
    open: async () => undefined,
    inTransaction: (fn, rollback = false) =>
      ignoringRollBack(
        kdb
          .transaction()
          .execute((trx) =>
            thenMaybeRollBack(
              () => fn({ query: (text, values) => trx.executeQuery(CompiledQuery.raw(text, values)) }),
              rollback,
            ),
          ),
      ),
    outside: () => ({ query: (text, values) => kdb.executeQuery(CompiledQuery.raw(text, values)) }),
    close: () => kdb.destroy(),
  };
}

function drizzleDriver(): Driver {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  const ddb = drizzle(pool);
  return {
    name: 'Drizzle (node-postgres)',
    open: async () => undefined,
    inTransaction: (fn, rollback = false) =>
      ignoringRollBack(
        ddb.transaction((tx) =>
          thenMaybeRollBack(
            () => fn(sqlTemplate((strings, ...values) => tx.execute(drizzleSql(strings, ...values)))),
            rollback,
          ),
        ),
      ),
    outside: () => sqlTemplate((strings, ...values) => ddb.execute(drizzleSql(strings, ...values))),
    close: () => pool.end(),
  };
}

function typeormDriver(): Driver {
  const source = new DataSource({ type: 'postgres', url, poolSize: 2, entities: [] });
  return {
    name: 'TypeORM',
    open: async () => {
      await source.initialize();
    },
    inTransaction: (fn, rollback = false) =>
      ignoringRollBack(
        source.transaction((manager) =>
          thenMaybeRollBack(() => fn({ query: (text, values) => manager.query(text, values) }), rollback),
        ),
      ),
    outside: () => ({ query: (text, values) => source.query(text, values) }),
    close: () => source.destroy(),
  };
}

/** What the test uses of a generated Prisma Client (its own types exist only once it is generated). */
interface PrismaLike {
  $transaction<T>(fn: (tx: PrismaLike) => Promise<T>): Promise<T>;
  $queryRawUnsafe(query: string, ...values: unknown[]): Promise<unknown>;
  $disconnect(): Promise<void>;
}

/**
 * Prisma 7 with its pg driver adapter. Its client is generated first, without models, into a git-ignored folder
 * beside this file: `prisma generate` with `PRISMA_SCHEMA_ENGINE_BINARY` pointing at a stub, so the CLI does not
 * download the schema engine from binaries.prisma.sh (generate does not use it; the client runs Prisma's query
 * compiler on the adapter, with no native engine).
 */
function prismaDriver(): Driver {
  const folder = join(dirname(fileURLToPath(import.meta.url)), '.prisma-generated');
  let prisma: PrismaLike | undefined;
  const client = () => {
    if (prisma === undefined) throw new Error('Prisma Client not generated');
    return prisma;
  };
  return {
    name: 'Prisma 7 (driver adapter)',
    async open() {
      rmSync(folder, { recursive: true, force: true });
      mkdirSync(folder, { recursive: true });
      const stub = join(folder, 'no-schema-engine');
      writeFileSync(stub, '#!/bin/sh\nexit 1\n');
      chmodSync(stub, 0o755);
      writeFileSync(
        join(folder, 'schema.prisma'),
        'generator client {\n  provider = "prisma-client"\n  output = "./client"\n  moduleFormat = "esm"\n}\n\ndatasource db {\n  provider = "postgresql"\n}\n',
      );
      const cli = join(dirname(fileURLToPath(import.meta.resolve('prisma/package.json'))), 'build/index.js');
      execFileSync(process.execPath, [cli, 'generate', '--schema', join(folder, 'schema.prisma')], {
        env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: stub, PRISMA_HIDE_UPDATE_MESSAGE: '1' },
        stdio: 'pipe',
      });
      const generated = (await import(pathToFileURL(join(folder, 'client/client.ts')).href)) as {
        PrismaClient: new (options: { adapter: PrismaPg }) => PrismaLike;
      };
      prisma = new generated.PrismaClient({ adapter: new PrismaPg({ connectionString: url, max: 2 }) });
    },
    inTransaction: (fn, rollback = false) =>
      ignoringRollBack(
        client().$transaction((tx) =>
          thenMaybeRollBack(
            () => fn({ query: (text, values) => tx.$queryRawUnsafe(text, ...values) }),
            rollback,
          ),
        ),
      ),
    outside: () => ({ query: (text, values) => client().$queryRawUnsafe(text, ...values) }),
    close: async () => {
      await prisma?.$disconnect();
      rmSync(folder, { recursive: true, force: true });
    },
  };
}

/** Text a PostgreSQL array literal must escape, and JSON must keep (a header value holds no line break). */
const AWKWARD = 'a "quoted", {braced} back\\slash NULL, é 😀';
const MULTILINE = `${AWKWARD}\r\nsecond line`;

const DRIVERS = [
  pgWithoutStatus,
  postgresJs,
  postgresJsUnsafe,
  knexDriver,
  kyselyDriver,
  drizzleDriver,
  typeormDriver,
  prismaDriver,
];

// Each driver's pool connects on first use only.
const CASES = DRIVERS.map((make) => make()).map((driver) => ({ name: driver.name, driver }));

describe.each(CASES)('enqueue through $name', ({ driver }) => {
  beforeAll(() => driver.open());
  afterAll(() => driver.close());
  const aTopic = () => `drivers.${randomUUID().slice(0, 8)}`;

  it('writes the rows with every field in the library’s transaction, visible on commit, in order', async () => {
    // Prepare
    const topic = aTopic();
    const messages: EnqueueMessage[] = [
      {
        topic,
        key: `order, "1" {${AWKWARD}}`,
        payload: { note: MULTILINE, list: ['NULL', '', '{}'], n: 1.5, none: null },
        headers: { 'x-note': AWKWARD, 'x-empty': '' },
        maxAttempts: 3,
        delayMs: 1500,
      },
      { topic, payload: 'NULL' },
      { topic, key: 'b', payload: [1, 2] },
    ];
    let ids: string[] = [];
    // Act
    await driver.inTransaction(async (tx) => {
      ids = await enqueueMany(tx, messages, options());
      // Assess: nothing is visible outside the open transaction
      expect(await db.outboxRows(topic)).toEqual([]);
    });
    // Assess
    expect(ids).toHaveLength(3);
    const rows = await db.outboxRows(topic);
    expect(rows.map((r) => r.id)).toEqual(ids);
    expect(rows.map((r) => [r.key, r.payload, r.headers, r.state, r.max_attempts, r.delay_ms])).toEqual([
      [
        `order, "1" {${AWKWARD}}`,
        { note: MULTILINE, list: ['NULL', '', '{}'], n: 1.5, none: null },
        { 'x-note': AWKWARD, 'x-empty': '' },
        'pending',
        3,
        1500,
      ],
      [null, 'NULL', {}, 'pending', 10, 0],
      ['b', [1, 2], {}, 'pending', 10, 0],
    ]);
  });

  it('leaves no row when the library’s transaction rolls back', async () => {
    // Prepare
    const topic = aTopic();
    // Act
    await driver.inTransaction(async (tx) => {
      await enqueue(tx, { topic, key: 'k', payload: { x: 1 } }, options());
    }, true);
    // Assess
    expect(await db.outboxRows(topic)).toEqual([]);
  });

  it('holds the key lock until the library’s transaction ends', async () => {
    // Prepare
    const topic = aTopic();
    const key = `held-${randomUUID()}`;
    const probe = new pg.Client({ connectionString: url });
    await probe.connect();
    const lockFree = async () => {
      const { rows } = await probe.query<{ free: boolean }>(
        'SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS free',
        [outboxKeyLockName(db.schema, key)],
      );
      return rows[0]?.free;
    };
    try {
      // Act
      let freeInside: boolean | undefined;
      await driver.inTransaction(async (tx) => {
        await enqueue(tx, { topic, key, payload: {} }, options());
        freeInside = await lockFree();
      });
      // Assess: another session cannot take the key's lock while the writer's transaction is open
      expect(freeInside).toBe(false);
      expect(await lockFree()).toBe(true);
    } finally {
      await probe.end();
    }
  });

  it('writes every one of several enqueues that overlap on one transaction', async () => {
    // Prepare
    const topic = aTopic();
    let ids: string[][] = [];
    // Act: three enqueues in flight at once on the library's transaction.
    await driver.inTransaction(async (tx) => {
      ids = await Promise.all(
        [1, 2, 3].map((n) => enqueueMany(tx, [{ topic, key: `k${n}`, payload: { n } }], options())),
      );
    });
    // Assess
    expect(ids.flat()).toHaveLength(3);
    expect((await db.outboxRows(topic)).map((r) => (r.payload as { n: number }).n).sort()).toEqual([1, 2, 3]);
  });

  it('refuses a query function that runs outside a transaction, and writes nothing', async () => {
    // Prepare
    const topic = aTopic();
    // Act
    const outcome = enqueueMany(
      driver.outside(),
      [
        { topic, key: 'k', payload: { x: 1 } },
        { topic, payload: { x: 2 } },
      ],
      options(),
    );
    // Assess
    await expect(outcome).rejects.toBeInstanceOf(TransactionRequiredError);
    await expect(outcome).rejects.toThrow(/did not run in one open transaction/);
    expect(await db.outboxRows(topic)).toEqual([]);
  });
});
