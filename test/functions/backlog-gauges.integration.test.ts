/**
 * The OldestPendingAgeSeconds alarm sees a backlog nobody drained: outbox-tick and relay-tick publish the age of
 * their table's oldest due pending row before each drain, on every tick, also when the drain then finds nothing
 * claimable; and the DeadRows alarm sees rows that went dead where no function was (a pull worker's markDead). An
 * idle tick writes only JSON lines (no Powertools "No application metrics" text).
 */
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler as createInboxHttp } from '../../functions/inbox-http.ts';
import { Logger } from '../../functions/lambda-shell/lambda.ts';
import { createHandler as createMigrate } from '../../functions/migrate.ts';
import { createHandler as createOutboxTick } from '../../functions/outbox-tick.ts';
import { createHandler as createRelayTick } from '../../functions/relay-tick.ts';
import { cleanup, type Receiver, signStandardWebhook, startReceiver } from '../local/support.ts';
import {
  aLambdaContext,
  anApiGatewayEvent,
  aTickEvent,
  captureOutput,
  functionConfigYaml,
  RecordingMetrics,
  type TestShell,
  testShell,
  writeConfigFile,
} from './support.ts';

const needs = await requireServices('function tests: backlog gauges', ['postgres']);

const HOUR_S = 3600;

