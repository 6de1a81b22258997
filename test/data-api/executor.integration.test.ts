/**
 * The Data API executor against the local Data API endpoint (real SDK client, real PostgreSQL behind it): a paused
 * cluster, error classes, transactions, round trips per batch, and the endpoint's own size limits (the reason
 * large rows are read outside).
 */
import { RDSDataClient } from '@aws-sdk/client-rds-data';
import { StoreError, StoreUnavailableError } from '@queuebox/core';
import { createDataApiExecutor, openDataApiStore } from '@queuebox/store-postgres';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anOutboxMessage } from '../contract/fixtures.ts';
import { type LocalDataApi, startLocalDataApi } from './local-data-api.ts';

const needs = await requireServices('data api', ['postgres']);

const LOCAL = { accessKeyId: 'local', secretAccessKey: 'local' };

describe.skipIf(needs.skipReason)('Data API executor on the local endpoint', () => {
  const { schema } = usePostgresSchema(needs.url.postgres, 'dataapi_exec');
  let endpoint: LocalDataApi;
  const clients: RDSDataClient[] = [];

  const executor = (options: { resumeTimeoutMs?: number; onResuming?: () => void } = {}) => {
    const client = new RDSDataClient({
      endpoint: endpoint.url,
      region: 'us-east-1',
      credentials: LOCAL,
      maxAttempts: 1,
    });
    clients.push(client);
    return createDataApiExecutor({
      client,
      resourceArn: endpoint.resourceArn,
      secretArn: endpoint.secretArn,
      resumeBackoffMs: 100,
      ...options,
    });
  };

  beforeAll(async () => {
    endpoint = await startLocalDataApi({ postgresUrl: needs.url.postgres, poolSize: 4 });
    await executor().query(`CREATE SCHEMA IF NOT EXISTS "${schema.name}"`);
    await executor().query(`CREATE TABLE "${schema.name}".t (id int PRIMARY KEY, v text)`);
  });
  afterAll(async () => {
    for (const c of clients) c.destroy();
    await endpoint.close();
  });

  it('waits out a paused cluster (DatabaseResumingException) and then answers', async () => {
    const waits: number[] = [];
    const db = executor({ onResuming: () => waits.push(Date.now()) });
    endpoint.pause(700);
    endpoint.resetCalls();

    const { rows } = await db.query<{ one: number }>('SELECT 1 AS one');

    expect(rows).toEqual([{ one: 1 }]);
    expect(waits.length).toBeGreaterThanOrEqual(2);
    expect(endpoint.calls.Execute).toBe(waits.length + 1);
  });

  it('gives up as unavailable when the cluster resumes longer than the budget', async () => {
    const db = executor({ resumeTimeoutMs: 400 });
    endpoint.pause(5_000);
    try {
      await expect(db.query('SELECT 1')).rejects.toThrow(StoreUnavailableError);
      await expect(db.query('SELECT 1')).rejects.toThrow(/still resuming/);
    } finally {
      endpoint.pause(0);
      await db.query('SELECT 1');
    }
  });

  it('classes a SQL error as StoreError with its SQLSTATE, and an unreachable endpoint as unavailable', async () => {
    const db = executor();
    const missing = await db.query('SELECT * FROM no_such_table_here').catch((e: unknown) => e);
    const client = new RDSDataClient({
      endpoint: 'http://127.0.0.1:9',
      region: 'us-east-1',
      credentials: LOCAL,
      maxAttempts: 1,
    });
    clients.push(client);
    const down = createDataApiExecutor({
      client,
      resourceArn: endpoint.resourceArn,
      secretArn: endpoint.secretArn,
    });

    expect(missing).toBeInstanceOf(StoreError);
    expect(missing).not.toBeInstanceOf(StoreUnavailableError);
    expect((missing as StoreError).context.sqlState).toBe('42P01');
    await expect(down.query('SELECT 1')).rejects.toThrow(StoreUnavailableError);
  });

  it('commits a transaction on success and rolls it back when the callback throws', async () => {
    const db = executor();
    const t = `"${schema.name}".t`;
    endpoint.resetCalls();

    await db.transaction(async (tx) => {
      await tx.query(`INSERT INTO ${t} (id, v) VALUES ($1::int, $2)`, [1, 'kept']);
    });
    const failed = await db
      .transaction(async (tx) => {
        await tx.query(`INSERT INTO ${t} (id, v) VALUES ($1::int, $2)`, [2, 'undone']);
        throw new Error('the caller changed its mind');
      })
      .catch((e: unknown) => e);
    const { rows } = await db.query<{ id: number }>(`SELECT id FROM ${t} ORDER BY id`);

    expect((failed as Error).message).toBe('the caller changed its mind');
    expect(rows).toEqual([{ id: 1 }]);
    expect(endpoint.calls).toMatchObject({
      BeginTransaction: 2,
      CommitTransaction: 1,
      RollbackTransaction: 1,
    });
  });

  it('runs a text of several statements (a migration) one call each, in one transaction', async () => {
    const db = executor();
    endpoint.resetCalls();

    const result = await db.query(
      `INSERT INTO "${schema.name}".t VALUES (10, 'a;b'); INSERT INTO "${schema.name}".t VALUES (11, $$c;d$$); SELECT count(*)::int AS n FROM "${schema.name}".t WHERE id >= 10`,
    );

    expect(result.rows).toEqual([{ n: 2 }]);
    expect(endpoint.calls).toMatchObject({ Execute: 3, BeginTransaction: 1, CommitTransaction: 1 });
  });

  it('the endpoint refuses a row over 64 KB and an answer over 1 MiB, as the service does', async () => {
    const db = executor();

    await expect(db.query(`SELECT repeat('x', 70000) AS big`)).rejects.toThrow(/64 KB/);
    await expect(db.query(`SELECT repeat('x', 60000) FROM generate_series(1, 20)`)).rejects.toThrow(
      /size limit/,
    );
  });

  it('lists and replays rows over 64 KB through the admin store (large columns read outside)', async () => {
    const store = await openDataApiStore({
      resourceArn: endpoint.resourceArn,
      secretArn: endpoint.secretArn,
      endpoint: endpoint.url,
      region: 'us-east-1',
      credentials: LOCAL,
      schema: `${schema.name}_admin`,
    });
    try {
      await store.migrate();
      const big = (i: number) => ({ i, blob: 'é'.repeat(50_000) });
      await store.outbox.insert([0, 1, 2].map((i) => anOutboxMessage({ payload: big(i) })));
      const claimed = await store.outbox.claim({ batchSize: 10, leaseMs: 60_000 });
      await store.outbox.markSent(
        claimed.map((r) => ({ id: r.id, claimToken: r.claimToken ?? '', destination: 'd' })),
      );

      const page = await store.admin.list('outbox', { limit: 50 });
      const replay = await store.admin.replay(claimed[0]?.id ?? '');

      expect(page.rows.map((r) => r.payload)).toEqual([big(0), big(1), big(2)]);
      expect(replay.status).toBe('replayed');
    } finally {
      await store.close();
      await executor().query(`DROP SCHEMA IF EXISTS "${schema.name}_admin" CASCADE`);
    }
  });

  it('claims and settles a batch of 100 in one call each; rows over the inline share are read in pages', async () => {
    const store = await openDataApiStore({
      resourceArn: endpoint.resourceArn,
      secretArn: endpoint.secretArn,
      endpoint: endpoint.url,
      region: 'us-east-1',
      credentials: LOCAL,
      schema: `${schema.name}_store`,
    });
    try {
      await store.migrate();
      // 100 rows of 9 KB: together 900 KB, more than the claim may answer inline next to the other columns.
      await store.outbox.insert(
        Array.from({ length: 100 }, (_, i) => anOutboxMessage({ payload: { i, pad: 'p'.repeat(9_000) } })),
      );
      await store.outbox.insert(Array.from({ length: 100 }, (_, i) => anOutboxMessage({ payload: { i } })));

      endpoint.resetCalls();
      const big = await store.outbox.claim({ batchSize: 100, leaseMs: 60_000 });
      const bigCalls = endpoint.calls.Execute;
      endpoint.resetCalls();
      const small = await store.outbox.claim({ batchSize: 100, leaseMs: 60_000 });
      const smallCalls = endpoint.calls.Execute;
      endpoint.resetCalls();
      const report = await store.outbox.markSent(
        [...big, ...small].map((r) => ({ id: r.id, claimToken: r.claimToken ?? '', destination: 'd' })),
      );

      expect(big.map((r) => (r.payload as { pad: string }).pad.length)).toEqual(Array(100).fill(9_000));
      expect(bigCalls).toBeGreaterThan(1);
      expect(small).toHaveLength(100);
      expect(smallCalls).toBe(1);
      expect(report.settled).toHaveLength(200);
      expect(endpoint.calls.Execute).toBe(1);
    } finally {
      await store.close();
      await executor().query(`DROP SCHEMA IF EXISTS "${schema.name}_store" CASCADE`);
    }
  });
});
