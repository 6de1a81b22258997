import { createHash, createHmac, randomUUID } from 'node:crypto';
import { MessageState } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import { useTestStore } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import type { IngestRequest, Sources, TransformFunctions } from '../src/index.ts';
import { createIngestion, createRelay, TransformRejectedError } from '../src/index.ts';

const db = useTestStore('inbox_ingest', { storePoolSize: 10 });

const STRIPE_SECRET = 'whsec_ingest_test';
const GITHUB_SECRET = 'gh-secret';
const ORDERS_TOKEN = 'orders-token';
const SLACK_SECRET = 'slack-signing-secret';
const NOW = Date.parse('2026-11-30T12:00:00Z');
const clock = { now: () => NOW };

const sources: Sources = {
  stripe: {
    type: 'http',
    auth: { scheme: 'stripe', secrets: [STRIPE_SECRET] },
    aggregateIdPath: '$.data.object.id',
    topic: 'stripe.{{ eventType }}',
  },
  gh: { type: 'http', path: 'github', auth: { scheme: 'github', secrets: [GITHUB_SECRET] } },
  orders: {
    type: 'http',
    mode: 'pull',
    auth: { scheme: 'bearer', secrets: [ORDERS_TOKEN] },
    eventTypePath: '$.kind',
    transform: { function: 'orders' },
    maxAttempts: 4,
  },
  slack: { type: 'http', auth: { scheme: 'slack', secrets: [SLACK_SECRET] } },
  buggy: { type: 'http', transform: { function: 'buggy' } },
  mapped: {
    type: 'http',
    transform: { jsonata: 'kind = "test" ? $reject("test event") : {"kind": kind, "from": $source}' },
  },
  queue: { type: 'amqp' },
};

const transforms: TransformFunctions = {
  orders: ({ payload }) => {
    const order = payload as { kind: string; total: number };
    if (order.kind === 'test') return { reject: 'test orders are not stored' };
    if (order.total < 0) throw new TransformRejectedError('negative total');
    return {
      payload: { kind: order.kind, totalCents: order.total * 100 },
      headers: { 'X-Transformed': 'yes' },
    };
  },
  buggy: () => {
    throw new Error('database password is hunter2');
  },
};

function ingestion(overrides: { maxBodyBytes?: number } = {}) {
  return createIngestion({
    store: db.store.inbox,
    sources,
    inbox: { basePath: '/inbox', maxBodyBytes: overrides.maxBodyBytes ?? 4096, relay: { maxAttempts: 6 } },
    outbox: { maxAttempts: 9 },
    transforms,
    clock,
  });
}

// Stripe signs `${t}.${body}` with HMAC-SHA256 (hex) and sends `t=…,v1=…`.
function aStripeRequest(
  event: Record<string, unknown>,
  overrides: Partial<IngestRequest> = {},
): IngestRequest {
  const text = JSON.stringify(event);
  const t = Math.floor(NOW / 1000);
  const v1 = createHmac('sha256', STRIPE_SECRET).update(`${t}.${text}`).digest('hex');
  return {
    method: 'POST',
    path: '/inbox/stripe',
    headers: {
      'Content-Type': 'application/json',
      'Stripe-Signature': `t=${t},v1=${v1}`,
      'X-Correlation-Id': 'corr-1',
      Authorization: 'Bearer should-never-be-stored',
    },
    body: new TextEncoder().encode(text),
    ...overrides,
  };
}

const anEvent = (id = `evt_${randomUUID()}`) => ({
  id,
  type: 'invoice.paid',
  data: { object: { id: 'in_42', amount: 1200 } },
});

function anOrdersRequest(order: unknown, key: string, token = ORDERS_TOKEN): IngestRequest {
  return {
    method: 'POST',
    path: '/inbox/orders',
    headers: { authorization: `Bearer ${token}`, 'idempotency-key': key, 'content-type': 'application/json' },
    body: new TextEncoder().encode(JSON.stringify(order)),
  };
}

