/**
 * The pg store's timeouts against a database that goes silent: it keeps its TCP connections open but answers
 * nothing (a dropped network path, a frozen host). Without them a connect waits for the kernel's SYN retries and a
 * statement for TCP's retransmissions, minutes either way; with them each fails as an outage in time, the
 * connection is dropped, and the store serves again once the database answers.
 */
import { StoreUnavailableError } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName, requireServices, testPool } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startTcpProxy, type TcpProxy } from '../../../test/local/support.ts';
import { createPgExecutor, openPostgresStore } from '../src/index.ts';

const needs = await requireServices('store-postgres: timeouts', ['postgres']);

/** The url of the test database with its host and port replaced by the proxy's. */
function viaPort(url: string, port: number): string {
  const parsed = new URL(url);
  parsed.hostname = '127.0.0.1';
  parsed.port = String(port);
  return parsed.toString();
}

async function elapsedOf(work: Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const started = performance.now();
  try {
    await work;
    return { error: undefined, ms: performance.now() - started };
  } catch (error) {
    return { error, ms: performance.now() - started };
  }
}

describe.skipIf(needs.skipReason)('pg store timeouts against a silent database', () => {
  const url = needs.url.postgres;
  const schema = freshSchemaName('pg_timeouts');
  dropSchemasAfterPass(() => [schema]);
  const proxies: TcpProxy[] = [];
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0)) await close().catch(() => undefined);
    for (const proxy of proxies.splice(0)) await proxy.close();
  });
  afterAll(async () => {
    for (const proxy of proxies) await proxy.close();
  });

  async function proxy(): Promise<TcpProxy> {
    const started = await startTcpProxy(new URL(url).hostname, Number(new URL(url).port || 5432));
    proxies.push(started);
    return started;
  }

  it('fails a connection that opens but never answers after connectTimeoutMs, as StoreUnavailableError', async () => {
    const silentServer = await proxy();
    silentServer.silence();
    const store = await openPostgresStore({ url: viaPort(url, silentServer.port), connectTimeoutMs: 300 });
    closers.push(() => store.close());

    const { error, ms } = await elapsedOf(store.ping());

    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(ms).toBeGreaterThanOrEqual(250);
    expect(silentServer.accepted()).toBe(1);
  }, 20_000);

  it('fails a statement unanswered within queryTimeoutMs, drops its connection, and serves again once the database answers', async () => {
    const path = await proxy();
    const store = await openPostgresStore({ url: viaPort(url, path.port), poolSize: 1, queryTimeoutMs: 300 });
    closers.push(() => store.close());
    await store.ping();
    expect(path.accepted()).toBe(1);

    path.silence();
    const { error, ms } = await elapsedOf(store.ping());

    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).message).toContain('did not answer a statement within 300 ms');
    expect(ms).toBeGreaterThanOrEqual(250);
    // It tried to cancel the statement on a connection of its own (which the silent server swallows too).
    await expect.poll(() => path.accepted(), { timeout: 2000 }).toBe(2);

    path.restore();
    await store.ping();
    // A new connection: the one that timed out was dropped, not handed back to the pool.
    expect(path.accepted()).toBe(3);
  }, 20_000);

  it('does not retry a transaction whose BEGIN went unanswered on another connection', async () => {
    const path = await proxy();
    const pool = new pg.Pool({
      connectionString: viaPort(url, path.port),
      max: 2,
      connectionTimeoutMillis: 5000,
    });
    const executor = createPgExecutor(pool, { queryTimeoutMs: 300 });
    closers.push(() => executor.close());
    await executor.query('SELECT 1');
    expect(path.accepted()).toBe(1);

    path.silence();
    const { error } = await elapsedOf(executor.transaction(async (tx) => tx.query('SELECT 1')));

    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).message).toContain('did not answer a statement within 300 ms');
    // The second connection is the cancel request of the unanswered BEGIN (awaited, at most 1 s, before the session
    // is dropped); a retry would have opened a third (and waited its connect timeout on the silent server).
    expect(path.accepted()).toBe(2);
  }, 20_000);

  it('gives up on a transaction whose statement times out and opens a new connection for the next one', async () => {
    const pool = testPool(1, url);
    const executor = createPgExecutor(pool, { queryTimeoutMs: 200 });
    closers.push(() => executor.close());
    const pidOf = async () =>
      (await executor.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
    const before = await pidOf();

    const { error } = await elapsedOf(
      executor.transaction(async (tx) => {
        await tx.query('SELECT 1');
        await tx.query('SELECT pg_sleep(1.5)');
      }),
    );

    expect(error).toBeInstanceOf(StoreUnavailableError);
    const after = await pidOf();
    expect(after).toBeDefined();
    expect(after).not.toBe(before);
  }, 20_000);

  it('cancels a statement it gave up on at a live server: an INSERT waiting on a lock does not commit later', async () => {
    const table = `"${schema}".cancel_probe`;
    // Two connections: one holds the lock, the other looks.
    const admin = testPool(2, url);
    closers.push(() => admin.end());
    await admin.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    await admin.query(`CREATE TABLE IF NOT EXISTS ${table} (n int)`);
    const executor = createPgExecutor(testPool(1, url), { queryTimeoutMs: 300 });
    closers.push(() => executor.close());
    const holder = await admin.connect();
    await holder.query('BEGIN');
    await holder.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);

    let error: unknown;
    try {
      ({ error } = await elapsedOf(executor.query(`INSERT INTO ${table} VALUES (1)`)));
      // The cancel request travels on its own connection; the server acts on it at once.
      await expect
        .poll(
          async () =>
            (
              await admin.query<{ n: number }>(
                `SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE 'INSERT INTO ${table}%' AND state = 'active'`,
              )
            ).rows[0]?.n,
          { timeout: 5000 },
        )
        .toBe(0);
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }

    expect(error).toBeInstanceOf(StoreUnavailableError);
    const { rows } = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
    expect(rows[0]?.n).toBe(0);
  }, 20_000);

  it('lets a statement wait without limit with timeoutMs 0, and migrates past a lock held longer than queryTimeoutMs', async () => {
    const executor = createPgExecutor(testPool(1, url), { queryTimeoutMs: 100 });
    closers.push(() => executor.close());
    await expect(executor.query('SELECT pg_sleep(0.4)', undefined, { timeoutMs: 0 })).resolves.toBeDefined();
    await expect(executor.query('SELECT pg_sleep(0.4)')).rejects.toBeInstanceOf(StoreUnavailableError);

    // Another migrator holds the schema's migration lock for longer than the store's query timeout.
    const holder = testPool(1, url);
    closers.push(() => holder.end());
    const held = await holder.connect();
    await held.query('BEGIN');
    await held.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`queuebox.migrate:${schema}`]);
    const store = await openPostgresStore({ url, schema, poolSize: 2, queryTimeoutMs: 100 });
    closers.push(() => store.close());
    const migrating = store.migrate();
    await new Promise((resolve) => setTimeout(resolve, 600));
    await held.query('COMMIT');
    held.release();

    const report = await migrating;

    expect(report.applied.length).toBeGreaterThan(0);
    await store.ping();
  }, 20_000);
});
