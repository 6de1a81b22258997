/**
 * Inbound interoperability with the providers' own SDKs: each request is signed (or its signature cross-checked)
 * by the provider's official npm package, posted over real HTTP to the local runtime's request handler
 * (`createRequestHandler` of `@queuebox/local` around `createIngestion`) on a real PostgreSQL, and answered as
 * docs/design.md §5 says: 202 the first time, 200 `{"status":"duplicate"}` for the same delivery again, 401 for a body
 * changed after signing; the stored idempotency key is the provider's own id.
 *
 * Slack ships no small signer (`@slack/bolt` brings about 90 packages), so its requests are signed with the
 * algorithm of Slack's "Verifying requests from Slack" page, written out below.
 */
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sign as githubSign, verify as githubVerify } from '@octokit/webhooks-methods';
import { createIngestion, createRelay, type Sources } from '@queuebox/inbox';
import { createLogger, createQueueBoxMetrics, createRequestHandler } from '@queuebox/local';
import { createOutboxPoller, createPublishers, defaultPublisherFactories } from '@queuebox/outbox';
import '@shopify/shopify-api/adapters/web-api';
import { useTestStore } from '@queuebox/testing';
import { ApiVersion, LogSeverity, shopifyApi } from '@shopify/shopify-api';
import { getHmac as shopifyHmac } from '@shopify/shopify-api/test-helpers';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { Webhook as SvixWebhook } from 'svix';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpReceiver } from '../../packages/outbox/test/support/http-receiver.ts';

const db = useTestStore('providers_in', { storePoolSize: 10 });

/** A Standard Webhooks secret: `whsec_` + base64 of 24 random bytes (the spec's minimum, Svix's length). */
const whsec = () => `whsec_${randomBytes(24).toString('base64')}`;

const SECRETS = {
  stripe: `whsec_${randomBytes(16).toString('hex')}`,
  svix: whsec(),
  swOld: whsec(),
  swNew: whsec(),
  github: randomBytes(20).toString('hex'),
  shopify: randomBytes(16).toString('hex'),
  slack: randomBytes(16).toString('hex'),
};

const sources: Sources = {
  stripe: {
    type: 'http',
    auth: { scheme: 'stripe', secrets: [SECRETS.stripe] },
    topic: 'stripe.{{ eventType }}',
  },
  svix: { type: 'http', auth: { scheme: 'svix', secrets: [SECRETS.svix] } },
  // Rotation: the old and the new secret are both active.
  standard: {
    type: 'http',
    auth: { scheme: 'standard-webhooks', secrets: [SECRETS.swOld, SECRETS.swNew] },
  },
  github: { type: 'http', auth: { scheme: 'github', secrets: [SECRETS.github] } },
  shopify: { type: 'http', auth: { scheme: 'shopify', secrets: [SECRETS.shopify] } },
  slack: { type: 'http', auth: { scheme: 'slack', secrets: [SECRETS.slack] } },
};

let server: Server;
let base: string;