describe('ingestion answers', () => {
  it('202: stores a new message with its fields and filtered headers', async () => {
    // Prepare
    const event = anEvent();
    // Act
    const answer = await ingestion().handle(aStripeRequest(event));
    // Assess
    expect(answer.status).toBe(202);
    expect(answer.body).toEqual({ status: 'accepted', id: expect.any(String) });
    expect(answer.stored).toEqual({ id: answer.body.id, source: 'stripe', mode: 'push', wakeRelay: true });
    const row = await db.store.inbox.get(answer.body.id as string);
    expect(row).toMatchObject({
      source: 'stripe',
      idempotencyKey: event.id,
      eventType: 'invoice.paid',
      aggregateId: 'in_42',
      correlationId: 'corr-1',
      payload: event,
      state: MessageState.Pending,
      maxAttempts: 6,
    });
    expect(row?.headers).toEqual({ 'x-correlation-id': 'corr-1' });
  });

  it('200: answers a repeat of (source, idempotency key) as a duplicate and stores nothing more', async () => {
    const event = anEvent();
    const first = await ingestion().handle(aStripeRequest(event));
    const second = await ingestion().handle(aStripeRequest(event));
    expect(first.status).toBe(202);
    expect(second.status).toBe(200);
    expect(second.body).toEqual({ status: 'duplicate' });
    expect(second.stored).toBeUndefined();
    expect(await db.countInbox('stripe', event.id)).toBe(1);
  });

  it('405: refuses other methods with Allow: POST', async () => {
    const answer = await ingestion().handle({ ...aStripeRequest(anEvent()), method: 'GET' });
    expect(answer.status).toBe(405);
    expect(answer.body).toEqual({ error: 'method_not_allowed', message: expect.any(String) });
    expect(answer.headers.allow).toBe('POST');
  });

  it('404: refuses unknown paths, the source name when a path is configured, and broker sources', async () => {
    const service = ingestion();
    for (const path of ['/inbox/nope', '/inbox/gh', '/inbox/queue', '/stripe', '/inbox/stripe/x']) {
      const answer = await service.handle({ ...aStripeRequest(anEvent()), path });
      expect([path, answer.status, answer.body.error]).toEqual([path, 404, 'unknown_source']);
    }
  });

  it('accepts a trailing slash and ignores the query string', async () => {
    const service = ingestion();
    expect((await service.handle({ ...aStripeRequest(anEvent()), path: '/inbox/stripe/' })).status).toBe(202);
    expect((await service.handle({ ...aStripeRequest(anEvent()), path: '/inbox/stripe?x=1' })).status).toBe(
      202,
    );
    expect(service.routes.map((r) => r.path).sort()).toEqual([
      '/inbox/buggy',
      '/inbox/github',
      '/inbox/mapped',
      '/inbox/orders',
      '/inbox/slack',
      '/inbox/stripe',
    ]);
  });

  it('413: refuses a body over inbox.maxBodyBytes before authenticating it', async () => {
    const event = { ...anEvent(), padding: 'x'.repeat(5000) };
    const answer = await ingestion().handle(aStripeRequest(event));
    expect(answer.status).toBe(413);
    expect(answer.body.error).toBe('payload_too_large');
    expect(await db.countInbox('stripe', event.id)).toBe(0);
    expect((await ingestion({ maxBodyBytes: 10_000 }).handle(aStripeRequest(event))).status).toBe(202);
  });

  it('401: refuses a bad signature, a tampered body and a missing header, naming no secret', async () => {
    const event = anEvent();
    const good = aStripeRequest(event);
    const tampered = { ...good, body: new TextEncoder().encode(JSON.stringify({ ...event, type: 'x' })) };
    const unsigned = { ...good, headers: { 'content-type': 'application/json' } };
    for (const request of [tampered, unsigned]) {
      const answer = await ingestion().handle(request);
      expect(answer.status).toBe(401);
      expect(answer.body.error).toBe('unauthorized');
      expect(JSON.stringify(answer.body)).not.toContain(STRIPE_SECRET);
    }
    expect(await db.countInbox('stripe', event.id)).toBe(0);
  });

  it('401 comes before parsing: an unsigned non-JSON body is unauthorized, not invalid', async () => {
    const answer = await ingestion().handle({
      ...aStripeRequest(anEvent()),
      body: new TextEncoder().encode('{oops'),
    });
    expect(answer.status).toBe(401);
  });

  it('400: refuses a correctly authenticated body that is not JSON, or not UTF-8', async () => {
    for (const bytes of [new TextEncoder().encode('{"id": '), Uint8Array.from([0x7b, 0xff, 0x7d])]) {
      const answer = await ingestion().handle({ ...anOrdersRequest({}, randomUUID()), body: bytes });
      expect(answer.status).toBe(400);
      expect(answer.body.error).toBe('invalid_json');
    }
  });

  it('400: refuses a message without an idempotency key, and one whose key is not a scalar', async () => {
    const noKey = await ingestion().handle(aStripeRequest({ type: 'invoice.paid' }));
    expect(noKey.status).toBe(400);
    expect(noKey.body).toEqual({
      error: 'missing_idempotency_key',
      message: expect.stringContaining('$.id'),
    });
    const objectKey = await ingestion().handle(aStripeRequest({ id: { nested: true }, type: 'x' }));
    expect(objectKey.status).toBe(400);
    expect(objectKey.body.error).toBe('invalid_idempotency_key');
  });

  it('uses the natural GitHub key and event type from the headers', async () => {
    const text = '{"zen":"Keep it logically awesome."}';
    const delivery = randomUUID();
    const answer = await ingestion().handle({
      method: 'POST',
      path: '/inbox/github',
      headers: {
        'Content-Type': 'application/json',
        'X-GitHub-Delivery': delivery,
        'X-GitHub-Event': 'ping',
        'X-Hub-Signature-256': `sha256=${createHmac('sha256', GITHUB_SECRET).update(text).digest('hex')}`,
      },
      body: new TextEncoder().encode(text),
    });
    expect(answer.status).toBe(202);
    const row = await db.store.inbox.get(answer.body.id as string);
    expect(row).toMatchObject({ source: 'gh', idempotencyKey: delivery, eventType: 'ping' });
    expect(Object.keys(row?.headers ?? {})).not.toContain('x-hub-signature-256');
  });
});

