/**
 * What `openStore` hands SQL Server's pool of the configuration's timeouts, without a server: the pool is built and
 * closed, never connected. (PostgreSQL's are checked against a real server in open-store.integration.test.ts.)
 */
import mssql from 'mssql';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_DATABASE_TIMEOUT_MS, openStore } from '../src/index.ts';

const Original = mssql.ConnectionPool;

/** The configs of the pools built from here on. */
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

afterEach(() => {
  (mssql as { ConnectionPool: typeof mssql.ConnectionPool }).ConnectionPool = Original;
});

describe('openStore with provider sqlserver', () => {
  it("passes database.connectTimeoutMs and queryTimeoutMs on as mssql's connectionTimeout and requestTimeout", async () => {
    // Prepare
    const seen = poolConfigs();

    // Act
    const store = await openStore({
      provider: 'sqlserver',
      url: 'sqlserver://u:p@127.0.0.1:1/app?encrypt=false',
      queryTimeoutMs: 5_000,
      connectTimeoutMs: 2_000,
    });
    await store.close();

    // Assess
    expect(seen.map((c) => [c.connectionTimeout, c.requestTimeout])).toEqual([[2_000, 5_000]]);
  });

  it('applies the configuration’s default of 30000 ms to both, not mssql’s 15000', async () => {
    // Prepare
    const seen = poolConfigs();

    // Act
    const store = await openStore({ provider: 'sqlserver', url: 'sqlserver://u:p@127.0.0.1:1/app' });
    await store.close();

    // Assess
    expect(DEFAULT_DATABASE_TIMEOUT_MS).toBe(30_000);
    expect(seen.map((c) => [c.connectionTimeout, c.requestTimeout])).toEqual([[30_000, 30_000]]);
  });
});
