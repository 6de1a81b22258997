import { PGlite } from '@electric-sql/pglite';
import { type QueueBoxError, StoreError, StoreUnavailableError } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName, testPool, testPostgresUrl } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPgExecutor, createPgliteExecutor, openPostgresStore, type SqlExecutor } from '../src/index.ts';

const schema = freshSchemaName('pg_exec');
const storeSchema = freshSchemaName('pg_types');
dropSchemasAfterPass(() => [schema, storeSchema]);

/** Resolves when `release()` is called: lets a test hold a transaction open at a chosen point. */
function gate(): { wait: Promise<void>; release: () => void } {
  let release = () => {};
  const wait = new Promise<void>((resolve) => {
    release = resolve;
  });
  return { wait, release };
}

/** The behaviour both executors must share, run against each. */
function sharedBehaviour(
  name: string,
  open: () => SqlExecutor,
  table: string,
  setup: string,
  closeAfter: boolean,
) {
  describe(`${name} executor`, () => {
    let executor: SqlExecutor;
    beforeAll(async () => {
      executor = open();
      await executor.query(`${setup}CREATE TABLE IF NOT EXISTS ${table} (id INT PRIMARY KEY, note TEXT)`);
    });
    afterAll(async () => {
      if (closeAfter) await executor.close();
    });

    it('answers rows and a row count for SELECT and for UPDATE', async () => {
      await executor.query(`INSERT INTO ${table} (id, note) VALUES (1, 'a'), (2, 'b')`);

      const selected = await executor.query<{ id: number }>(
        `SELECT id FROM ${table} WHERE id > $1 ORDER BY id`,
        [0],
      );
      const updated = await executor.query(`UPDATE ${table} SET note = $1 WHERE id IN (1, 2)`, ['c']);

      expect(selected.rows.map((r) => r.id)).toEqual([1, 2]);
      expect(selected.rowCount).toBe(2);
      expect(updated.rowCount).toBe(2);
      await executor.query(`DELETE FROM ${table}`);
    });

    it('runs several statements without values and answers the last result', async () => {
      const result = await executor.query<{ n: number }>('SELECT 1 AS n; SELECT 2 AS n');

      expect(result.rows).toEqual([{ n: 2 }]);
    });

    it('commits a transaction when the callback resolves', async () => {
      const answer = await executor.transaction(async (tx) => {
        await tx.query(`INSERT INTO ${table} (id, note) VALUES ($1, $2)`, [10, 'kept']);
        return 'done';
      });

      const { rows } = await executor.query(`SELECT note FROM ${table} WHERE id = 10`);
      expect(answer).toBe('done');
      expect(rows).toEqual([{ note: 'kept' }]);
    });

    it("rolls back when the callback throws and passes the caller's error through unchanged", async () => {
      const mine = new Error('not a database error');

      const outcome = executor.transaction(async (tx) => {
        await tx.query(`INSERT INTO ${table} (id, note) VALUES ($1, $2)`, [11, 'gone']);
        throw mine;
      });

      await expect(outcome).rejects.toBe(mine);
      const { rows } = await executor.query(`SELECT 1 FROM ${table} WHERE id = 11`);
      expect(rows).toEqual([]);
    });

    it('translates a failing statement into StoreError with its SQLSTATE and rolls its transaction back', async () => {
      const outcome = executor.transaction(async (tx) => {
        await tx.query(`INSERT INTO ${table} (id, note) VALUES ($1, $2)`, [12, 'gone']);
        await tx.query('SELEC 1');
      });

      const error = await outcome.catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreError);
      expect((error as QueueBoxError).context.sqlState).toBe('42601');
      const { rows } = await executor.query(`SELECT 1 FROM ${table} WHERE id = 12`);
      expect(rows).toEqual([]);
    });

    it('joins the enclosing transaction when a tx opens another one', async () => {
      const outcome = executor.transaction(async (tx) => {
        await tx.transaction((inner) => inner.query(`INSERT INTO ${table} (id, note) VALUES (13, 'inner')`));
        throw new Error('outer fails');
      });

      await expect(outcome).rejects.toThrow('outer fails');
      const { rows } = await executor.query(`SELECT 1 FROM ${table} WHERE id = 13`);
      expect(rows).toEqual([]);
    });
  });
}

// One PGlite for the file: each instance takes seconds to start.
const pglite = new PGlite();

sharedBehaviour(
  'pg',
  () => createPgExecutor(testPool()),
  `"${schema}".pg_exec`,
  `CREATE SCHEMA "${schema}";`,
  true,
);
sharedBehaviour('PGlite', () => createPgliteExecutor(pglite), 'pglite_exec', '', false);

