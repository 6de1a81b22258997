/**
 * The store's wiring, without a SQL Server. Some cases open a real mssql connection — to a loopback port that
 * nobody listens on, or to one that accepts and never answers — so the error they translate is the driver's own,
 * not a fabricated one.
 */
import { createServer, type Server } from 'node:net';
import { ConfigError, StoreUnavailableError } from '@queuebox/core';
import mssql from 'mssql';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqlServerStore } from '../src/store.ts';

async function aClosedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== 'object' || address === null) throw new Error('no port');
  return address.port;
}

describe('openSqlServerStore', () => {
  it('opens a sqlserver store without connecting, and closes it', async () => {
    const store = await openSqlServerStore({ url: 'sqlserver://sa:x@127.0.0.1:1/db', schema: 'tenant_1' });

    expect(store.provider).toBe('sqlserver');
    await expect(store.close()).resolves.toBeUndefined();
  });

  it('refuses a bad schema name or URL with a ConfigError before any connection', async () => {
    await expect(
      openSqlServerStore({ url: 'sqlserver://sa:x@host/db', schema: 'a]b' }),
    ).rejects.toBeInstanceOf(ConfigError);
    await expect(openSqlServerStore({ url: 'http://host/db' })).rejects.toBeInstanceOf(ConfigError);
  });

  it('answers ping with StoreUnavailableError when nothing listens at the address', async () => {
    const port = await aClosedPort();
    const store = await openSqlServerStore({
      url: `sqlserver://sa:x@127.0.0.1:${port}/db?encrypt=false&connectTimeout=2000`,
    });

    try {
      const error = await store.ping().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as StoreUnavailableError).context).toMatchObject({ code: 'ESOCKET' });
      // The pool is not stuck in a failed state: the next call tries to connect again and fails the same way.
      await expect(store.outbox.get('1')).rejects.toBeInstanceOf(StoreUnavailableError);
    } finally {
      await store.close();
    }
  });
});

/** A loopback server that accepts connections, reads what comes and never answers (a frozen host). */
async function aSilentServer(): Promise<{ server: Server; port: number }> {
  const server = createServer((socket) => socket.resume());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || address === null) throw new Error('no port');
  return { server, port: address.port };
}

describe('the connect and query timeouts (database.connectTimeoutMs, database.queryTimeoutMs)', () => {
  const Original = mssql.ConnectionPool;
  afterEach(() => {
    (mssql as { ConnectionPool: typeof mssql.ConnectionPool }).ConnectionPool = Original;
  });

  /** The configs of the pools the store builds from here on. */
  function poolConfigs(): mssql.config[] {
    const seen: mssql.config[] = [];
    (mssql as { ConnectionPool: typeof mssql.ConnectionPool }).ConnectionPool = class extends Original {
      constructor(config: mssql.config) {
        super(config);
        seen.push(config);
      }
    } as typeof mssql.ConnectionPool;
    return seen;
  }

  it("become mssql's connectionTimeout and requestTimeout, and the url's own win", async () => {
    // Prepare
    const seen = poolConfigs();
    const timeouts = { connectTimeoutMs: 2_000, queryTimeoutMs: 0 };

    // Act
    const stores = [
      await openSqlServerStore({ url: 'sqlserver://sa:x@127.0.0.1:1/db', ...timeouts }),
      await openSqlServerStore({
        url: 'sqlserver://sa:x@127.0.0.1:1/db?connectTimeout=7000&requestTimeout=9000',
        ...timeouts,
      }),
      await openSqlServerStore({ url: 'sqlserver://sa:x@127.0.0.1:1/db' }),
    ];
    await Promise.all(stores.map((store) => store.close()));

    // Assess: 0 is tedious's "no limit", as database.queryTimeoutMs 0 is; nothing given leaves mssql's default.
    expect(seen.map((c) => [c.connectionTimeout, c.requestTimeout])).toEqual([
      [2_000, 0],
      [7_000, 9_000],
      [undefined, undefined],
    ]);
  });

  it('gives up connecting to a server that never answers after connectTimeoutMs, as an outage', async () => {
    // Prepare
    const { server, port } = await aSilentServer();
    const store = await openSqlServerStore({
      url: `sqlserver://sa:x@127.0.0.1:${port}/db?encrypt=false`,
      connectTimeoutMs: 300,
    });

    try {
      // Act
      const error = await store.ping().then(
        () => undefined,
        (e: unknown) => e,
      );

      // Assess: tedious names the timeout it waited (mssql's default would have been 15000 ms).
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as Error).message).toContain(`Failed to connect to 127.0.0.1:${port} in 300ms`);
    } finally {
      await store.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