describe('ingestion of a provider handshake', () => {
  // Slack signs `v0:<timestamp>:<body>` with HMAC-SHA256 (hex) and sends `v0=…` with the timestamp.
  const aSlackRequest = (payload: unknown): IngestRequest => {
    const text = JSON.stringify(payload);
    const t = Math.floor(NOW / 1000);
    const signature = createHmac('sha256', SLACK_SECRET).update(`v0:${t}:${text}`).digest('hex');
    return {
      method: 'POST',
      path: '/inbox/slack',
      headers: {
        'content-type': 'application/json',
        'x-slack-signature': `v0=${signature}`,
        'x-slack-request-timestamp': String(t),
      },
      body: new TextEncoder().encode(text),
    };
  };
  const claimSlack = () => db.store.inbox.claim({ sources: ['slack'], batchSize: 10, leaseMs: 1000 });

  it("answers Slack's signed url_verification with its challenge and stores nothing; events are stored", async () => {
    // Act
    const handshake = await ingestion().handle(
      aSlackRequest({
        token: 'legacy',
        challenge: 'ch-3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P',
        type: 'url_verification',
      }),
    );
    const claimedAfterHandshake = await claimSlack();
    const event = await ingestion().handle(
      aSlackRequest({
        type: 'event_callback',
        event_id: `Ev${randomUUID()}`,
        event: { type: 'app_mention' },
      }),
    );
    // Assess
    expect(handshake).toMatchObject({
      status: 200,
      outcome: 'handshake',
      body: { challenge: 'ch-3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P' },
    });
    expect(handshake.stored).toBeUndefined();
    expect(claimedAfterHandshake).toEqual([]);
    expect(event).toMatchObject({ status: 202, outcome: 'accepted' });
    expect((await claimSlack()).map((r) => r.eventType)).toEqual(['app_mention']);
  });

  it('refuses an unsigned url_verification like any other request', async () => {
    const request = aSlackRequest({ challenge: 'c', type: 'url_verification' });
    const answer = await ingestion().handle({
      ...request,
      headers: { ...request.headers, 'x-slack-signature': 'v0=00' },
    });
    expect(answer).toMatchObject({ status: 401, outcome: 'unauthorized' });
  });
});

