/**
 * Hostile input, second round (issue 13), at a running runtime (a real process on PostgreSQL) with a real HTTP
 * destination: replays that alter unsigned headers (Svix-signed deliveries re-keyed with `webhook-id`, GitHub
 * deliveries with a new delivery id and event), numbers beyond 2^53, an event type whose topic is too long, what a
 * sender's headers become at the destination, a browser's cross-site post, and the local surfaces: the bind
 * address and /metrics behind the admin token.
 */
import { createHash, createHmac, randomBytes, randomUUID } from 'node:crypto';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseUrlOf, cleanup, type QueueBoxProcess, startQueueBox } from '../local/support.ts';
import { type RecordingReceiver, startRecordingReceiver } from './support/deliveries.ts';
import { killAll, waitUntil } from './support/processes.ts';
import { leakedSecrets, outputOf } from './support/wire.ts';

const needs = await requireServices('faults: hostile input, second round', ['postgres']);

describe.skipIf(needs.skipReason)('hostile input, second round, at a running runtime', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'faults_hostile2', 2);
  const secrets = {
    svix: `whsec_${randomBytes(24).toString('base64')}`,
    github: `gh-${randomBytes(16).toString('hex')}`,
    partner: `tok-${randomBytes(16).toString('hex')}`,
    admin: `adm-${randomBytes(16).toString('hex')}`,
  };
  const processes: QueueBoxProcess[] = [];
  let receiver: RecordingReceiver;
  let runtime: QueueBoxProcess;
  let base: string;
  const tried: Record<string, number> = {};

  beforeAll(async () => {
    receiver = await startRecordingReceiver({ keepHeaders: true });
    // No http.host: the default must keep the server on this machine.
    runtime = await startQueueBox({
      yaml: `database:
  provider: postgres
  url: ${JSON.stringify(needs.url.postgres)}
  schema: ${schema.name}
  poolSize: 4
http:
  port: 0
admin:
  token: ${JSON.stringify(secrets.admin)}
  protectMetrics: true
inbox:
  relay: { pollIntervalMs: 50 }
outbox:
  pollIntervalMs: 50
  backoff: { baseMs: 100, maxMs: 1000 }
sources:
  svix:
    type: http
    auth: { scheme: svix, secrets: [${JSON.stringify(secrets.svix)}] }
    topic: "svix.{{ eventType }}"
  github:
    type: http
    auth: { scheme: github, secrets: [${JSON.stringify(secrets.github)}] }
    idempotencyKey: { bodyHash: true }
    topic: "github.{{ eventType }}"
  partner:
    type: http
    auth: { scheme: bearer, secrets: [${JSON.stringify(secrets.partner)}] }
    idempotencyKey: { path: $.id }
    eventTypePath: $.type
    topic: "partner.{{ eventType }}"
  open:
    type: http
    auth: { scheme: none }
    idempotencyKey: { path: $.id }
    eventTypePath: $.type
    topic: "open.{{ eventType }}"
destinations:
  receiver: { type: http, url: ${receiver.url} }
routes:
  - { match: "#", destination: receiver }
`,
    });
    processes.push(runtime);
    base = await baseUrlOf(runtime);
  });

  afterAll(async () => {
    await killAll(processes);
    await cleanup();
    await receiver?.close();
  });

  async function post(category: string, path: string, body: string, headers: Record<string, string>) {
    tried[category] = (tried[category] ?? 0) + 1;
    const response = await fetch(`${base}${path}`, { method: 'POST', headers, body });
    return { status: response.status, body: await response.text() };
  }
  const rows = async (source: string) =>
    (
      await pool.query<{
        idempotency_key: string;
        event_type: string | null;
        headers: Record<string, string>;
      }>(
        `SELECT idempotency_key, event_type, headers FROM "${schema.name}".inbox WHERE source = $1 ORDER BY id`,
        [source],
      )
    ).rows;
  const delivered = async (marker: string) => {
    await waitUntil(
      () => receiver.arrivals.some((a) => a.body?.includes(marker)),
      `delivery of ${marker}`,
      20_000,
    );
    const arrival = receiver.arrivals.find((a) => a.body?.includes(marker));
    if (arrival === undefined) throw new Error(`no delivery of ${marker}`);
    return arrival;
  };

  it('listens on 127.0.0.1 when http.host is not set', () => {
    const listening = runtime.logs.find((l) => l.message === 'listening');
    expect(listening?.host).toBe('127.0.0.1');
  });

  it('keys a Svix-signed delivery by its signed id: re-sent with unsigned webhook-id r1, r2 it is one row', async () => {
    const text = JSON.stringify({ type: 'invoice.paid', marker: `svix-${randomUUID()}` });
    const id = `msg_${randomUUID()}`;
    const t = String(Math.floor(Date.now() / 1000));
    const key = Buffer.from(secrets.svix.slice('whsec_'.length), 'base64');
    const signature = `v1,${createHmac('sha256', key).update(`${id}.${t}.${text}`).digest('base64')}`;
    const headers = {
      'content-type': 'application/json',
      'svix-id': id,
      'svix-timestamp': t,
      'svix-signature': signature,
    };
    const answers = [await post('replay', '/inbox/svix', text, headers)];
    for (const forged of ['r1', 'r2'])
      answers.push(await post('replay', '/inbox/svix', text, { ...headers, 'webhook-id': forged }));
    answers.push(await post('replay', '/inbox/svix', text, headers));
    expect(answers.map((a) => a.status)).toEqual([202, 401, 401, 200]);
    expect((await rows('svix')).map((r) => r.idempotency_key)).toEqual([id]);
  });

  it('with idempotencyKey { bodyHash: true }, a GitHub delivery replayed with a new delivery id and event is a duplicate', async () => {
    const text = JSON.stringify({ action: 'opened', marker: `gh-${randomUUID()}` });
    const signature = `sha256=${createHmac('sha256', secrets.github).update(text).digest('hex')}`;
    const send = (event: string) =>
      post('replay', '/inbox/github', text, {
        'content-type': 'application/json',
        'x-github-delivery': randomUUID(),
        'x-github-event': event,
        'x-hub-signature-256': signature,
      });
    const first = await send('pull_request');
    const replay = await send('deployment');
    expect([first.status, replay.status]).toEqual([202, 200]);
    expect(await rows('github')).toEqual([
      expect.objectContaining({
        idempotency_key: `sha256:${createHash('sha256').update(text).digest('hex')}`,
        event_type: 'pull_request',
      }),
    ]);
  });

  it('keeps numbers beyond 2^53 exact: two ids one apart are two rows, and the destination gets the digits sent', async () => {
    const marker = `big-${randomUUID()}`;
    const a = await post(
      'numbers',
      '/inbox/open',
      `{"id": 9007199254740993, "type": "n.a", "m": "${marker}"}`,
      { 'content-type': 'application/json' },
    );
    const b = await post('numbers', '/inbox/open', `{"id": 9007199254740992, "type": "n.b"}`, {
      'content-type': 'application/json',
    });
    const c = await post(
      'numbers',
      '/inbox/open',
      `{"id": "big-c", "type": "n.c", "amount": 1234567890123456789, "m": "${marker}-c"}`,
      { 'content-type': 'application/json' },
    );
    expect([a.status, b.status, c.status]).toEqual([202, 202, 202]);
    expect((await delivered(`${marker}-c`)).body).toContain('"amount":1234567890123456789');
    expect((await delivered(marker)).headers?.['x-idempotency-key']).toBe('9007199254740993');
  });

  it('answers 400 to an event type whose topic would be too long, instead of 202 and a dead row', async () => {
    const answer = await post(
      'topic',
      '/inbox/open',
      JSON.stringify({ id: 'long-type', type: 't'.repeat(399) }),
      { 'content-type': 'application/json' },
    );
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toMatchObject({ error: 'invalid_topic' });
    expect((await rows('open')).map((r) => r.idempotency_key)).not.toContain('long-type');
  });

  it("delivers JSON with QueueBox's own Content-Type and none of the sender's proxy, browser or credential headers", async () => {
    const marker = `hdr-${randomUUID()}`;
    const answer = await post(
      'headers',
      '/inbox/partner',
      JSON.stringify({ id: marker, type: 'charge.refunded', marker }),
      {
        authorization: `Bearer ${secrets.partner}`,
        'content-type': 'application/json; charset=iso-8859-1',
        'x-forwarded-for': '10.6.6.6',
        'x-forwarded-host': 'evil.example',
        forwarded: 'for=10.6.6.6',
        'x-real-ip': '10.6.6.6',
        'accept-encoding': 'gzip, br',
        'stripe-signature': 't=1,v1=00',
        'x-auth-token': 'stolen-token',
        origin: 'https://evil.example',
        referer: 'https://evil.example/x',
        'sec-fetch-site': 'cross-site',
        'x-order-region': 'eu',
      },
    );
    expect(answer.status).toBe(202);
    const arrival = await delivered(marker);
    expect(arrival.headers?.['content-type']).toBe('application/json');
    expect(arrival.headers?.['x-order-region']).toBe('eu');
    for (const name of [
      'x-forwarded-for',
      'x-forwarded-host',
      'forwarded',
      'x-real-ip',
      'stripe-signature',
      'x-auth-token',
      'origin',
      'referer',
      'sec-fetch-site',
    ]) {
      expect(arrival.headers?.[name], name).toBeUndefined();
    }
    expect(arrival.headers?.['accept-encoding'] ?? '').not.toContain('br');
  });

  it('answers 415 to a cross-site form or text post to a source without authentication, storing nothing', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded']) {
      const answer = await post(
        'media type',
        '/inbox/open',
        JSON.stringify({ id: `csrf-${type}`, type: 'x' }),
        { 'content-type': type },
      );
      expect([type, answer.status]).toEqual([type, 415]);
    }
    expect((await rows('open')).some((r) => r.idempotency_key.startsWith('csrf-'))).toBe(false);
  });

  it('serves /metrics only with the admin token when admin.protectMetrics is set', async () => {
    expect((await fetch(`${base}/metrics`)).status).toBe(401);
    expect(
      (await fetch(`${base}/metrics`, { headers: { authorization: 'Bearer wrong-token-0000000' } })).status,
    ).toBe(401);
    const allowed = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${secrets.admin}` } });
    expect(allowed.status).toBe(200);
    expect(await allowed.text()).toContain('queuebox_inbox_accepted_total');
  });

  it('stays healthy and shows no secret', async () => {
    expect(runtime.child.exitCode).toBeNull();
    expect(leakedSecrets(outputOf(runtime), secrets)).toEqual([]);
    const total = Object.values(tried).reduce((x, y) => x + y, 0);
    console.info(
      `[faults: hostile input, second round] ${total} requests (${Object.entries(tried)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}), process alive, no secret in ${runtime.logs.length} log lines`,
    );
  });
});
