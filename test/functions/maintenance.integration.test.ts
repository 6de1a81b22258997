/**
 * maintenance-tick and admin-http's /admin/stats against the real PostgreSQL: retention deletes finished rows older
 * than configured in bounded batches, and the dead-row and oldest-pending gauges go out as EMF per table with the
 * dimensions the alarms read ({ service, Table }).
 */
import type { Store } from '@queuebox/core';
import { openStore } from '@queuebox/store';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler as createAdminHttp } from '../../functions/admin-http.ts';
import { createHandler as createMaintenanceTick } from '../../functions/maintenance-tick.ts';
import { createHandler as createMigrate } from '../../functions/migrate.ts';
import { createHandler as createOutboxTick } from '../../functions/outbox-tick.ts';
import { cleanup } from '../local/support.ts';
import {
  aLambdaContext,
  anApiGatewayEvent,
  anInvokeRecorder,
  aScheduledEvent,
  captureEmf,
  type EmfDocument,
  type TestShell,
  testShell,
  writeConfigFile,
} from './support.ts';

const needs = await requireServices('function tests: maintenance', ['postgres']);

describe.skipIf(needs.skipReason)('maintenance-tick and /admin/stats', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'functions_maint', 1);
  const shells: TestShell[] = [];
  let configFile: string;
  let store: Store;
  const testShellWith = (extra: Parameters<typeof testShell>[1]) => {
    const options = testShell(configFile, extra);
    shells.push(options);
    return options;
  };
  const shell = () => testShellWith({});
  const s = () => `"${schema.name}"`;

  beforeAll(async () => {
    // No route: every outbox row the tick claims goes dead at once ("no route matches").
    configFile = await writeConfigFile(`database:
  url: ${JSON.stringify(needs.url.postgres)}
  schema: ${schema.name}
  poolSize: 2
retention:
  keepSentHours: 1
  keepDeadHours: 2
  batchSize: 2
`);
    await createMigrate(shell())(undefined, aLambdaContext());
    store = await openStore({
      provider: 'postgres',
      url: needs.url.postgres,
      schema: schema.name,
      poolSize: 2,
    });
    await store.outbox.insert(
      Array.from({ length: 5 }, (_, i) => ({ topic: 'nowhere', payload: { i }, maxAttempts: 3 })),
    );
    await createOutboxTick(shell())(aScheduledEvent(), aLambdaContext());
    await store.outbox.insert([{ topic: 'later', payload: {}, maxAttempts: 3 }]);
    await store.inbox.store({ source: 'hooks', idempotencyKey: 'k1', payload: {}, maxAttempts: 3 });
    // Age the rows by the database clock: three dead rows are 3 h old (past keepDeadHours), the others stay.
    await pool.query(
      `UPDATE ${s()}.outbox SET updated_at = now() - interval '3 hours' WHERE id IN (SELECT id FROM ${s()}.outbox WHERE state = 'dead' ORDER BY id LIMIT 3)`,
    );
    await pool.query(
      `UPDATE ${s()}.outbox SET scheduled_at = now() - interval '90 seconds' WHERE topic = 'later'`,
    );
    await pool.query(`UPDATE ${s()}.inbox SET scheduled_at = now() - interval '30 seconds'`);
  });

  afterAll(async () => {
    for (const options of shells) for (const cache of options.caches) await cache.close();
    await store?.close();
    await cleanup();
  });

  const gauges = (emf: readonly EmfDocument[], table: string) => emf.find((doc) => doc.Table === table);

  it('publishes the gauges but deletes nothing when no time is left in the budget', async () => {
    const maintenance = createMaintenanceTick(shell());

    const { result, emf } = await captureEmf(() =>
      maintenance(aScheduledEvent(), aLambdaContext({ remainingMs: 1_000 })),
    );

    expect(result.retention).toMatchObject({ complete: false, total: 0 });
    expect(gauges(emf, 'outbox')).toMatchObject({ DeadRows: 5 });
  });

  it('deletes dead rows past keepDeadHours in batches, then publishes DeadRows and OldestPendingAgeSeconds per table', async () => {
    const maintenance = createMaintenanceTick(shell());

    const { result, emf } = await captureEmf(() => maintenance(aScheduledEvent(), aLambdaContext()));

    expect(result.retention).toMatchObject({
      deleted: { outbox: { sent: 0, dead: 3 }, inbox: { processed: 0, dead: 0 } },
      complete: true,
    });
    expect(result.retention.batches).toBeGreaterThanOrEqual(2);
    const outbox = gauges(emf, 'outbox');
    const inbox = gauges(emf, 'inbox');
    expect(outbox).toMatchObject({ service: 'queuebox-test', Table: 'outbox', DeadRows: 2 });
    expect(inbox).toMatchObject({ service: 'queuebox-test', Table: 'inbox', DeadRows: 0 });
    expect(outbox?.OldestPendingAgeSeconds).toBeGreaterThanOrEqual(89);
    expect(inbox?.OldestPendingAgeSeconds).toBeGreaterThanOrEqual(29);
    expect(outbox?._aws.CloudWatchMetrics[0]).toEqual({
      Namespace: 'QueueBox',
      Dimensions: [['service', 'Table']],
      Metrics: [
        { Name: 'DeadRows', Unit: 'Count' },
        { Name: 'OldestPendingAgeSeconds', Unit: 'Seconds' },
      ],
    });
  });

  it('answers GET /admin/stats with the counts per state of both tables', async () => {
    const adminHttp = createAdminHttp(shell());

    const answer = await adminHttp(
      anApiGatewayEvent({ method: 'GET', path: '/admin/stats' }),
      aLambdaContext(),
    );

    expect(answer.statusCode).toBe(200);
    const body = JSON.parse(String(answer.body));
    expect(body.outbox.counts).toMatchObject({ pending: 1, dead: 2, sent: 0 });
    expect(body.inbox.counts).toMatchObject({ pending: 1, processed: 0 });
    expect(body.outbox.deadByTopic).toEqual({ nowhere: 2 });
  });

  it('reads the raw query string: a filter given twice is refused, as locally, not read comma-joined', async () => {
    const adminHttp = createAdminHttp(shell());
    const list = (query: string) =>
      adminHttp(anApiGatewayEvent({ method: 'GET', path: '/admin/outbox', query }), aLambdaContext());

    const once = await list('state=dead&topic=nowhere');
    const twice = await list('topic=nowhere&topic=elsewhere');

    expect(once.statusCode).toBe(200);
    expect(JSON.parse(String(once.body)).rows).toHaveLength(2);
    expect(twice.statusCode).toBe(400);
    expect(JSON.parse(String(twice.body))).toMatchObject({ error: 'invalid_parameter' });
  });

  it('serves the operator API under /admin: a requeue moves dead rows back to pending and wakes outbox-tick', async () => {
    const recorder = anInvokeRecorder();
    const adminHttp = createAdminHttp(
      testShellWith({ invoker: recorder, env: { OUTBOX_TICK_FUNCTION_NAME: 'queuebox-test-OutboxTick' } }),
    );

    const answer = await adminHttp(
      anApiGatewayEvent({
        method: 'POST',
        path: '/admin/outbox/requeue',
        body: JSON.stringify({ topic: 'nowhere' }),
      }),
      aLambdaContext(),
    );

    expect(answer.statusCode).toBe(200);
    expect(JSON.parse(String(answer.body))).toMatchObject({ count: 2 });
    expect(recorder.invokes).toEqual([
      { functionName: 'queuebox-test-OutboxTick', payload: { trigger: 'wakeup' } },
    ]);
    const dead = await pool.query(`SELECT count(*) AS n FROM ${s()}.outbox WHERE state = 'dead'`);
    expect(Number(dead.rows[0]?.n)).toBe(0);
  });
});
