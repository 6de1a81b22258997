import type { AuthOptions } from '../options.ts';
import {
  anyEqual,
  checkCommon,
  decodeSignature,
  fail,
  hmac,
  missing,
  NO_SECRET,
  OK,
  secretsOf,
  utf8,
} from './primitives.ts';
import type { AuthResult, AuthScheme } from './types.ts';

const HEADER = 'x-shopify-hmac-sha256';

/**
 * Shopify: `X-Shopify-Hmac-Sha256` carries the base64 HMAC-SHA256 of the raw body keyed with the app's client
 * secret. Shopify signs no timestamp.
 */
export function verifyShopify(
  body: Uint8Array,
  headers: Readonly<Record<string, string>>,
  options: AuthOptions,
): AuthResult {
  const secrets = secretsOf(options);
  if (secrets.length === 0) return NO_SECRET;
  const value = headers[HEADER]?.trim();
  if (value === undefined || value === '') return missing('X-Shopify-Hmac-Sha256');
  const signature = decodeSignature(value, 'base64');
  if (signature === undefined)
    return fail('malformed_header', 'The X-Shopify-Hmac-Sha256 header is not base64');
  const expected = secrets.map((s) => hmac('sha256', utf8(s), body));
  return anyEqual([signature], expected)
    ? OK
    : fail('signature_mismatch', 'The signature does not match the body');
}

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
  credentialHeaders: () => [HEADER],
  check: checkCommon,
};