beforeAll(async () => {
  const ingestion = createIngestion({ store: db.store.inbox, sources, inbox: { basePath: '/inbox' } });
  await ingestion.ready();
  server = createServer(
    createRequestHandler({
      ingestion,
      basePath: '/inbox',
      ping: () => db.store.ping(),
      metrics: createQueueBoxMetrics({ sources: Object.keys(sources) }),
      logger: createLogger({ level: 'error' }),
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server?.close(() => resolve()));
});

interface Answer {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

/** POSTs the exact body text with the headers over HTTP. */
async function post(source: string, headers: Record<string, string>, body: string): Promise<Answer> {
  const response = await fetch(`${base}/inbox/${source}`, { method: 'POST', headers, body });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** A body with the same length as `body` but one character changed (the signature no longer matches). */
function tamper(body: string): string {
  const at = body.lastIndexOf('1');
  if (at === -1) throw new Error('test body needs a digit 1');
  return `${body.slice(0, at)}2${body.slice(at + 1)}`;
}

/**
 * The common check: first delivery 202, the same delivery again 200 duplicate, a tampered body 401; the stored
 * row's idempotency key and event type. Returns the stored row.
 */
async function assertDelivery(
  source: string,
  headers: Record<string, string>,
  body: string,
  expected: { idempotencyKey: string; eventType: string | null; bigNumbers?: boolean },
) {
  const first = await post(source, headers, body);
  expect(first).toEqual({ status: 202, body: { status: 'accepted', id: expect.any(String) } });
  const again = await post(source, headers, body);
  expect(again).toEqual({ status: 200, body: { status: 'duplicate' } });
  const tampered = await post(source, headers, tamper(body));
  expect(tampered.status).toBe(401);
  expect(tampered.body.error).toBe('unauthorized');
  const row = await db.store.inbox.get(first.body.id as string);
  expect(row?.source).toBe(source);
  expect(row?.idempotencyKey).toBe(expected.idempotencyKey);
  expect(row?.eventType ?? null).toBe(expected.eventType);
  if (!expected.bigNumbers) expect(row?.payload).toEqual(JSON.parse(body));
  expect(await db.countInbox(source, expected.idempotencyKey)).toBe(1);
  return row;
}

describe('stripe (stripe-node)', () => {
  const stripe = new Stripe('sk_test_interop');
  const anEvent = () =>
    JSON.stringify({
      id: `evt_${randomUUID().replaceAll('-', '')}`,
      object: 'event',
      api_version: '2025-10-29.clover',
      created: Math.floor(Date.now() / 1000),
      data: {
        object: { id: 'in_1', object: 'invoice', amount_paid: 1200, description: 'Café ✓ 𝄞 – 請求書' },
      },
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type: 'invoice.paid',
    });

  it('accepts a header from generateTestHeaderString; key = the event id ($.id)', async () => {
    const body = anEvent();
    const header = stripe.webhooks.generateTestHeaderString({ payload: body, secret: SECRETS.stripe });
    // The SDK's own verifier accepts what is sent.
    expect(stripe.webhooks.constructEvent(body, header, SECRETS.stripe).id).toBe(JSON.parse(body).id);
    const row = await assertDelivery(
      'stripe',
      { 'Content-Type': 'application/json; charset=utf-8', 'Stripe-Signature': header },
      body,
      { idempotencyKey: JSON.parse(body).id, eventType: 'invoice.paid' },
    );
    expect(row?.headers).not.toHaveProperty('stripe-signature');
    // Stripe's retry of the event: the same body, signed again later.
    const retry = stripe.webhooks.generateTestHeaderString({
      payload: body,
      secret: SECRETS.stripe,
      timestamp: Math.floor(Date.now() / 1000) + 5,
    });
    expect(
      await post('stripe', { 'content-type': 'application/json', 'stripe-signature': retry }, body),
    ).toEqual({
      status: 200,
      body: { status: 'duplicate' },
    });
  });

  it('accepts a header carrying a v0 element and several v1 signatures (a secret being rolled)', async () => {
    const body = anEvent();
    const other = stripe.webhooks.generateTestHeaderString({ payload: body, secret: 'whsec_some_other' });
    const ours = stripe.webhooks.generateTestHeaderString({ payload: body, secret: SECRETS.stripe });
    const t = /t=(\d+)/.exec(ours)?.[1];
    const v1 = (h: string) => /v1=([0-9a-f]+)/.exec(h)?.[1];
    const header = `t=${t},v1=${v1(other)},v1=${v1(ours)},v0=${'0'.repeat(64)}`;
    expect(stripe.webhooks.constructEvent(body, header, SECRETS.stripe).type).toBe('invoice.paid');
    expect(
      (await post('stripe', { 'content-type': 'application/json', 'stripe-signature': header }, body)).status,
    ).toBe(202);
  });

  it('refuses a header signed more than 300 s ago, as the SDK does', async () => {
    const body = anEvent();
    const header = stripe.webhooks.generateTestHeaderString({
      payload: body,
      secret: SECRETS.stripe,
      timestamp: Math.floor(Date.now() / 1000) - 301,
    });
    expect(() => stripe.webhooks.constructEvent(body, header, SECRETS.stripe)).toThrow();
    const answer = await post(
      'stripe',
      { 'content-type': 'application/json', 'stripe-signature': header },
      body,
    );
    expect(answer.status).toBe(401);
  });
});

describe('svix (svix Webhook.sign)', () => {
  const wh = new SvixWebhook(SECRETS.svix);
  const body = () => JSON.stringify({ type: 'user.created', data: { id: `user_${randomUUID()}`, n: 1 } });

  it('accepts svix-* headers; key = svix-id', async () => {
    const text = body();
    const id = `msg_${randomBytes(12).toString('hex')}`;
    const timestamp = new Date();
    const headers = {
      'content-type': 'application/json',
      'svix-id': id,
      'svix-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
      'svix-signature': wh.sign(id, timestamp, text),
    };
    expect(() => wh.verify(text, headers)).not.toThrow();
    const row = await assertDelivery('svix', headers, text, {
      idempotencyKey: id,
      eventType: 'user.created',
    });
    expect(row?.headers).not.toHaveProperty('svix-signature');
    // Stored, so the relay puts it on the outbox row (see outbound.test.ts for what a signed delivery does with it).
    expect(row?.headers).toHaveProperty('svix-id', id);
    // Svix's retry: the same svix-id, a new timestamp and signature.
    const later = new Date(timestamp.getTime() + 5000);
    const retry = {
      ...headers,
      'svix-timestamp': String(Math.floor(later.getTime() / 1000)),
      'svix-signature': wh.sign(id, later, text),
    };
    expect(await post('svix', retry, text)).toEqual({ status: 200, body: { status: 'duplicate' } });
  });

  it('accepts the white-labelled webhook-* headers Svix sends for some accounts; key = webhook-id', async () => {
    const text = body();
    const id = `msg_${randomBytes(12).toString('hex')}`;
    const timestamp = new Date();
    const headers = {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
      'webhook-signature': wh.sign(id, timestamp, text),
    };
    expect(() => wh.verify(text, headers)).not.toThrow();
    await assertDelivery('svix', headers, text, { idempotencyKey: id, eventType: 'user.created' });
  });
  it('accepts both header sets at once when they carry the same values', async () => {
    const text = body();
    const id = `msg_${randomBytes(12).toString('hex')}`;
    const timestamp = new Date();
    const t = String(Math.floor(timestamp.getTime() / 1000));
    const signature = wh.sign(id, timestamp, text);
    const headers = {
      'content-type': 'application/json',
      'svix-id': id,
      'svix-timestamp': t,
      'svix-signature': signature,
      'webhook-id': id,
      'webhook-timestamp': t,
      'webhook-signature': signature,
    };
    expect(() => wh.verify(text, headers)).not.toThrow();
    await assertDelivery('svix', headers, text, { idempotencyKey: id, eventType: 'user.created' });
  });
});

describe('standard-webhooks (standardwebhooks, the reference implementation)', () => {
  const oldKey = new StandardWebhook(SECRETS.swOld);
  const newKey = new StandardWebhook(SECRETS.swNew);
  const retired = new StandardWebhook(whsec());
  const aDelivery = (signers: readonly StandardWebhook[]) => {
    const text = JSON.stringify({ type: 'invoice.paid', data: { id: randomUUID(), total: 1 } });
    const id = `msg_${randomUUID()}`;
    const timestamp = new Date();
    const headers = {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
      // Several signatures are space-separated, as a sender rotating its secret sends them.
      'webhook-signature': signers.map((s) => s.sign(id, timestamp, text)).join(' '),
    };
    return { id, text, headers };
  };

  it('accepts a delivery signed with the new secret while both are active; key = webhook-id', async () => {
    const { id, text, headers } = aDelivery([newKey]);
    expect(newKey.verify(text, headers)).toEqual(JSON.parse(text));
    await assertDelivery('standard', headers, text, { idempotencyKey: id, eventType: 'invoice.paid' });
  });

  it('accepts a delivery signed with the old secret, and one carrying a retired and a current signature', async () => {
    const signedOld = aDelivery([oldKey]);
    expect((await post('standard', signedOld.headers, signedOld.text)).status).toBe(202);
    const both = aDelivery([retired, newKey]);
    expect(newKey.verify(both.text, both.headers)).toEqual(JSON.parse(both.text));
    expect((await post('standard', both.headers, both.text)).status).toBe(202);
  });

  it('refuses a delivery signed only with a secret the source does not hold', async () => {
    const { text, headers } = aDelivery([retired]);
    expect((await post('standard', headers, text)).status).toBe(401);
  });
});

describe('github (@octokit/webhooks-methods)', () => {
  it('accepts X-Hub-Signature-256 from sign(); key = X-GitHub-Delivery, event type X-GitHub-Event', async () => {
    const text = JSON.stringify({
      action: 'opened',
      number: 1,
      repository: { id: 1, full_name: 'o/r' },
      sender: { login: 'u' },
    });
    const signature = await githubSign(SECRETS.github, text);
    expect(signature).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(await githubVerify(SECRETS.github, text, signature)).toBe(true);
    const delivery = randomUUID();
    const row = await assertDelivery(
      'github',
      {
        'content-type': 'application/json',
        'user-agent': 'GitHub-Hookshot/abc123',
        'x-github-delivery': delivery,
        'x-github-event': 'pull_request',
        'x-github-hook-id': '1',
        'x-hub-signature-256': signature,
        // GitHub sends the legacy SHA-1 header too when a secret is set.
        'x-hub-signature': `sha1=${createHmac('sha1', SECRETS.github).update(text).digest('hex')}`,
      },
      text,
      { idempotencyKey: delivery, eventType: 'pull_request' },
    );
    expect(row?.headers).not.toHaveProperty('x-hub-signature-256');
    expect(row?.headers).not.toHaveProperty('x-hub-signature');
  });

  it('refuses a request carrying only the legacy SHA-1 X-Hub-Signature', async () => {
    const text = JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: 1 });
    // The legacy header's format: `sha1=` + hex HMAC-SHA1 of the body (webhooks-methods 6 signs SHA-256 only).
    const signature = `sha1=${createHmac('sha1', SECRETS.github).update(text).digest('hex')}`;
    const answer = await post(
      'github',
      {
        'content-type': 'application/json',
        'x-github-delivery': randomUUID(),
        'x-github-event': 'ping',
        'x-hub-signature': signature,
      },
      text,
    );
    expect(answer.status).toBe(401);
  });
});

describe('shopify (@shopify/shopify-api)', () => {
  const shopify = shopifyApi({
    apiKey: 'interop-test-key',
    apiSecretKey: SECRETS.shopify,
    hostName: 'localhost',
    apiVersion: ApiVersion.January26,
    isEmbeddedApp: false,
    logger: { level: LogSeverity.Error },
  });

  async function shopifyAccepts(headers: Record<string, string>, text: string): Promise<boolean> {
    const result = await shopify.webhooks.validate({
      rawBody: text,
      rawRequest: new Request('https://localhost/webhooks', { method: 'POST', headers, body: text }),
    });
    return result.valid;
  }

  it('accepts X-Shopify-Hmac-Sha256 (webhooks); key = X-Shopify-Webhook-Id, event type X-Shopify-Topic', async () => {
    // Shopify's ids pass 2^53 (this is the order id of Shopify's own examples); written as text, not a JS number.
    const text = '{"id":820982911946154508,"email":"jon@example.com","total_price":"11.00"}';
    const webhookId = randomUUID();
    const headers = {
      'content-type': 'application/json',
      'x-shopify-hmac-sha256': shopifyHmac(text, SECRETS.shopify),
      'x-shopify-topic': 'orders/create',
      'x-shopify-shop-domain': 'interop.myshopify.com',
      'x-shopify-api-version': ApiVersion.January26,
      'x-shopify-webhook-id': webhookId,
      'x-shopify-event-id': randomUUID(),
      'x-shopify-triggered-at': new Date().toISOString(),
    };
    expect(await shopifyAccepts(headers, text)).toBe(true);
    const row = await assertDelivery('shopify', headers, text, {
      idempotencyKey: webhookId,
      eventType: 'orders/create',
      bigNumbers: true,
    });
    expect(row?.headers).not.toHaveProperty('x-shopify-hmac-sha256');
    // The id keeps every digit.
    expect(JSON.stringify(row?.payload)).toContain('820982911946154508');
  });

  it('accepts Shopify-Hmac-Sha256 (Events deliveries); key = Shopify-Webhook-Id', async () => {
    const text = JSON.stringify({ id: 'gid://shopify/Product/1', title: 'Hat 1' });
    const webhookId = randomUUID();
    const headers = {
      'content-type': 'application/json',
      'shopify-hmac-sha256': shopifyHmac(text, SECRETS.shopify),
      'shopify-topic': 'products/update',
      'shopify-shop-domain': 'interop.myshopify.com',
      'shopify-api-version': ApiVersion.January26,
      'shopify-webhook-id': webhookId,
    };
    expect(await shopifyAccepts(headers, text)).toBe(true);
    // Events deliveries name the topic in Shopify-Topic (no X-Shopify-Topic): without it the source's default
    // topic `{{ eventType }}` would render empty and the relay would send the row dead.
    await assertDelivery('shopify', headers, text, {
      idempotencyKey: webhookId,
      eventType: 'products/update',
    });
  });
});

describe('slack (algorithm of Slack’s "Verifying requests from Slack")', () => {
  // signature = "v0=" + hex(HMAC-SHA256(signing secret, "v0:" + X-Slack-Request-Timestamp + ":" + raw body))
  const slackHeaders = (text: string, timestamp = Math.floor(Date.now() / 1000)) => ({
    'content-type': 'application/json',
    'x-slack-request-timestamp': String(timestamp),
    'x-slack-signature': `v0=${createHmac('sha256', SECRETS.slack).update(`v0:${timestamp}:${text}`).digest('hex')}`,
  });

  it('accepts an Events API callback; key = $.event_id, event type $.event.type', async () => {
    const eventId = `Ev${randomBytes(5).toString('hex').toUpperCase()}`;
    const text = JSON.stringify({
      token: 'x',
      team_id: 'T1',
      api_app_id: 'A1',
      event: { type: 'app_mention', user: 'U1', text: 'hi', ts: '1.1', channel: 'C1' },
      type: 'event_callback',
      event_id: eventId,
      event_time: 1,
    });
    const row = await assertDelivery('slack', slackHeaders(text), text, {
      idempotencyKey: eventId,
      eventType: 'app_mention',
    });
    expect(row?.headers).not.toHaveProperty('x-slack-signature');
    // Slack's retry: the same event_id, signed again, with X-Slack-Retry-Num.
    const retry = {
      ...slackHeaders(text, Math.floor(Date.now() / 1000) + 5),
      'x-slack-retry-num': '1',
      'x-slack-retry-reason': 'http_timeout',
    };
    expect(await post('slack', retry, text)).toEqual({ status: 200, body: { status: 'duplicate' } });
  });

  it('answers a signed url_verification with its challenge and stores nothing', async () => {
    const text = JSON.stringify({ token: 'x', challenge: 'c-1', type: 'url_verification' });
    expect(await post('slack', slackHeaders(text), text)).toEqual({
      status: 200,
      body: { challenge: 'c-1' },
    });
  });

  it('refuses a request signed more than 300 s ago', async () => {
    const text = JSON.stringify({ type: 'event_callback', event_id: 'Ev1', event: { type: 'x' } });
    const answer = await post('slack', slackHeaders(text, Math.floor(Date.now() / 1000) - 301), text);
    expect(answer.status).toBe(401);
  });
});

// Runs last: relays every row the tests above stored and delivers them all to a signed HTTP destination.
describe('relay and signed delivery of what was received', () => {
  it('relays every stored row (none dead); each signed delivery of them verifies with svix and standardwebhooks', async () => {
    const receiver = await startHttpReceiver();
    const outSecret = whsec();
    const destinations = {
      partner: {
        type: 'http' as const,
        url: receiver.url,
        signing: { scheme: 'standard-webhooks' as const, secrets: [outSecret] },
      },
    };
    const publishers = createPublishers(destinations, defaultPublisherFactories);
    try {
      const relay = createRelay({ store: db.store.inbox, sources, outbox: { maxAttempts: 3 } });
      const relayed = await relay.drain({ deadline: Date.now() + 20_000 });
      // Every topic rendered: Shopify's Events delivery included (its event type comes from Shopify-Topic).
      expect(relayed.dead).toBe(0);
      expect(relayed.forwarded).toBeGreaterThan(0);
      const poller = createOutboxPoller({
        store: db.store.outbox,
        publishers,
        routes: [{ match: '#', destination: 'partner' }],
        destinations,
        options: {
          batchSize: 100,
          claimTimeoutMs: 60_000,
          maxAttempts: 3,
          backoff: { baseMs: 100, maxMs: 1000 },
        },
      });
      await poller.drain({ deadline: Date.now() + 20_000 });
      await poller.close();
      // Every relayed row was delivered and verifies with both libraries: UTF-8 bodies, Shopify's id beyond 2^53
      // kept digit for digit, and the rows from the Svix source (carrying the inbound svix-id) included.
      expect(receiver.requests).toHaveLength(relayed.forwarded);
      const from = receiver.requests.map((r) => r.headers['x-source']);
      expect(new Set(from)).toEqual(new Set(Object.keys(sources)));
      for (const request of receiver.requests) {
        expect(() => new SvixWebhook(outSecret).verify(request.body, request.headers)).not.toThrow();
        expect(new StandardWebhook(outSecret).verify(request.body, request.headers)).toEqual(
          JSON.parse(request.body),
        );
      }
      expect(receiver.requests.some((r) => r.body.includes('820982911946154508'))).toBe(true);
      expect(receiver.requests.some((r) => r.body.includes('Café ✓ 𝄞'))).toBe(true);
    } finally {
      await publishers.close();
      await receiver.close();
    }
  });
});
