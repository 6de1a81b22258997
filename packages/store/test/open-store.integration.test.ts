import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, type Store, StoreUnavailableError } from '@queuebox/core';
import { outboxKeyLockName } from '@queuebox/store-postgres';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { openStore } from '../src/index.ts';

const POSTGRES_URL = process.env.QUEUEBOX_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const schema = `t_store_${randomBytes(4).toString('hex')}`;
const opened: Store[] = [];
let failed = false;

afterEach((context) => {
  if (context.task.result?.state === 'fail') failed = true;
});
afterAll(async () => {
  await Promise.all(opened.map((s) => s.close()));
  if (failed) {
    console.info(`[store tests] keeping schema ${schema} for inspection: a test failed`);
    return;
  }
  const client = new pg.Client(POSTGRES_URL);
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await client.end();
});

async function open(database: Parameters<typeof openStore>[0]): Promise<Store> {
  const store = await openStore(database);
  opened.push(store);
  return store;
}

describe('openStore', () => {
  it('opens a PostgreSQL store that migrates into the configured schema and answers', async () => {
    const store = await open({ provider: 'postgres', url: POSTGRES_URL, schema, poolSize: 2 });

    await store.ping();
    const report = await store.migrate();
    const [id] = await store.outbox.insert([{ topic: 't', payload: { a: 1 }, maxAttempts: 1 }]);

    expect(store.provider).toBe('postgres');
    expect(report.current).toBeGreaterThan(0);
    expect((await store.outbox.get(id ?? ''))?.payload).toEqual({ a: 1 });
  });

  it("passes the connect and query timeouts of the configuration to PostgreSQL's pool", async () => {
    // A server that accepts connections, reads what comes and never answers.
    const silent = createServer((socket) => socket.resume());
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const silentUrl = `postgres://postgres@127.0.0.1:${(silent.address() as AddressInfo).port}/test`;
    const unanswered = await open({ provider: 'postgres', url: silentUrl, connectTimeoutMs: 200 });
    const store = await open({
      provider: 'postgres',
      url: POSTGRES_URL,
      schema,
      poolSize: 2,
      queryTimeoutMs: 200,
    });
    await store.migrate();
    // Another transaction holds the per-key lock that every keyed insert takes.
    const holder = new pg.Client(POSTGRES_URL);
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
      outboxKeyLockName(schema, 'held'),
    ]);

    try {
      await expect(unanswered.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(
        store.outbox.insert([{ topic: 't', key: 'held', payload: {}, maxAttempts: 1 }]),
      ).rejects.toThrow('within 200 ms (database.queryTimeoutMs)');
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
      await new Promise((resolve) => silent.close(resolve));
    }
    await expect(
      store.outbox.insert([{ topic: 't', key: 'held', payload: {}, maxAttempts: 1 }]),
    ).resolves.toHaveLength(1);
  });

  it('opens PGlite on a data directory that keeps its rows across a restart, one store at a time', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'queuebox-pglite-'));
    try {
      const first = await openStore({ provider: 'pglite', dataDir });
      await first.migrate();
      const [id] = await first.outbox.insert([{ topic: 't', payload: 'kept', maxAttempts: 1 }]);
      // One store at a time on the directory: a second one would read and write a copy of its own.
      await expect(openStore({ provider: 'pglite', dataDir })).rejects.toThrow(
        `${dataDir} is in use by this process`,
      );
      await first.close();

      const second = await open({ provider: 'pglite', dataDir });
      const row = await second.outbox.get(id ?? '');
      await second.close();

      expect(second.provider).toBe('pglite');
      expect(row?.payload).toBe('kept');
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('loads the SQL Server provider, which connects only when used', async () => {
    const store = await open({
      provider: 'sqlserver',
      url: 'Server=127.0.0.1,1;Database=test;User Id=sa;Password=unused;TrustServerCertificate=true',
    });

    expect(store.provider).toBe('sqlserver');
  });

  it.each(['postgres', 'sqlserver'] as const)('refuses provider %s without a url', async (provider) => {
    const error = await openStore({ provider }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).issues[0]?.path).toBe('database.url');
  });

  it('refuses an unknown provider', async () => {
    const error = await openStore({ provider: 'oracle' as never }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).issues[0]?.path).toBe('database.provider');
  });

  it('refuses an invalid schema name before connecting', async () => {
    await expect(
      openStore({ provider: 'postgres', url: POSTGRES_URL, schema: 'a;b' }),
    ).rejects.toBeInstanceOf(ConfigError);
  });
});
