/**
 * The local runtime as a real process on a real PostgreSQL: a signed webhook goes in, is relayed and delivered to
 * a real HTTP receiver; duplicates, bad signatures and oversized bodies are answered as docs/design.md §5 says; /health
 * and /metrics answer; SIGTERM during a delivery lets it finish, exits 0 and leaves no row in processing.
 */
import { type ClientRequest, request } from 'node:http';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  baseUrlOf,
  cleanup,
  eventually,
  hasValidSignature,
  postWebhook,
  type QueueBoxProcess,
  type Receiver,
  signStandardWebhook,
  startQueueBox,
  startReceiver,
  testConfigYaml,
} from './support.ts';

const needs = await requireServices('local runtime tests', ['postgres']);

const MAX_BODY_BYTES = 4096;

/** POSTs a body without Content-Length, written by `write`; resolves with the answer, rejects on a socket error. */
function postChunked(
  url: string,
  headers: Record<string, string>,
  write: (req: ClientRequest) => void,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (part: string) => {
        text += part;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    write(req);
  });
}

describe.skipIf(needs.skipReason)('local runtime on PostgreSQL (real process)', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'local_runtime', 2);
  let receiver: Receiver;
  let queuebox: QueueBoxProcess;
  let base: string;

  const statesOf = async (table: 'inbox' | 'outbox') => {
    const { rows } = await pool.query<{ state: string; n: number }>(
      `SELECT state, count(*)::int AS n FROM "${schema.name}"."${table}" GROUP BY state ORDER BY state`,
    );
    return Object.fromEntries(rows.map((r) => [r.state, r.n]));
  };

  beforeAll(async () => {
    receiver = await startReceiver();
    queuebox = await startQueueBox({
      yaml: testConfigYaml({
        receiverUrl: receiver.url,
        database: { url: needs.url.postgres, schema: schema.name },
        maxBodyBytes: MAX_BODY_BYTES,
      }),
    });
    base = await baseUrlOf(queuebox);
  });

  afterAll(async () => {
    await cleanup();
    await receiver?.close();
  });

  it('migrated the schema at start and answers /health with 200 ok', async () => {
    const migrated = queuebox.logs.find((l) => l.message === 'migrations applied');
    expect(migrated?.version).toBeGreaterThanOrEqual(1);

    const response = await fetch(`${base}/health`);

    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ok' });
  });

  it('stores a signed webhook, relays it and delivers it signed to the receiver', async () => {
    const payload = { type: 'order.created', data: { id: 'order-1', total: 12 } };

    const answer = await postWebhook(`${base}/inbox/demo`, 'msg-1', payload);

    expect(answer.status).toBe(202);
    expect(answer.body).toMatchObject({ status: 'accepted' });
    const [delivery] = await receiver.waitFor(1);
    expect(delivery?.method).toBe('POST');
    expect(JSON.parse(delivery?.body ?? 'null')).toEqual(payload);
    expect(delivery?.headers['x-source']).toBe('demo');
    expect(delivery?.headers['x-idempotency-key']).toBe('msg-1');
    expect(delivery?.headers['x-inbox-id']).toBe(answer.body.id);
    expect(hasValidSignature(delivery?.headers ?? {}, delivery?.body ?? '')).toBe(true);
  });

  it('answers 200 duplicate for a repeated webhook-id and delivers it only once', async () => {
    const repeat = await postWebhook(`${base}/inbox/demo`, 'msg-1', {
      type: 'order.created',
      data: { id: 'order-1', total: 12 },
    });
    // A later message proves the relay and the outbox went past the point where a second copy would have been.
    const next = await postWebhook(`${base}/inbox/demo`, 'msg-2', {
      type: 'order.paid',
      data: { id: 'o-2' },
    });

    expect(repeat).toEqual({ status: 200, body: { status: 'duplicate' } });
    expect(next.status).toBe(202);
    const deliveries = await receiver.waitFor(2);
    expect(deliveries.map((d) => d.headers['x-idempotency-key']).sort()).toEqual(['msg-1', 'msg-2']);
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${schema.name}".inbox WHERE source = 'demo' AND idempotency_key = 'msg-1'`,
    );
    expect(rows[0]?.n).toBe(1);
  });

  it('refuses a bad signature with 401 and stores nothing', async () => {
    const body = JSON.stringify({ type: 'order.created', data: { id: 'forged' } });
    const headers = signStandardWebhook(
      'msg-forged',
      body,
      `whsec_${Buffer.from('wrong').toString('base64')}`,
    );

    const response = await fetch(`${base}/inbox/demo`, { method: 'POST', headers, body });

    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ error: 'unauthorized' });
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${schema.name}".inbox WHERE idempotency_key = 'msg-forged'`,
    );
    expect(rows[0]?.n).toBe(0);
  });

  it('answers 413 to a body over inbox.maxBodyBytes, declared or streamed without a length', async () => {
    const big = JSON.stringify({ type: 'big', data: { id: 'x', blob: 'a'.repeat(MAX_BODY_BYTES) } });
    const declared = await fetch(`${base}/inbox/demo`, {
      method: 'POST',
      headers: signStandardWebhook('msg-big', big),
      body: big,
    });
    expect(declared.status).toBe(413);
    expect(await declared.json()).toMatchObject({ error: 'payload_too_large' });

    // Chunked, no Content-Length: the server stops reading past the limit and still answers.
    const streamed = await postChunked(`${base}/inbox/demo`, signStandardWebhook('msg-big', big), (req) => {
      for (let i = 0; i < 4; i++) req.write(big.slice(i * 1500, (i + 1) * 1500));
      req.end(big.slice(6000));
    });
    expect(streamed.status).toBe(413);
    expect(JSON.parse(streamed.body)).toMatchObject({ error: 'payload_too_large' });
  });

  it('answers 413 to a long streamed body while the client is still sending, not with a reset connection', async () => {
    // Prepare: 40 times the limit, sent in 64 KiB chunks as fast as the connection takes them.
    const chunk = Buffer.alloc(64 * 1024, 'a');
    const chunks = Math.ceil((40 * MAX_BODY_BYTES) / chunk.byteLength);
    // Act
    // A reset before the answer arrived is the failure this test is about: postChunked rejects on it.
    const answer = await postChunked(`${base}/inbox/demo`, signStandardWebhook('msg-huge', ''), (req) => {
      let sent = 0;
      const pump = () => {
        while (sent < chunks) {
          sent++;
          if (!req.write(chunk)) return void req.once('drain', pump);
        }
        req.end();
      };
      pump();
    });
    // Assess
    expect(answer.status).toBe(413);
    expect(JSON.parse(answer.body)).toMatchObject({ error: 'payload_too_large' });
  });

  it('shows the counters on /metrics', async () => {
    // The receiver saw both deliveries before their settles were counted: wait for the count, then read it all.
    await eventually(
      async () => (await (await fetch(`${base}/metrics`)).text()).includes('queuebox_outbox_sent_total 2'),
      'both deliveries settled and counted',
    );
    const response = await fetch(`${base}/metrics`);
    const text = await response.text();

    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/plain');
    expect(text).toContain('# TYPE queuebox_inbox_accepted_total counter');
    expect(text).toContain('queuebox_inbox_accepted_total{source="demo"} 2');
    expect(text).toContain('queuebox_inbox_duplicate_total{source="demo"} 1');
    expect(text).toContain('queuebox_inbox_rejected_total{reason="unauthorized",source="demo"} 1');
    expect(text).toContain('queuebox_inbox_rejected_total{reason="payload_too_large",source="demo"} 3');
    expect(text).toContain('queuebox_relay_forwarded_total 2');
    expect(text).toContain('queuebox_outbox_sent_total 2');
    expect(text).toMatch(/^queuebox_outbox_retried_total\{destination="receiver"\} \d+$/m);
    expect(text).toContain('queuebox_dead_total{table="outbox"} 0');
  });

  it('on SIGTERM lets the delivery in flight finish, exits 0 and leaves no row in processing', async () => {
    const held = receiver.hold((d) => d.headers['x-idempotency-key'] === 'msg-slow');
    const answer = await postWebhook(`${base}/inbox/demo`, 'msg-slow', {
      type: 'order.shipped',
      data: { id: 'o-3' },
    });
    expect(answer.status).toBe(202);
    await receiver.waitFor(3);
    expect(await statesOf('outbox')).toMatchObject({ processing: 1 });

    const exit = queuebox.stop('SIGTERM');
    await queuebox.waitForLog((l) => l.message === 'shutting down', 'shutting down');
    held.release();

    expect(await exit).toBe(0);
    expect(queuebox.logs.find((l) => l.message === 'stopped')).toMatchObject({ clean: true });
    expect(await statesOf('outbox')).toEqual({ sent: 3 });
    expect(await statesOf('inbox')).toEqual({ processed: 3 });
  });
});
