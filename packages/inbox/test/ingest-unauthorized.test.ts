/**
 * A 401 says nothing about what failed (a prober learns nothing), and hands the caller the reason for its log line,
 * so a clock-skew refusal and a wrong secret can be told apart in the log. Nothing reaches the store.
 */
import { createHmac } from 'node:crypto';
import type { InboxStore } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { createIngestion, type IngestRequest, UNAUTHORIZED_MESSAGE } from '../src/index.ts';
import {
  anEvent,
  aStripeRequest,
  clock,
  NOW,
  ORDERS_TOKEN,
  STRIPE_SECRET,
  sources,
  transforms,
} from './ingest-fixtures.ts';

/** A store no 401 may reach. */
const untouchable = new Proxy({} as InboxStore, {
  get: (_, name) => () => {
    throw new Error(`the store was asked for ${String(name)}`);
  },
});

function ingestion() {
  return createIngestion({ store: untouchable, sources, transforms, inbox: { basePath: '/inbox' }, clock });
}

/** A Stripe request signed at `t` (seconds) with `secret`. */
function signedAt(t: number, secret: string): IngestRequest & { signature: string } {
  const request = aStripeRequest(anEvent('evt_unauthorized'));
  const text = new TextDecoder().decode(request.body);
  const signature = createHmac('sha256', secret).update(`${t}.${text}`).digest('hex');
  return {
    ...request,
    headers: { ...request.headers, 'Stripe-Signature': `t=${t},v1=${signature}` },
    signature,
  };
}

describe('a 401 from source authentication', () => {
  it('answers the same plain 401 whatever failed, and gives the reason to the caller only', async () => {
    // Prepare
    const now = Math.floor(NOW / 1000);
    const stale = signedAt(now - 600, STRIPE_SECRET); // the right secret, 10 minutes old (tolerance 300 s)
    const wrong = signedAt(now, 'whsec_not_the_secret');
    const { 'Stripe-Signature': _, ...unsignedHeaders } = wrong.headers as Record<string, string>;
    const unsigned = { ...wrong, headers: unsignedHeaders };
    const bearer: IngestRequest = {
      method: 'POST',
      path: '/inbox/orders',
      headers: { authorization: `Bearer ${ORDERS_TOKEN}-typo`, 'content-type': 'application/json' },
      body: new TextEncoder().encode('{"kind":"x"}'),
    };

    // Act
    const answers = await Promise.all([stale, wrong, unsigned, bearer].map((r) => ingestion().handle(r)));

    // Assess: one answer for all, the reason beside it.
    for (const answer of answers) {
      expect(answer).toMatchObject({ status: 401, outcome: 'unauthorized' });
      expect(answer.body).toEqual({ error: 'unauthorized', message: UNAUTHORIZED_MESSAGE });
    }
    expect(answers.map((a) => a.refusal)).toEqual([
      { reason: 'timestamp_out_of_tolerance', detail: 'The signature timestamp is more than 300 s from now' },
      { reason: 'signature_mismatch', detail: 'No v1 signature matches the body' },
      { reason: 'missing_header', detail: 'The Stripe-Signature header is missing' },
      { reason: 'credentials_mismatch', detail: 'The bearer token is not valid' },
    ]);
    expect(answers.map((a) => a.source)).toEqual(['stripe', 'stripe', 'stripe', 'orders']);
    // Neither the answer nor the reason quotes a secret, a token or a signature.
    const text = JSON.stringify(answers.map(({ body, refusal }) => ({ body, refusal })));
    for (const value of [
      STRIPE_SECRET,
      'whsec_not_the_secret',
      ORDERS_TOKEN,
      stale.signature,
      wrong.signature,
    ]) {
      expect(text).not.toContain(value);
    }
  });

  it('sets no refusal on any other answer', async () => {
    // Act: no source at the path, not JSON.
    const missing = await ingestion().handle({ ...aStripeRequest(anEvent()), path: '/inbox/nowhere' });
    const notJson = await ingestion().handle({
      ...aStripeRequest(anEvent()),
      headers: { 'content-type': 'text/plain' },
    });

    // Assess
    expect(missing).toMatchObject({ status: 404 });
    expect(notJson).toMatchObject({ status: 415 });
    expect(missing.refusal).toBeUndefined();
    expect(notJson.refusal).toBeUndefined();
  });
});