describe('ingestion transforms', () => {
  it('422: a rejected message stores nothing, so the same key is accepted later', async () => {
    // Prepare
    const key = randomUUID();
    // Act
    const rejected = await ingestion().handle(anOrdersRequest({ kind: 'test', total: 1 }, key));
    const thrown = await ingestion().handle(anOrdersRequest({ kind: 'sale', total: -1 }, key));
    // Assess
    expect(rejected.status).toBe(422);
    expect(rejected.body).toEqual({
      error: 'transform_rejected',
      message: 'The transform rejected the message: test orders are not stored',
    });
    expect(thrown.status).toBe(422);
    expect(await db.countInbox('orders', key)).toBe(0);
    const accepted = await ingestion().handle(anOrdersRequest({ kind: 'sale', total: 3 }, key));
    expect(accepted.status).toBe(202);
  });

  it('stores the transformed payload and headers; a pull source does not wake the relay', async () => {
    const key = randomUUID();
    const answer = await ingestion().handle(anOrdersRequest({ kind: 'sale', total: 5 }, key));
    expect(answer.stored).toEqual({ id: answer.body.id, source: 'orders', mode: 'pull', wakeRelay: false });
    const row = await db.store.inbox.get(answer.body.id as string);
    expect(row).toMatchObject({
      payload: { kind: 'sale', totalCents: 500 },
      eventType: 'sale',
      maxAttempts: 4,
    });
    expect(row?.headers).toEqual({
      'idempotency-key': key,
      'x-transformed': 'yes',
    });
  });

  it('runs the transform before the duplicate check: a repeat that is now rejected answers 422', async () => {
    const key = randomUUID();
    expect((await ingestion().handle(anOrdersRequest({ kind: 'sale', total: 1 }, key))).status).toBe(202);
    expect((await ingestion().handle(anOrdersRequest({ kind: 'test', total: 1 }, key))).status).toBe(422);
    expect((await ingestion().handle(anOrdersRequest({ kind: 'sale', total: 1 }, key))).status).toBe(200);
  });

  it('JSONata: stores the expression result, and $reject answers 422 without storing', async () => {
    const post = (kind: string, key: string) =>
      ingestion().handle({
        method: 'POST',
        path: '/inbox/mapped',
        headers: { 'idempotency-key': key, 'content-type': 'application/json' },
        body: new TextEncoder().encode(JSON.stringify({ kind, extra: true })),
      });
    const key = randomUUID();
    const rejected = await post('test', key);
    expect(rejected.status).toBe(422);
    expect(rejected.body.message).toBe('The transform rejected the message: test event');
    expect(await db.countInbox('mapped', key)).toBe(0);
    const accepted = await post('sale', key);
    expect(accepted.status).toBe(202);
    expect((await db.store.inbox.get(accepted.body.id as string))?.payload).toEqual({
      kind: 'sale',
      from: 'mapped',
    });
  });

  it('500: a transform that throws an unexpected error answers a generic body and hands the error over', async () => {
    const answer = await ingestion().handle({
      method: 'POST',
      path: '/inbox/buggy',
      headers: { 'idempotency-key': randomUUID(), 'content-type': 'application/json' },
      body: new TextEncoder().encode('{}'),
    });
    expect(answer.status).toBe(500);
    expect(answer.body).toEqual({ error: 'internal_error', message: 'Internal error' });
    expect(JSON.stringify(answer.body)).not.toContain('hunter2');
    expect((answer.error as Error).message).toContain('hunter2');
  });
});

describe('ingestion under load and outage', () => {
  it('50 concurrent identical posts: one 202, 49 duplicates, one row', async () => {
    // Prepare
    const event = anEvent();
    const service = ingestion();
    // Act
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => service.handle(aStripeRequest(event))),
    );
    // Assess
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses.filter((s) => s === 202)).toHaveLength(1);
    expect(statuses.filter((s) => s === 200)).toHaveLength(49);
    expect(answers.filter((a) => a.status === 200).every((a) => a.body.status === 'duplicate')).toBe(true);
    expect(await db.countInbox('stripe', event.id)).toBe(1);
  });

  it('503: answers store_unavailable when the database cannot be reached', async () => {
    // A real store pointed at a port where nothing listens.
    const down = await openPostgresStore({ url: 'postgres://postgres@127.0.0.1:1/test', schema: db.schema });
    try {
      const service = createIngestion({ store: down.inbox, sources, transforms, clock });
      const answer = await service.handle(aStripeRequest(anEvent()));
      expect(answer.status).toBe(503);
      expect(answer.body).toEqual({ error: 'store_unavailable', message: expect.any(String) });
    } finally {
      await down.close();
    }
  });
});

describe('ingestion configuration', () => {
  it('refuses unknown schemes, bad paths, missing functions and clashing paths, listing every problem', () => {
    let issues: readonly { path: string }[] = [];
    try {
      createIngestion({
        store: db.store.inbox,
        sources: {
          a: { type: 'http', auth: { scheme: 'nope' as never, secrets: ['x'] } },
          b: { type: 'http', eventTypePath: 'type' },
          c: { type: 'http', transform: { function: 'missing' } },
          d: { type: 'http', path: '/a/' },
          e: { type: 'http', auth: { scheme: 'hmac', secrets: ['x'] } },
        },
      });
    } catch (error) {
      issues = (error as { issues: { path: string }[] }).issues;
    }
    expect(issues.map((i) => i.path).sort()).toEqual([
      'sources.a.auth.scheme',
      'sources.b',
      'sources.c.transform',
      'sources.d.path',
      'sources.e.auth',
    ]);
  });
});

