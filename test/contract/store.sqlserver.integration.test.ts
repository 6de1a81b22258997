/** The store contract against SQL Server, found by @queuebox/testing (findSqlServer); skipped with the reason when there is none. */

import { findSqlServer, freshSchemaName } from '@queuebox/testing';
import mssql from 'mssql';
import { createSqlServerForeignVersionTable, createSqlServerHooks } from './sqlserver-hooks.ts';
import { describeStoreContract } from './store-contract.ts';

const sqlserver = await findSqlServer();

describeStoreContract(
  'SQL Server',
  async () => {
    if (!sqlserver.available) throw new Error(`SQL Server is unavailable: ${sqlserver.reason}`);
    // Imported here so a run without SQL Server never loads the provider.
    const { openSqlServerStore, parseConnectionString } = await import('@queuebox/store-sqlserver');
    const schema = freshSchemaName('store_mssql');
    const store = await openSqlServerStore({ url: sqlserver.url, schema, poolSize: 8 });
    // The store's own parser, so the hooks accept every form the store does (sqlserver:// URL or ADO.NET).
    const pool = new mssql.ConnectionPool(parseConnectionString(sqlserver.url));
    const close = async () => {
      await Promise.allSettled([store.close(), pool.close()]);
    };
    try {
      await pool.connect();
      await store.migrate();
    } catch (error) {
      await close();
      throw error;
    }
    const openOnForeignVersionTable = async () => {
      const other = freshSchemaName('store_mssql_foreign');
      await createSqlServerForeignVersionTable(pool, other);
      const opened = await openSqlServerStore({ url: sqlserver.url, schema: other, poolSize: 1 });
      const drop = async () => {
        await opened.close();
        await createSqlServerHooks(pool, other).dropSchema();
      };
      return { store: opened, schema: other, drop };
    };
    return { store, schema, ...createSqlServerHooks(pool, schema), openOnForeignVersionTable, close };
  },
  { skipReason: sqlserver.available ? undefined : sqlserver.reason },
);
