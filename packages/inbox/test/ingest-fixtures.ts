/**
 * The sources, transforms and signed requests the ingest*.integration.test.ts files share; each file opens its
 * own store (useTestStore) and builds its ingestion with `ingestionFor(db)`.
 */
import { createHmac, randomUUID } from 'node:crypto';
import type { Store } from '@queuebox/core';
import type { IngestRequest, Sources, TransformFunctions } from '../src/index.ts';
import { createIngestion, reject, TransformRejectedError } from '../src/index.ts';

export const STRIPE_SECRET = 'whsec_ingest_test';
export const GITHUB_SECRET = 'gh-secret';
export const ORDERS_TOKEN = 'orders-token';
export const SLACK_SECRET = 'slack-signing-secret';
export const NOW = Date.parse('2026-11-30T12:00:00Z');
export const clock = { now: () => NOW };

export const sources: Sources = {
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
  decoding: { type: 'http', transform: { jsonata: '$merge([$, {"ref": $decodeUrlComponent(ref)}])' } },
  queue: { type: 'amqp' },
};

export const transforms: TransformFunctions = {
  orders: ({ payload }) => {
    const order = payload as { kind: string; total: number };
    if (order.kind === 'test') reject('test orders are not stored');
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

/** `ingestion(overrides)` over the store of `db` (opened in the file's `beforeAll`) with the sources above. */
export function ingestionFor(db: { readonly store: Store }) {
  return (overrides: { maxBodyBytes?: number } = {}) =>
    createIngestion({
      store: db.store.inbox,
      sources,
      inbox: { basePath: '/inbox', maxBodyBytes: overrides.maxBodyBytes ?? 4096, relay: { maxAttempts: 6 } },
      outbox: { maxAttempts: 9 },
      transforms,
      clock,
    });
}

// Stripe signs `${t}.${body}` with HMAC-SHA256 (hex) and sends `t=…,v1=…`.
export function aStripeRequest(
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

export const anEvent = (id = `evt_${randomUUID()}`) => ({
  id,
  type: 'invoice.paid',
  data: { object: { id: 'in_42', amount: 1200 } },
});

export function anOrdersRequest(order: unknown, key: string, token = ORDERS_TOKEN): IngestRequest {
  return {
    method: 'POST',
    path: '/inbox/orders',
    headers: { authorization: `Bearer ${token}`, 'idempotency-key': key, 'content-type': 'application/json' },
    body: new TextEncoder().encode(JSON.stringify(order)),
  };
}
