import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  baseUrlOf,
  cleanup,
  eventually,
  postWebhook,
  type QueueBoxProcess,
  type Receiver,
  startQueueBox,
  startReceiver,
  startTcpProxy,
  type TcpProxy,
  testConfigYaml,
} from './support.ts';

const needs = await requireServices('local outage tests', ['postgres']);

describe.skipIf(needs.skipReason)('local runtime when the database goes away (real process)', () => {
  const { schema } = usePostgresSchema(needs.url.postgres, 'local_outage', 1);
  let proxy: TcpProxy;
  let receiver: Receiver;
  let queuebox: QueueBoxProcess;
  let base: string;

  beforeAll(async () => {
    const target = new URL(needs.url.postgres);
    proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    target.host = `127.0.0.1:${proxy.port}`;
    receiver = await startReceiver();
    queuebox = await startQueueBox({
      yaml: testConfigYaml({
        receiverUrl: receiver.url,
        database: { url: target.href, schema: schema.name },
      }),
    });
    base = await baseUrlOf(queuebox);
  });

  afterAll(async () => {
    await cleanup();
    await receiver?.close();
    await proxy?.close();
  });

  const healthStatus = async () => (await fetch(`${base}/health`)).status;

  it('answers /health 503 and webhooks 503 while the database is unreachable, and recovers', async () => {
    expect(await healthStatus()).toBe(200);

    proxy.cut();

    expect(await healthStatus()).toBe(503);
    const refused = await postWebhook(`${base}/inbox/demo`, 'outage-1', { type: 'a.b', data: { id: '1' } });
    expect(refused).toMatchObject({ status: 503, body: { error: 'store_unavailable' } });

    proxy.restore();

    await eventually(async () => (await healthStatus()) === 200, '/health back to 200');
    const accepted = await postWebhook(`${base}/inbox/demo`, 'outage-1', { type: 'a.b', data: { id: '1' } });
    expect(accepted.status).toBe(202);
    const [delivery] = await receiver.waitFor(1);
    expect(delivery?.headers['x-idempotency-key']).toBe('outage-1');
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toContain('queuebox_inbox_rejected_total{reason="store_unavailable",source="demo"} 1');
    expect(await queuebox.stop('SIGTERM')).toBe(0);
  });
});
