/**
 * Which transactions enqueue accepts, told by shape. Real driver objects (pg and mssql), none connected: no
 * network is used.
 */
import { QueueBoxError } from '@queuebox/core';
import mssql from 'mssql';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { enqueue } from '../src/enqueue.ts';
import { TransactionRequiredError } from '../src/errors.ts';
import { detectTransaction } from '../src/transaction.ts';

// Nothing listens on port 1; these objects are never connected by the tests.
const pgPool = new pg.Pool({ host: '127.0.0.1', port: 1 });
const mssqlPool = new mssql.ConnectionPool({
  server: '127.0.0.1',
  port: 1,
  user: 'sa',
  password: 'unused',
  options: { trustServerCertificate: true },
});
afterAll(async () => {
  await pgPool.end();
});

const aMessage = { topic: 'orders.created', key: 'order-1', payload: { order: 1 } };

describe('detectTransaction', () => {
  it('recognises an mssql Transaction', () => {
    const transaction = new mssql.Transaction(mssqlPool);
    expect(detectTransaction(transaction)).toEqual({ driver: 'mssql', transaction });
  });

  it('refuses a pg Client that never connected (getTransactionStatus() is null): its enqueue would wait, then run outside any transaction', async () => {
    // Prepare
    const client = new pg.Client({ host: '127.0.0.1', port: 1 });

    // Act: detectTransaction first, so a client let through fails here instead of hanging in enqueue.
    const detect = () => detectTransaction(client);

    // Assess
    expect(client.getTransactionStatus()).toBeNull();
    expect(detect).toThrow(TransactionRequiredError);
    expect(detect).toThrow(/the pg client is not connected/);
    await expect(enqueue(client, aMessage)).rejects.toThrow(/the pg client is not connected/);
  });

  it('refuses a pg Pool, an mssql ConnectionPool and an mssql Request', () => {
    expect(() => detectTransaction(pgPool)).toThrow(/got a pg Pool — a pool is not a transaction/);
    expect(() => detectTransaction(mssqlPool)).toThrow(
      /got an mssql ConnectionPool — a pool is not a transaction/,
    );
    expect(() => detectTransaction(new mssql.Request(mssqlPool))).toThrow(/got an mssql Request/);
  });

  it('refuses a pg client that reports no transaction or a failed one, and a database handle', () => {
    const idle = { query: async () => ({ rows: [] }), getTransactionStatus: () => 'I' };
    const failed = { query: async () => ({ rows: [] }), getTransactionStatus: () => 'E' };
    const inTransaction = { query: async () => ({ rows: [] }), getTransactionStatus: () => 'T' };
    const handle = { query: async () => ({ rows: [] }), transaction: async () => undefined };
    expect(() => detectTransaction(idle)).toThrow(/not inside a transaction/);
    expect(() => detectTransaction(failed)).toThrow(/failed earlier/);
    expect(detectTransaction(inTransaction).driver).toBe('pg');
    expect(() => detectTransaction(handle)).toThrow(/database handle/);
  });

  it('takes anything else with query() as a query function whose transaction the database checks', () => {
    const queryable = { query: async () => [] };
    expect(detectTransaction(queryable)).toEqual({ driver: 'queryable', queryable });
  });

  it('says what it got: a function (a Knex transaction is one) with the way to wrap it, other values by kind', () => {
    const knexLike = Object.assign(() => undefined, { raw() {}, commit() {} });
    expect(() => detectTransaction(knexLike)).toThrow(/got a function — a Knex transaction .* sqlTemplate/);
    expect(() => detectTransaction('postgres://x')).toThrow(/got the string "postgres:\/\/x"$/);
    expect(() => detectTransaction(new Map())).toThrow(/got a Map, of no known driver$/);
  });

  it('refuses what is no transaction at all', () => {
    for (const value of [undefined, null, 'postgres://x', {}, { begin() {} }]) {
      expect(() => detectTransaction(value)).toThrow(TransactionRequiredError);
    }
  });
});

describe('enqueue routing without a server', () => {
  it.each([
    [-1, 'got -1'],
    [Number.NaN, 'got NaN'],
    ['10000', 'got the string "10000"'],
  ])(
    'refuses keyLockTimeoutMs %s with a RangeError naming it, before the transaction is used',
    async (value, got) => {
      // Prepare: an mssql Transaction that never began; its first request would fail in the driver.
      const transaction = new mssql.Transaction(mssqlPool);

      // Act
      const error = await enqueue(transaction, aMessage, { keyLockTimeoutMs: value as number }).catch(
        (e: unknown) => e,
      );

      // Assess
      expect(error).toBeInstanceOf(RangeError);
      expect((error as Error).message).toContain(`options.keyLockTimeoutMs must be a number of milliseconds`);
      expect((error as Error).message).toContain(got);
    },
  );

  it('refuses the pools before anything else happens', async () => {
    await expect(enqueue(pgPool as never, aMessage)).rejects.toThrow(TransactionRequiredError);
    await expect(enqueue(mssqlPool as never, aMessage)).rejects.toThrow(TransactionRequiredError);
    expect(pgPool.totalCount).toBe(0);
    expect(mssqlPool.connected).toBe(false);
  });

  it("runs an mssql Transaction's statements on it, with the driver's error translated", async () => {
    // An mssql Transaction that never began: its first request fails in the driver, without any network.
    const error = await enqueue(new mssql.Transaction(mssqlPool), aMessage).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QueueBoxError);
    expect(((error as QueueBoxError).cause as { code?: string }).code).toBe('ECONNCLOSED');
  });
});
