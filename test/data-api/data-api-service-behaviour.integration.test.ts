/**
 * What the RDS Data API does that the local endpoint once did not (API reference and "Troubleshooting Amazon RDS
 * Data API"), and what the Data API executor makes of it: a call into a transaction that is still running another,
 * a call that fails inside a transaction, the 45 s statement limit (with and without continueAfterTimeout), the
 * 4 MiB request and 65,536-character sql limits, throttling and 503s, an answer lost after the service acted, and
 * integers beyond 2^53. The real SDK client against `local-data-api.ts` on the real PostgreSQL; schema `t_dapi_service_…`.
 */
import {
  BeginTransactionCommand,
  ExecuteStatementCommand,
  RDSDataClient,
  RollbackTransactionCommand,
} from '@aws-sdk/client-rds-data';
import { StoreUnavailableError } from '@queuebox/core';
import { createDataApiExecutor } from '@queuebox/store-postgres';
import { requireServices } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalDataApi, startLocalDataApi } from './local-data-api.ts';

const needs = await requireServices('data api service behaviour', ['postgres']);

const LOCAL = { accessKeyId: 'local', secretAccessKey: 'local' };
const SCHEMA = `t_dapi_service_${process.pid}`;
const T = `"${SCHEMA}".t`;

describe.skipIf(needs.skipReason)('the Data API as the service behaves', () => {
  let endpoint: LocalDataApi;
  /** A second endpoint whose statement limit is 300 ms instead of 45 s. */
  let quick: LocalDataApi;
  let pool: pg.Pool;
  const clients: RDSDataClient[] = [];

  const clientOf = (api: LocalDataApi) => {
    const client = new RDSDataClient({
      endpoint: api.url,
      region: 'us-east-1',
      credentials: LOCAL,
      maxAttempts: 1,
    });
    clients.push(client);
    return client;
  };
  const executorOf = (api: LocalDataApi) =>
    createDataApiExecutor({ client: clientOf(api), resourceArn: api.resourceArn, secretArn: api.secretArn });
  const target = (api: LocalDataApi) => ({ resourceArn: api.resourceArn, secretArn: api.secretArn });
  const failure = (promise: Promise<unknown>) =>
    promise.then(
      () => undefined,
      (e: unknown) => e as Error & { name: string; message: string },
    );
  const ids = async () =>
    (await pool.query<{ id: number }>(`SELECT id FROM ${T} ORDER BY id`)).rows.map((r) => r.id);

  beforeAll(async () => {
    pool = new pg.Pool({ connectionString: needs.url.postgres, max: 2 });
    endpoint = await startLocalDataApi({ postgresUrl: needs.url.postgres, poolSize: 4 });
    quick = await startLocalDataApi({
      postgresUrl: needs.url.postgres,
      poolSize: 2,
      statementTimeoutMs: 300,
    });
    await pool.query(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
    await pool.query(`CREATE SCHEMA "${SCHEMA}"`);
    await pool.query(`CREATE TABLE ${T} (id int PRIMARY KEY, v text)`);
  });
  afterAll(async () => {
    for (const c of clients) c.destroy();
    await endpoint?.close();
    await quick?.close();
    await pool?.query(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
    await pool?.end();
  });

  it('answers a call into a transaction still running another with DatabaseErrorException', async () => {
    const client = clientOf(endpoint);
    const { transactionId } = await client.send(new BeginTransactionCommand(target(endpoint)));
    const slow = client.send(
      new ExecuteStatementCommand({ ...target(endpoint), transactionId, sql: 'SELECT pg_sleep(0.5)' }),
    );
    // The first call is on its way before the second is sent: the endpoint counts it before it runs the statement.
    while (endpoint.calls.Execute === 0) await new Promise((r) => setImmediate(r));
    const second = await failure(
      client.send(new ExecuteStatementCommand({ ...target(endpoint), transactionId, sql: 'SELECT 1' })),
    );
    await slow.catch(() => {});
    await client.send(new RollbackTransactionCommand({ ...target(endpoint), transactionId })).catch(() => {});

    expect(second?.name).toBe('DatabaseErrorException');
    expect(second?.message).toMatch(/still running a query/);
  });

  it('ends a transaction whose call failed: the next call finds no transaction', async () => {
    const client = clientOf(endpoint);
    const { transactionId } = await client.send(new BeginTransactionCommand(target(endpoint)));
    await client.send(
      new ExecuteStatementCommand({
        ...target(endpoint),
        transactionId,
        sql: `INSERT INTO ${T} VALUES (1, 'a')`,
      }),
    );
    const bad = await failure(
      client.send(new ExecuteStatementCommand({ ...target(endpoint), transactionId, sql: 'SELECT 1/0' })),
    );
    const next = await failure(
      client.send(new ExecuteStatementCommand({ ...target(endpoint), transactionId, sql: 'SELECT 1' })),
    );

    expect(bad?.name).toBe('DatabaseErrorException');
    expect(next?.name).toBe('TransactionNotFoundException');
    expect(await ids()).toEqual([]);
  });

  it('runs the calls of one transaction one at a time, as pg runs them on its connection', async () => {
    const db = executorOf(endpoint);

    const rows = await db.transaction(async (tx) => {
      const [a, b, c] = await Promise.all([
        tx.query<{ n: number }>(`INSERT INTO ${T} SELECT 2, 'b' FROM pg_sleep(0.2) RETURNING id AS n`),
        tx.query<{ n: number }>(`INSERT INTO ${T} VALUES (3, 'c') RETURNING id AS n`),
        tx.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T}`),
      ]);
      return [a.rows[0]?.n, b.rows[0]?.n, c.rows[0]?.n];
    });

    expect(rows).toEqual([2, 3, 2]);
    expect(await ids()).toEqual([2, 3]);
    await pool.query(`DELETE FROM ${T}`);
  });

  it('stops a statement past the statement limit (StatementTimeoutException → unavailable), unless continueAfterTimeout', async () => {
    const db = executorOf(quick);
    const marker = `aud_timeout_${process.pid}`;

    const stopped = await failure(db.query(`INSERT INTO ${T} SELECT 10, '${marker}' FROM pg_sleep(2)`));
    const continued = await failure(
      clientOf(quick).send(
        new ExecuteStatementCommand({
          ...target(quick),
          sql: `INSERT INTO ${T} SELECT 11, '${marker}' FROM pg_sleep(1)`,
          continueAfterTimeout: true,
        }),
      ),
    );
    // Both calls have answered; wait for the statements themselves to end (the continued one commits).
    for (;;) {
      const { rows } = await pool.query(
        `SELECT 1 FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%${marker}%' AND query NOT LIKE '%pg_stat_activity%'`,
      );
      if (rows.length === 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }

    expect(stopped).toBeInstanceOf(StoreUnavailableError);
    expect(continued?.name).toBe('StatementTimeoutException');
    expect(await ids()).toEqual([11]);
    await pool.query(`DELETE FROM ${T}`);
  });

  it('refuses a request over 4 MiB and an sql text over 65,536 characters, unrun', async () => {
    const client = clientOf(endpoint);
    const big = 'x'.repeat(4 * 1024 * 1024);

    const request = await failure(
      client.send(
        new ExecuteStatementCommand({
          ...target(endpoint),
          sql: `INSERT INTO ${T} VALUES (20, :v)`,
          parameters: [{ name: 'v', value: { stringValue: big } }],
        }),
      ),
    );
    const sql = await failure(
      client.send(
        new ExecuteStatementCommand({ ...target(endpoint), sql: `SELECT 1 /* ${'y'.repeat(65_536)} */` }),
      ),
    );

    expect(request?.name).toBe('BadRequestException');
    expect(sql?.name).toBe('BadRequestException');
    expect(await ids()).toEqual([]);
  });

  it('classes throttling and a 503 as unavailable and sends the call once', async () => {
    const db = executorOf(endpoint);
    endpoint.resetCalls();

    endpoint.failNext('Execute', 'ThrottlingException', 400);
    const throttled = await failure(db.query('SELECT 1'));
    endpoint.failNext('BeginTransaction', 'ServiceUnavailableError', 503);
    const unavailable = await failure(db.transaction(async (tx) => tx.query('SELECT 1')));

    expect(throttled).toBeInstanceOf(StoreUnavailableError);
    expect(unavailable).toBeInstanceOf(StoreUnavailableError);
    expect(endpoint.calls).toMatchObject({ Execute: 1, BeginTransaction: 1, CommitTransaction: 0 });
  });

  it('answers a commit whose answer was lost as unavailable, not as failed: the transaction did commit', async () => {
    const db = executorOf(endpoint);
    endpoint.loseNextAnswer('CommitTransaction');

    const lost = await failure(
      db.transaction(async (tx) => tx.query(`INSERT INTO ${T} VALUES ($1::int, 'committed')`, [30])),
    );

    // StoreUnavailableError means "outcome unknown": the caller retries, and its retry must be idempotent.
    expect(lost).toBeInstanceOf(StoreUnavailableError);
    expect(await ids()).toEqual([30]);
    await pool.query(`DELETE FROM ${T}`);
  });

  it('sends an integer beyond 2^53 exactly', async () => {
    const db = executorOf(endpoint);

    const { rows } = await db.query<{ v: string }>('SELECT ($1::bigint)::text AS v', [
      9_007_199_254_740_993n,
    ]);

    expect(rows).toEqual([{ v: '9007199254740993' }]);
  });
});
