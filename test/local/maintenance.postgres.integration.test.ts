/**
 * The local runtime's maintenance timers, in this process (`startRuntime`) on a real PostgreSQL: retention deletes
 * finished rows older than `retention.*` and counts them on /metrics; the row gauges follow the table on their
 * timer. The intervals are options of `startRuntime`, set short here.
 */
import { parseConfig } from '@queuebox/config';
import { type Runtime, startRuntime } from '@queuebox/local';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from './support.ts';

const needs = await requireServices('local maintenance tests', ['postgres']);

const silent = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child() {
    return silent;
  },
};

describe.skipIf(needs.skipReason)('local runtime maintenance: retention and gauges (in process)', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'local_maint', 2);
  let runtime: Runtime;

  const outbox = () => `"${schema.name}".outbox`;
  const metric = async (line: RegExp): Promise<number | undefined> => {
    const text = await (await fetch(`${runtime.url}/metrics`)).text();
    const value = line.exec(text)?.[1];
    return value === undefined ? undefined : Number(value);
  };

  beforeAll(async () => {
    const config = parseConfig({
      database: { provider: 'postgres', url: needs.url.postgres, schema: schema.name },
      http: { port: 0, host: '127.0.0.1' },
      retention: { keepSentHours: 1, keepDeadHours: 24, batchSize: 2 },
    });
    runtime = await startRuntime(config, {
      logger: silent,
      statsIntervalMs: 100,
      retentionIntervalMs: 200,
      brokerConsumers: false,
    });
  });

  afterAll(async () => {
    expect(await runtime?.stop('test end')).toBe(true);
  });

  it('deletes sent rows past keepSentHours and dead rows past keepDeadHours, in batches, and keeps the rest', async () => {
    // Five old sent rows (two batches and a bit), one recent sent row, one old dead row past 24 h, one dead at 2 h.
    await pool.query(
      `INSERT INTO ${outbox()} (topic, payload, max_attempts, state, sent_at, updated_at)
       SELECT 'old.sent', '{}', 1, 'sent', now() - interval '2 hours', now() - interval '2 hours'
         FROM generate_series(1, 5)`,
    );
    await pool.query(
      `INSERT INTO ${outbox()} (topic, payload, max_attempts, state, sent_at) VALUES ('new.sent', '{}', 1, 'sent', now())`,
    );
    await pool.query(
      `INSERT INTO ${outbox()} (topic, payload, max_attempts, state, updated_at) VALUES
         ('old.dead', '{}', 1, 'dead', now() - interval '2 days'),
         ('young.dead', '{}', 1, 'dead', now() - interval '2 hours')`,
    );

    await eventually(async () => {
      const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${outbox()}`);
      return rows[0]?.n === 2;
    }, 'retention deleting the old rows');

    const { rows } = await pool.query<{ topic: string }>(`SELECT topic FROM ${outbox()} ORDER BY topic`);
    expect(rows.map((r) => r.topic)).toEqual(['new.sent', 'young.dead']);
    expect(await metric(/^queuebox_retention_deleted_total\{state="sent",table="outbox"\} (\d+)$/m)).toBe(5);
    expect(await metric(/^queuebox_retention_deleted_total\{state="dead",table="outbox"\} (\d+)$/m)).toBe(1);
  });

  it('refreshes the dead-row gauge on its timer', async () => {
    await pool.query(
      `INSERT INTO ${outbox()} (topic, payload, max_attempts, state) VALUES ('fresh.dead', '{}', 1, 'dead')`,
    );

    await eventually(
      async () => (await metric(/^queuebox_dead_rows\{table="outbox"\} (\d+)$/m)) === 2,
      'the dead-row gauge showing 2',
    );
  });
});
