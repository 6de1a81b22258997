/**
 * The store's wiring, without a SQL Server. The last case does open a real mssql connection — to a loopback port
 * that nobody listens on — so the error it translates is the driver's own, not a fabricated one.
 */
import { createServer } from 'node:net';
import { ConfigError, StoreUnavailableError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
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
