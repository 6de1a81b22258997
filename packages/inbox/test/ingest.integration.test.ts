/** Ingestion on a real PostgreSQL store: the answers of the HTTP entry point and provider handshakes. */
import { createHmac, randomUUID } from 'node:crypto';
import { MessageState } from '@queuebox/core';
import { useTestStore } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import type { IngestRequest } from '../src/index.ts';
import { createIngestion } from '../src/index.ts';
import {
  anEvent,
  anOrdersRequest,
  aStripeRequest,
  clock,
  GITHUB_SECRET,
  ingestionFor,
  NOW,
  SLACK_SECRET,
  STRIPE_SECRET,
} from './ingest-fixtures.ts';

const db = useTestStore('inbox_ingest', { storePoolSize: 10 });
const ingestion = ingestionFor(db);

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
      '/inbox/decoding',
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

  it('keys a Standard Webhooks message on the configured idempotencyKey, not on the webhook-id it signs', async () => {
    // Prepare: a source of its own on the same store, and a request signed as Standard Webhooks signs it.
    const key = Buffer.from(randomUUID());
    const service = createIngestion({
      store: db.store.inbox,
      sources: {
        sw: {
          type: 'http',
          auth: { scheme: 'standard-webhooks', secrets: [`whsec_${key.toString('base64')}`] },
          idempotencyKey: { path: '$.data.id' },
        },
      },
      inbox: { basePath: '/inbox', maxBodyBytes: 4096, relay: { maxAttempts: 6 } },
      outbox: { maxAttempts: 9 },
      clock,
    });
    const invoice = `inv_${randomUUID()}`;
    const text = JSON.stringify({ type: 'invoice.paid', data: { id: invoice } });
    const signed = (id: string): IngestRequest => {
      const t = String(Math.floor(NOW / 1000));
      const signature = createHmac('sha256', key).update(`${id}.${t}.${text}`).digest('base64');
      return {
        method: 'POST',
        path: '/inbox/sw',
        headers: {
          'content-type': 'application/json',
          'webhook-id': id,
          'webhook-timestamp': t,
          'webhook-signature': `v1,${signature}`,
        },
        body: new TextEncoder().encode(text),
      };
    };
    // Act: the same invoice sent twice under two webhook ids.
    const first = await service.handle(signed(`msg_${randomUUID()}`));
    const second = await service.handle(signed(`msg_${randomUUID()}`));
    // Assess
    expect(first.status).toBe(202);
    expect(await db.store.inbox.get(first.body.id as string)).toMatchObject({
      source: 'sw',
      idempotencyKey: invoice,
    });
    expect(second.status).toBe(200);
    expect(second.body).toEqual({ status: 'duplicate' });
    expect(await db.countInbox('sw', invoice)).toBe(1);
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