describe('pg executor', () => {
  it('destroys the connection of a transaction whose connection died and keeps serving', async () => {
    const pool = testPool(2);
    const executor = createPgExecutor(pool);
    try {
      const outcome = executor.transaction((tx) => tx.query('SELECT pg_terminate_backend(pg_backend_pid())'));

      await expect(outcome).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(pool.totalCount).toBe(0);
      const { rows } = await executor.query<{ n: number }>('SELECT 1 AS n');
      expect(rows).toEqual([{ n: 1 }]);
    } finally {
      await executor.close();
    }
  });

  it('releases the connection of every transaction back to the pool', async () => {
    const pool = testPool(1);
    const executor = createPgExecutor(pool);
    try {
      // With one connection, a transaction that kept its connection would make the next one wait forever.
      for (let i = 0; i < 3; i++) {
        await executor.transaction((tx) => tx.query('SELECT 1')).catch(() => undefined);
        await executor.transaction(async () => Promise.reject(new Error('x'))).catch(() => undefined);
      }

      expect(pool.idleCount).toBe(1);
      expect(pool.waitingCount).toBe(0);
    } finally {
      await executor.close();
    }
  });

  it('reports a refused connection as StoreUnavailableError', async () => {
    const executor = createPgExecutor(
      new pg.Pool({
        connectionString: 'postgres://postgres@127.0.0.1:1/test',
        connectionTimeoutMillis: 2000,
      }),
    );
    try {
      await expect(executor.query('SELECT 1')).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(executor.transaction((tx) => tx.query('SELECT 1'))).rejects.toBeInstanceOf(
        StoreUnavailableError,
      );
    } finally {
      await executor.close();
    }
  });

  it("reads the store's rows with its own parsers, in the session's time zone, whatever pg's global parsers say", async () => {
    // The store's sessions print timestamps at +05:30.
    const url = new URL(testPostgresUrl());
    url.searchParams.set('options', '-c TimeZone=Asia/Kolkata');
    const store = await openPostgresStore({ url: url.href, schema: storeSchema, poolSize: 1 });
    const admin = testPool(1);
    const globalTimestamptz = pg.types.getTypeParser(1184, 'text');
    const globalJsonb = pg.types.getTypeParser(3802, 'text');
    try {
      await store.migrate();
      // A number a double cannot hold, written as SQL text (a JavaScript number could not carry it).
      const { rows } = await admin.query<{ id: string; created: string }>(
        `INSERT INTO "${storeSchema}".outbox (topic, payload, max_attempts)
         VALUES ('t', '{"big": 12345678901234567890, "at": 1}', 3)
         RETURNING id::text AS id,
                   to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created`,
      );
      const id = rows[0]?.id ?? '';
      // An application that reads these types its own way shares this pg module with the store.
      pg.types.setTypeParser(1184, () => 'not a timestamp');
      pg.types.setTypeParser(3802, () => 'not the payload');

      const row = await store.outbox.get(id);

      expect(row?.createdAt).toBeInstanceOf(Date);
      expect(row?.createdAt.toISOString()).toBe(rows[0]?.created);
      expect(JSON.stringify(row?.payload)).toBe('{"at":1,"big":12345678901234567890}');
    } finally {
      pg.types.setTypeParser(1184, globalTimestamptz);
      pg.types.setTypeParser(3802, globalJsonb);
      await store.close();
      await admin.end();
    }
  });

  it('closes once even when close is called twice', async () => {
    const executor = createPgExecutor(testPool());
    await executor.query('SELECT 1');

    await Promise.all([executor.close(), executor.close()]);

    await expect(executor.query('SELECT 1')).rejects.toBeInstanceOf(StoreUnavailableError);
  });
});

describe('PGlite executor', () => {
  let executor: SqlExecutor;
  beforeAll(async () => {
    executor = createPgliteExecutor(pglite);
    await executor.query('CREATE TABLE serial (id INT PRIMARY KEY)');
  });

  it('makes a query issued during an open transaction wait for it instead of joining it', async () => {
    const holding = gate();
    const inserted = gate();
    const events: string[] = [];

    const transaction = executor.transaction(async (tx) => {
      await tx.query('INSERT INTO serial (id) VALUES (1)');
      inserted.release();
      await holding.wait;
      events.push('transaction ends');
      throw new Error('roll back');
    });
    await inserted.wait;
    const outside = executor.query<{ n: number }>('SELECT count(*)::int AS n FROM serial').then((r) => {
      events.push('outside query answered');
      return r.rows[0]?.n;
    });
    // Give the outside query every chance to run early; it must not.
    await new Promise((resolve) => setTimeout(resolve, 50));
    events.push('released');
    holding.release();

    await expect(transaction).rejects.toThrow('roll back');
    expect(await outside).toBe(0);
    expect(events).toEqual(['released', 'transaction ends', 'outside query answered']);
  });

  it('runs concurrent transactions one after the other', async () => {
    const events: string[] = [];
    const run = (name: string) =>
      executor.transaction(async (tx) => {
        events.push(`${name} begins`);
        await tx.query('SELECT 1');
        await new Promise((resolve) => setTimeout(resolve, 10));
        await tx.query('SELECT 1');
        events.push(`${name} ends`);
      });

    await Promise.all([run('a'), run('b')]);

    expect(events).toEqual(['a begins', 'a ends', 'b begins', 'b ends']);
  });

  it('reports a closed database as StoreUnavailableError (closing twice is fine)', async () => {
    await Promise.all([executor.close(), executor.close()]);

    await expect(executor.query('SELECT 1')).rejects.toBeInstanceOf(StoreUnavailableError);
  });
});
