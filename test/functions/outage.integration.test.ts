/**
 * The handlers while the database goes away and comes back (a TCP proxy in front of the real PostgreSQL cuts every
 * connection): the invocation that meets the outage fails (ticks) or answers 503 (inbox-http, admin-http), and the
 * next invocation closes the broken store, opens a new one and works.
 */
import type { QueueBoxConfig } from '@queuebox/config';
import { StoreUnavailableError } from '@queuebox/core';
import { openStore } from '@queuebox/store';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler as createAdminHttp } from '../../functions/admin-http.ts';
import { createHandler as createInboxHttp } from '../../functions/inbox-http.ts';
import { createHandler as createRelayTick } from '../../functions/relay-tick.ts';
import {
  cleanup,
  type Receiver,
  signStandardWebhook,
  startReceiver,
  startTcpProxy,
  type TcpProxy,
} from '../local/support.ts';
import {
  aLambdaContext,
  anApiGatewayEvent,
  aTickEvent,
  functionConfigYaml,
  type TestShell,
  testShell,
  writeConfigFile,
} from './support.ts';

const needs = await requireServices('function tests: outage', ['postgres']);

describe.skipIf(needs.skipReason)('handlers across a database outage', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'functions_outage', 1);
  let proxy: TcpProxy;
  let receiver: Receiver;
  let configFile: string;
  const shells: TestShell[] = [];
  /** Stores opened per handler: each open goes through the real `openStore`. */
  const opened = { relay: 0, inbox: 0, admin: 0 };
  const counting = (name: keyof typeof opened) => (database: QueueBoxConfig['database']) => {
    opened[name] += 1;
    return openStore(database);
  };
  const shell = (name: keyof typeof opened) => {
    const options = testShell(configFile, { openStore: counting(name) });
    shells.push(options);
    return options;
  };

  beforeAll(async () => {
    const target = new URL(needs.url.postgres);
    const migrated = await openStore({ provider: 'postgres', url: needs.url.postgres, schema: schema.name });
    await migrated.migrate();
    await migrated.close();
    proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    target.host = `127.0.0.1:${proxy.port}`;
    receiver = await startReceiver();
    configFile = await writeConfigFile(
      functionConfigYaml({ databaseUrl: target.href, schema: schema.name, receiverUrl: receiver.url }),
    );
  });

  afterAll(async () => {
    for (const options of shells) for (const cache of options.caches) await cache.close();
    await receiver?.close();
    await proxy?.close();
    await cleanup();
  });

  const webhook = (id: string) => {
    const body = JSON.stringify({ type: 'order.created', data: { id } });
    return anApiGatewayEvent({ headers: signStandardWebhook(id, body), body });
  };

  it('relay-tick fails while the database is gone, then reopens its store on the next invocation', async () => {
    const relayTick = createRelayTick(shell('relay'));
    const healthy = await relayTick(aTickEvent(), aLambdaContext());
    expect(healthy.forwarded).toBe(0);

    proxy.cut();
    const failed = relayTick(aTickEvent(), aLambdaContext());
    await expect(failed).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(shells.at(-1)?.cache.broken).toBe(true);
    proxy.restore();

    const recovered = await relayTick(aTickEvent(), aLambdaContext());

    expect(recovered.forwarded).toBe(0);
    expect(opened.relay).toBe(2);
    expect(shells.at(-1)?.cache.broken).toBe(false);
  });

  it('inbox-http answers 503 store_unavailable during the outage and 202 on the next request', async () => {
    const inboxHttp = createInboxHttp(shell('inbox'));
    expect((await inboxHttp(webhook('before'), aLambdaContext())).statusCode).toBe(202);

    proxy.cut();
    const refused = await inboxHttp(webhook('during'), aLambdaContext());
    proxy.restore();
    const accepted = await inboxHttp(webhook('during'), aLambdaContext());

    expect(refused.statusCode).toBe(503);
    expect(JSON.parse(String(refused.body))).toMatchObject({ error: 'store_unavailable' });
    expect(accepted.statusCode).toBe(202);
    expect(opened.inbox).toBe(2);
    const rows = await pool.query(`SELECT idempotency_key FROM "${schema.name}".inbox ORDER BY id`);
    expect(rows.rows.map((r) => r.idempotency_key)).toEqual(['before', 'during']);
  });

  it('inbox-http answers 503 before its timeout when the database goes silent, and 202 on the next request', async () => {
    const inboxHttp = createInboxHttp(shell('inbox'));
    expect((await inboxHttp(webhook('before-silence'), aLambdaContext())).statusCode).toBe(202);
    const opens = opened.inbox;

    proxy.silence();
    const started = performance.now();
    // 2.5 s left: the answer comes 1 s before the function would time out, whatever the query timeout.
    const refused = await inboxHttp(webhook('silenced'), aLambdaContext({ remainingMs: 2500 }));
    const tookMs = performance.now() - started;
    proxy.restore();
    const accepted = await inboxHttp(webhook('silenced'), aLambdaContext());

    expect(refused.statusCode).toBe(503);
    expect(JSON.parse(String(refused.body))).toMatchObject({ error: 'store_unavailable' });
    expect(tookMs).toBeGreaterThanOrEqual(1400);
    expect(tookMs).toBeLessThan(2500);
    expect(accepted.statusCode).toBe(202);
    expect(opened.inbox).toBe(opens + 1);
    const rows = await pool.query(
      `SELECT count(*)::int AS n FROM "${schema.name}".inbox WHERE idempotency_key = 'silenced'`,
    );
    expect(rows.rows[0]?.n).toBe(1);
  });

  it('admin-http answers 503 before its timeout when the database goes silent, then serves on a new store', async () => {
    const adminHttp = createAdminHttp(shell('admin'));
    const opens = opened.admin;
    // A route that waits on the database as long as it takes (unlike /admin/health, which has its own 2 s limit).
    const stats = (remainingMs?: number) =>
      adminHttp(
        anApiGatewayEvent({ method: 'GET', path: '/admin/stats' }),
        aLambdaContext(remainingMs === undefined ? {} : { remainingMs }),
      );
    expect((await stats()).statusCode).toBe(200);

    proxy.silence();
    const during = await stats(2500);
    proxy.restore();
    const after = await stats();

    expect([during.statusCode, after.statusCode]).toEqual([503, 200]);
    expect(JSON.parse(String(during.body))).toMatchObject({ error: 'store_unavailable' });
    expect(opened.admin).toBe(opens + 2);
  });

  it('admin-http answers GET /admin/health 200, 503 while the database is gone, and 200 again', async () => {
    const adminHttp = createAdminHttp(shell('admin'));
    const opens = opened.admin;
    const health = () =>
      adminHttp(anApiGatewayEvent({ method: 'GET', path: '/admin/health' }), aLambdaContext());

    const before = await health();
    proxy.cut();
    const during = await health();
    proxy.restore();
    const after = await health();

    expect([before.statusCode, during.statusCode, after.statusCode]).toEqual([200, 503, 200]);
    expect(JSON.parse(String(before.body))).toEqual({ status: 'ok' });
    expect(JSON.parse(String(during.body))).toEqual({ status: 'unavailable', error: 'store_unavailable' });
    expect(opened.admin).toBe(opens + 2);
  });

  it('admin-http answers GET /health (liveness) 200 during the outage without opening a store', async () => {
    const adminHttp = createAdminHttp(shell('admin'));
    const before = opened.admin;

    proxy.cut();
    const live = await adminHttp(anApiGatewayEvent({ method: 'GET', path: '/health' }), aLambdaContext());
    proxy.restore();

    expect(live.statusCode).toBe(200);
    expect(JSON.parse(String(live.body))).toEqual({ status: 'ok' });
    expect(opened.admin).toBe(before);
  });

  it('admin-http answers 404 for paths it does not serve and 405 for a POST to /health', async () => {
    const adminHttp = createAdminHttp(shell('admin'));

    const unknown = await adminHttp(
      anApiGatewayEvent({ method: 'GET', path: '/admin/nothing-here' }),
      aLambdaContext(),
    );
    const post = await adminHttp(
      anApiGatewayEvent({ method: 'POST', path: '/health', body: '{}' }),
      aLambdaContext(),
    );

    expect(unknown.statusCode).toBe(404);
    expect(JSON.parse(String(unknown.body))).toMatchObject({ error: 'not_found' });
    expect(post.statusCode).toBe(405);
    expect(post.headers?.allow).toBe('GET');
  });
});