describe('hostile input, second round (issue 13)', () => {
  const SW_SECRET = `whsec_${Buffer.from('twenty-four bytes of key!').toString('base64')}`;
  const HOOK_SECRET = 'gh-body-hash-secret';
  const second: Sources = {
    sw: { type: 'http', auth: { scheme: 'standard-webhooks', secrets: [SW_SECRET] } },
    svix: { type: 'http', auth: { scheme: 'svix', secrets: [SW_SECRET] } },
    ghb: {
      type: 'http',
      auth: { scheme: 'github', secrets: [HOOK_SECRET] },
      idempotencyKey: { bodyHash: true },
      topic: 'github.{{ eventType }}',
    },
    big: { type: 'http', idempotencyKey: { path: '$.id' }, eventTypePath: '$.type' },
    open: { type: 'http', eventTypePath: '$.type', topic: 'open.{{ eventType }}' },
    pulled: { type: 'http', mode: 'pull', eventTypePath: '$.type', topic: 'p.{{ eventType }}' },
    kept: { type: 'http', eventTypePath: '$.type', keepHeaders: ['X-Keep', 'X-Auth-Token'] },
  };
  const service = () =>
    createIngestion({ store: db.store.inbox, sources: second, inbox: { basePath: '/inbox' }, clock });
  const json = { 'content-type': 'application/json' };
  const post = (path: string, text: string, headers: Record<string, string> = json): IngestRequest => ({
    method: 'POST',
    path,
    headers,
    body: new TextEncoder().encode(text),
  });
  const svixSigned = (text: string, id: string) => {
    const t = Math.floor(NOW / 1000);
    const key = Buffer.from(SW_SECRET.slice('whsec_'.length), 'base64');
    const signature = createHmac('sha256', key).update(`${id}.${t}.${text}`).digest('base64');
    return { ...json, 'svix-id': id, 'svix-timestamp': String(t), 'svix-signature': `v1,${signature}` };
  };

  it('keys a Standard Webhooks message by the signed id: unsigned webhook-id headers cannot re-key a replay', async () => {
    const text = JSON.stringify({ type: 'invoice.paid', n: 1 });
    const id = `msg_${randomUUID()}`;
    const headers = svixSigned(text, id);
    const first = await service().handle(post('/inbox/sw', text, headers));
    const replays = [];
    for (const forged of ['r1', 'r2']) {
      replays.push(await service().handle(post('/inbox/sw', text, { ...headers, 'webhook-id': forged })));
    }
    const again = await service().handle(post('/inbox/sw', text, headers));
    expect(first.status).toBe(202);
    expect(replays.map((r) => r.status)).toEqual([401, 401]);
    expect(again).toMatchObject({ status: 200, body: { status: 'duplicate' } });
    expect((await db.inboxRows('sw')).filter((r) => r.payload !== null).map((r) => r.idempotencyKey)).toEqual(
      [id],
    );
    // `scheme: svix` is the same scheme under its documented alias.
    expect((await service().handle(post('/inbox/svix', text, headers))).status).toBe(202);
  });

  it('with idempotencyKey { bodyHash: true }, a captured GitHub delivery re-sent with a new delivery id and event is a duplicate', async () => {
    const text = JSON.stringify({ action: 'opened', number: randomUUID() });
    const signature = `sha256=${createHmac('sha256', HOOK_SECRET).update(text).digest('hex')}`;
    const delivery = (id: string, event: string) =>
      post('/inbox/ghb', text, {
        ...json,
        'x-github-delivery': id,
        'x-github-event': event,
        'x-hub-signature-256': signature,
      });
    const first = await service().handle(delivery(randomUUID(), 'pull_request'));
    const replay = await service().handle(delivery(randomUUID(), 'deployment'));
    expect(first.status).toBe(202);
    expect(replay).toMatchObject({ status: 200, body: { status: 'duplicate' } });
    const key = `sha256:${createHash('sha256').update(text).digest('hex')}`;
    expect(await db.countInbox('ghb', key)).toBe(1);
    const rows = (await db.inboxRows('ghb')).filter((r) => r.idempotencyKey === key);
    expect(rows.map((r) => r.eventType)).toEqual(['pull_request']);
  });

  it('keeps the source text of numbers beyond 2^53 in keys and payloads, through the store and the relay', async () => {
    const a = await service().handle(post('/inbox/big', '{"id": 9007199254740993, "type": "big.a"}'));
    const b = await service().handle(post('/inbox/big', '{"id": 9007199254740992, "type": "big.b"}'));
    const c = await service().handle(
      post('/inbox/big', '{"id": "c-1", "type": "big.c", "amount": 1234567890123456789, "ratio": 0.1}'),
    );
    expect([a.status, b.status, c.status]).toEqual([202, 202, 202]);
    expect(await db.countInbox('big', '9007199254740993')).toBe(1);
    expect(await db.countInbox('big', '9007199254740992')).toBe(1);
    const row = await db.store.inbox.get(c.body.id as string);
    expect(JSON.stringify(row?.payload)).toContain('"amount":1234567890123456789');
    expect(JSON.stringify(row?.payload)).toContain('"ratio":0.1');
    const relay = createRelay({ store: db.store.inbox, sources: second });
    const report = await relay.drain({ deadline: Date.now() + 20_000 });
    const forwarded = await Promise.all(report.outboxIds.map((id) => db.store.outbox.get(id)));
    const outbox = forwarded.find((r) => r?.topic === 'big.c');
    expect(JSON.stringify(outbox?.payload)).toContain('"amount":1234567890123456789');
  });

  it('answers 400 invalid_json to a number beyond what jsonb holds (not a 500 the sender retries for ever)', async () => {
    for (const n of ['1e1000000', '1e-16384', '-2.5e131072']) {
      const answer = await service().handle(
        post('/inbox/big', `{"id": "range-${n}", "type": "t", "n": ${n}}`),
      );
      expect([n, answer.status, answer.body.error]).toEqual([n, 400, 'invalid_json']);
    }
    const widest = await service().handle(
      post('/inbox/big', '{"id": "range-ok", "type": "t", "n": 1e131071}'),
    );
    expect(widest.status).toBe(202);
  });

  it('answers 400 invalid_topic, storing nothing, when the topic would be too long for the outbox', async () => {
    const type = 't'.repeat(399);
    const answer = await service().handle(
      post('/inbox/open', JSON.stringify({ type }), { ...json, 'idempotency-key': 'long-topic' }),
    );
    expect(answer).toMatchObject({ status: 400, body: { error: 'invalid_topic' } });
    expect(await db.countInbox('open', 'long-topic')).toBe(0);
    // A pull source's topic is never rendered; the longest event type whose topic fits still goes in.
    const fits = await service().handle(
      post('/inbox/open', JSON.stringify({ type: 't'.repeat(395) }), { ...json, 'idempotency-key': 'fits' }),
    );
    expect(fits.status).toBe(202);
    const pulled = await service().handle(
      post('/inbox/pulled', JSON.stringify({ type }), { ...json, 'idempotency-key': 'pulled' }),
    );
    expect(pulled.status).toBe(202);
  });

  it('stores only the headers a source keeps (keepHeaders), and never a credential header even when listed', async () => {
    const answer = await service().handle(
      post('/inbox/kept', JSON.stringify({ type: 'k' }), {
        ...json,
        'idempotency-key': 'kept-1',
        'x-keep': 'yes',
        'x-other': 'no',
        'x-auth-token': 'secret-token',
        'x-forwarded-for': '10.0.0.1',
      }),
    );
    expect(answer.status).toBe(202);
    expect((await db.store.inbox.get(answer.body.id as string))?.headers).toEqual({ 'x-keep': 'yes' });
  });

  it('answers 415 to a body without a JSON Content-Type (a browser posting cross-site), and takes +json types', async () => {
    const text = JSON.stringify({ type: 'csrf' });
    for (const type of [
      undefined,
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'text/html; charset=iso-8859-1',
    ]) {
      const headers: Record<string, string> = { 'idempotency-key': `ct-${type}` };
      if (type !== undefined) headers['content-type'] = type;
      const answer = await service().handle(post('/inbox/open', text, headers));
      expect([type, answer.status, answer.body.error]).toEqual([type, 415, 'unsupported_media_type']);
      expect(await db.countInbox('open', `ct-${type}`)).toBe(0);
    }
    for (const type of [
      'application/json; charset=utf-8',
      'Application/JSON',
      'application/cloudevents+json',
    ]) {
      const answer = await service().handle(
        post('/inbox/open', text, { 'content-type': type, 'idempotency-key': `ok-${type}` }),
      );
      expect([type, answer.status]).toEqual([type, 202]);
    }
  });
});
