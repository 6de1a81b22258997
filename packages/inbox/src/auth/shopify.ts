import { checkCommon, secretVerifier, verifyBodySignature } from './primitives.ts';
import type { AuthScheme } from './types.ts';

const LABEL = 'X-Shopify-Hmac-Sha256';

/**
 * Shopify: `X-Shopify-Hmac-Sha256` carries the base64 HMAC-SHA256 of the raw body keyed with the app's client
 * secret. Shopify signs no timestamp.
 */
export const verifyShopify = secretVerifier((body, headers, secrets) =>
  verifyBodySignature(body, headers, secrets, { label: LABEL, encoding: 'base64' }),
);

/**
 * Shopify: idempotency key `X-Shopify-Event-Id` (Shopify's documented duplicate detector), else
 * `X-Shopify-Webhook-Id`; event type `X-Shopify-Topic`.
 */
export const shopifyScheme: AuthScheme = {
  name: 'shopify',
  verify: verifyShopify,
  defaults: {
    idempotencyKey: [{ header: 'X-Shopify-Event-Id' }, { header: 'X-Shopify-Webhook-Id' }],
    eventType: { header: 'X-Shopify-Topic' },
  },
  credentialHeaders: () => [LABEL.toLowerCase()],
  check: checkCommon,
};
