/**
 * A settle that schedules a row again with a delay PostgreSQL cannot add to a timestamp (Infinity, 2^59 s, NaN):
 * the statement is written for every row of the settle, the delay kept within MAX_PULL_DELAY_MS (about 68 years),
 * NaN as 0 (store-sqlserver's `clampDelayMs` does the same, and so do inserts now). Before, "interval out of range" failed the whole statement, so every row of the settle stayed
 * processing until its lease expired and was then delivered again.
 */
import { randomBytes } from 'node:crypto';
import { MAX_PULL_DELAY_MS, type Store } from '@queuebox/core';
import { testPool, testPostgresUrl } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clampDelayMs } from '../src/outbox-sql.ts';
import { openPostgresStore } from '../src/store.ts';

const schema = `t_settle_delay_${randomBytes(4).toString('hex')}`;
const pool = testPool(1);
let store: Store;

beforeAll(async () => {
  store = await openPostgresStore({ url: testPostgresUrl(), schema });
  await store.migrate();
});
afterAll(async () => {
  await store.close();
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

/** Days from now to each row's scheduled_at, by id. */
async function dueInDays(table: 'outbox' | 'inbox'): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ id: string; days: number }>(
    `SELECT id::text AS id, (extract(epoch FROM scheduled_at - now()) / 86400)::float8 AS days
     FROM "${schema}".${table} ORDER BY id`,
  );
  return Object.fromEntries(rows.map((r) => [r.id, r.days]));
}

describe('settles with delays beyond what a timestamp can take', () => {
  it('keeps a delay within 0 … MAX_PULL_DELAY_MS', () => {
    expect(clampDelayMs(1500)).toBe(1500);
    expect(clampDelayMs(-5)).toBe(0);
    expect(clampDelayMs(Number.NaN)).toBe(0);
    expect(clampDelayMs(Number.POSITIVE_INFINITY)).toBe(MAX_PULL_DELAY_MS);
    expect(clampDelayMs(1000 * 2 ** 59)).toBe(MAX_PULL_DELAY_MS);
  });

  it('retries every outbox row of the settle, whatever their delays', async () => {
    const ids = await store.outbox.insert(
      ['a', 'b', 'c', 'd'].map((key) => ({ topic: 't', key, payload: {}, maxAttempts: 5 })),
    );
    const claimed = await store.outbox.claim({ batchSize: 10, leaseMs: 60_000 });
    expect(claimed).toHaveLength(4);
    const delays = [Number.POSITIVE_INFINITY, 1000 * 2 ** 59, Number.NaN, 1000];

    const report = await store.outbox.retry(
      claimed.map((row, i) => ({
        id: row.id,
        claimToken: row.claimToken as string,
        error: 'down',
        delayMs: delays[i] as number,
        destination: 'hooks',
      })),
    );

    expect(report.stale).toEqual([]);
    expect(report.settled.map((s) => s.state)).toEqual(['Pending', 'Pending', 'Pending', 'Pending']);
    const days = await dueInDays('outbox');
    const [inf, huge, nan, second] = ids.map((id) => days[id] as number);
    expect(inf).toBeGreaterThan(365 * 60);
    expect(huge).toBeGreaterThan(365 * 60);
    expect(nan).toBeLessThan(1 / 86400);
    expect(second).toBeLessThan(1);
  });

  it('inserts an outbox row with a delay of Infinity, due after the longest delay, as SQL Server does', async () => {
    await pool.query(`DELETE FROM "${schema}".outbox`);
    const [id] = await store.outbox.insert([
      { topic: 't', key: 'k', payload: {}, maxAttempts: 5, delayMs: Number.POSITIVE_INFINITY },
    ]);
    expect((await dueInDays('outbox'))[id as string]).toBeGreaterThan(365 * 60);
  });

  it('retries an inbox row with a delay of Infinity', async () => {
    const { id } = await store.inbox.store({
      source: 'pull',
      idempotencyKey: 'k1',
      aggregateId: null,
      payload: {},
      maxAttempts: 5,
    });
    const [row] = await store.inbox.claim({ sources: ['pull'], batchSize: 1, leaseMs: 60_000 });
    expect(row?.id).toBe(id);

    const report = await store.inbox.retry([
      { id, claimToken: row?.claimToken as string, error: 'later', delayMs: Number.POSITIVE_INFINITY },
    ]);

    expect(report.settled).toEqual([{ id, state: 'Pending' }]);
    expect((await dueInDays('inbox'))[id]).toBeGreaterThan(365 * 60);
  });
});