describe.skipIf(needs.skipReason)('oldest pending age before every drain', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'functions_backlog', 1);
  const shells: TestShell[] = [];
  let receiver: Receiver;
  let configFile: string;
  const s = () => `"${schema.name}"`;

  const shell = (extra: Parameters<typeof testShell>[1] = {}) => {
    const options = testShell(configFile, extra);
    shells.push(options);
    return options;
  };
  /** The OldestPendingAgeSeconds values published for `table`, in order. */
  const ages = (metrics: RecordingMetrics, table: 'outbox' | 'inbox') =>
    metrics.published
      .filter((d) => d.dimensions.Table === table && 'OldestPendingAgeSeconds' in d.metrics)
      .map((d) => d.metrics.OldestPendingAgeSeconds ?? Number.NaN);

  beforeAll(async () => {
    receiver = await startReceiver();
    configFile = await writeConfigFile(
      functionConfigYaml({ databaseUrl: needs.url.postgres, schema: schema.name, receiverUrl: receiver.url }),
    );
    await createMigrate(shell())(undefined, aLambdaContext());
  });

  afterAll(async () => {
    for (const options of shells) for (const cache of options.caches) await cache.close();
    await receiver?.close();
    await cleanup();
  });

  it('relay-tick: a push webhook whose wake-up failed, due 2 h ago, shows up as a 2 h age, not as 0', async () => {
    // The audit's reproduction: the webhook is stored (202), its wake-up of relay-tick fails (a WARN only).
    const inboxHttp = createInboxHttp(
      shell({
        env: { RELAY_TICK_FUNCTION_NAME: 'queuebox-test-RelayTick' },
        invoker: {
          invokeAsync: () => Promise.reject(new Error('Rate exceeded (test)')),
        },
      }),
    );
    const body = JSON.stringify({ type: 'order.created', data: { id: 'late-1' } });
    const stored = await inboxHttp(
      anApiGatewayEvent({ headers: signStandardWebhook('late-1', body), body }),
      aLambdaContext(),
    );
    expect(stored.statusCode).toBe(202);
    await pool.query(
      `UPDATE ${s()}.inbox SET scheduled_at = scheduled_at - interval '2 hours', received_at = received_at - interval '2 hours'`,
    );
    const metrics = new RecordingMetrics();
    const relayTick = createRelayTick(shell({ metrics }));

    const relayed = await relayTick(aTickEvent('schedule'), aLambdaContext());

    expect(relayed.forwarded).toBe(1);
    const inbox = ages(metrics, 'inbox');
    // Before the drain: the 2 h the row waited; after it (the forward changed the table): 0.
    expect(inbox[0]).toBeGreaterThanOrEqual(2 * HOUR_S);
    expect(inbox[0]).toBeLessThan(2 * HOUR_S + 60);
    expect(inbox.slice(1)).toEqual([0]);
    expect(relayed.oldestPendingBeforeMs).toBeGreaterThanOrEqual(2 * HOUR_S * 1000);
  });

  it('outbox-tick: a due row no claim can take (held by another transaction) is reported on a tick that claims nothing', async () => {
    await pool.query(`DELETE FROM ${s()}.outbox`);
    const { rows } = await pool.query(
      `INSERT INTO ${s()}.outbox (topic, payload, max_attempts, scheduled_at, created_at, updated_at)
       VALUES ('demo.stuck', '{}', 5, now() - interval '2 hours', now() - interval '2 hours', now() - interval '2 hours')
       RETURNING id`,
    );
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT id FROM ${s()}.outbox WHERE id = $1 FOR UPDATE`, [rows[0]?.id]);
      const metrics = new RecordingMetrics();
      const outboxTick = createOutboxTick(shell({ metrics }));

      const drained = await outboxTick(aTickEvent('schedule'), aLambdaContext());

      expect(drained).toMatchObject({ claimed: 0, sent: 0 });
      const outbox = ages(metrics, 'outbox');
      expect(outbox).toHaveLength(1);
      expect(outbox[0]).toBeGreaterThanOrEqual(2 * HOUR_S);
      expect(outbox[0]).toBeLessThan(2 * HOUR_S + 60);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    await pool.query(`DELETE FROM ${s()}.outbox`);
  });

  it("relay-tick: an inbox row a pull worker sent dead in the application's process reaches DeadRows on the next tick", async () => {
    // The audit's case: nothing on AWS hears the pull worker's markDead; before, the inbox's DeadRows waited for the
    // daily maintenance tick (or for push traffic that made the relay forward something).
    await pool.query(`DELETE FROM ${s()}.inbox`);
    await pool.query(
      `INSERT INTO ${s()}.inbox (source, idempotency_key, payload, max_attempts, state, attempt, last_error)
       VALUES ('orders-pull', 'given-up-1', '{}', 3, 'dead', 3, 'the worker gave up')`,
    );
    const metrics = new RecordingMetrics();
    const relayTick = createRelayTick(shell({ metrics }));

    const relayed = await relayTick(aTickEvent('schedule'), aLambdaContext());

    expect(relayed).toMatchObject({ forwarded: 0, dead: 0 });
    const dead = metrics.published
      .filter((d) => d.dimensions.Table === 'inbox' && 'DeadRows' in d.metrics)
      .map((d) => d.metrics.DeadRows);
    expect(dead).toEqual([1]);
    await pool.query(`DELETE FROM ${s()}.inbox`);
  });

  it('outbox-tick samples the inbox too where no relay-tick runs (pull sources only): a dead row and a 2 h wait at the next tick', async () => {
    // An outside audit: with pull sources only, infra plans no relay-tick, and the inbox's gauges waited for the
    // daily maintenance run.
    const pullOnly = await writeConfigFile(
      functionConfigYaml({
        databaseUrl: needs.url.postgres,
        schema: schema.name,
        receiverUrl: receiver.url,
      }).replace('    type: http\n', '    type: http\n    mode: pull\n'),
    );
    await pool.query(`DELETE FROM ${s()}.inbox`);
    await pool.query(
      `INSERT INTO ${s()}.inbox (source, idempotency_key, payload, max_attempts, state, attempt, last_error)
       VALUES ('demo', 'given-up-2', '{}', 3, 'dead', 3, 'the worker gave up')`,
    );
    await pool.query(
      `INSERT INTO ${s()}.inbox (source, idempotency_key, payload, max_attempts, scheduled_at, received_at)
       VALUES ('demo', 'waiting-2h', '{}', 3, now() - interval '2 hours', now() - interval '2 hours')`,
    );
    const metrics = new RecordingMetrics();
    const pushMetrics = new RecordingMetrics();
    const pullShell = testShell(pullOnly, { metrics });
    shells.push(pullShell);
    const outboxTick = createOutboxTick(pullShell);
    const pushOutboxTick = createOutboxTick(shell({ metrics: pushMetrics }));

    const drained = await outboxTick(aTickEvent('schedule'), aLambdaContext());
    await pushOutboxTick(aTickEvent('schedule'), aLambdaContext());

    const inbox = metrics.published.filter((d) => d.dimensions.Table === 'inbox');
    expect(inbox.map((d) => d.metrics.DeadRows)).toEqual([1]);
    expect(inbox[0]?.metrics.OldestPendingAgeSeconds).toBeGreaterThanOrEqual(2 * HOUR_S);
    expect(inbox[0]?.metrics.OldestPendingAgeSeconds).toBeLessThan(2 * HOUR_S + 60);
    expect(drained).toMatchObject({ inboxOldestPendingBeforeMs: expect.any(Number) });
    // With a push source relay-tick samples the inbox: outbox-tick leaves it alone.
    expect(pushMetrics.published.filter((d) => d.dimensions.Table === 'inbox')).toEqual([]);

    // A sample of the inbox that fails fails the invocation after the drain, so the errors alarm hears it.
    await pool.query(`ALTER TABLE ${s()}.inbox RENAME TO inbox_away`);
    try {
      await expect(outboxTick(aTickEvent('schedule'), aLambdaContext())).rejects.toThrow();
    } finally {
      await pool.query(`ALTER TABLE ${s()}.inbox_away RENAME TO inbox`);
    }
    await pool.query(`DELETE FROM ${s()}.inbox`);
  });

  it('an idle tick publishes a 0 age and writes nothing but JSON lines', async () => {
    await pool.query(`DELETE FROM ${s()}.outbox WHERE state = 'pending'`);
    // Powertools' own Metrics and an INFO logger, as deployed: everything they write is captured.
    const options = shell({ logger: new Logger({ serviceName: 'queuebox-test', logLevel: 'INFO' }) });
    const outboxTick = createOutboxTick(options);

    const { result, lines } = await captureOutput(() => outboxTick(aTickEvent('schedule'), aLambdaContext()));

    expect(result).toMatchObject({ claimed: 0, oldestPendingBeforeMs: null, gauges: {} });
    const notJson = lines.filter((line) => {
      try {
        JSON.parse(line);
        return false;
      } catch {
        return true;
      }
    });
    expect(notJson).toEqual([]);
    const emf = lines.map((line) => JSON.parse(line)).filter((doc) => doc._aws !== undefined);
    expect(emf).toEqual([
      expect.objectContaining({
        Table: 'outbox',
        OldestPendingAgeSeconds: 0,
        DeadRows: 0,
        service: 'queuebox-test',
      }),
    ]);
    expect(lines.some((line) => JSON.parse(line).message === 'outbox drain')).toBe(true);
  });
});
