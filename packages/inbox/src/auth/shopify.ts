import { checkCommon, secretVerifier, verifyBodySignature } from './primitives.ts';
import type { AuthScheme } from './types.ts';

/** Webhooks send the first; Shopify's newer Events deliveries the second. */
const LABELS = ['X-Shopify-Hmac-Sha256', 'Shopify-Hmac-Sha256'] as const;

/**
 * Shopify: `X-Shopify-Hmac-Sha256` (webhooks) or `Shopify-Hmac-Sha256` (Events deliveries) carries the base64
 * HMAC-SHA256 of the raw body keyed with the app's client secret. Shopify signs no timestamp.
 */
export const verifyShopify = secretVerifier((body, headers, secrets) => {
  const label = LABELS.find((l) => headers[l.toLowerCase()] !== undefined) ?? LABELS[0];
  return verifyBodySignature(body, headers, secrets, { label, encoding: 'base64' });
});

/**
 * Shopify: idempotency key `X-Shopify-Webhook-Id` (per delivery, the same on a retry: Shopify's documented
 * duplicate detector), else `Shopify-Webhook-Id` (Events); event type `X-Shopify-Topic`, else `Shopify-Topic`
 * (Events deliveries carry only that one; without it the default topic `{{ eventType }}` renders empty). Not
 * `X-Shopify-Event-Id`: one merchant action gives several deliveries (one per subscribed topic) with the same
 * event id, and they are different messages.
 */
export const shopifyScheme: AuthScheme = {
  name: 'shopify',
  verify: verifyShopify,
  defaults: {
    idempotencyKey: [{ header: 'X-Shopify-Webhook-Id' }, { header: 'Shopify-Webhook-Id' }],
    eventType: [{ header: 'X-Shopify-Topic' }, { header: 'Shopify-Topic' }],
  },
  credentialHeaders: () => LABELS.map((l) => l.toLowerCase()),
  check: checkCommon,
};
