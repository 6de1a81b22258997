import {
  checkCommon,
  checkTimestamp,
  decodeSignature,
  fail,
  requiredHeader,
  secretVerifier,
  verifyHmacSignatures,
} from './primitives.ts';
import type { AuthScheme } from './types.ts';

const LABEL = 'Stripe-Signature';

/**
 * Stripe: `Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>…]`, where each v1 is the HMAC-SHA256 of
 * `<t>.<raw body>` keyed with the endpoint secret (`whsec_…`, used as it is). Several v1 entries appear while
 * Stripe rolls a secret; any match passes. Elements of other schemes (v0) are ignored. The timestamp must lie
 * within `toleranceSec` (default 300) of now.
 */
export const verifyStripe = secretVerifier((body, headers, secrets, options, now) => {
  const value = requiredHeader(headers, LABEL);
  if (typeof value !== 'string') return value;
  let timestamp: string | undefined;
  const signatures: Buffer[] = [];
  for (const element of value.split(',')) {
    const at = element.indexOf('=');
    if (at <= 0) continue;
    const key = element.slice(0, at).trim();
    const item = element.slice(at + 1).trim();
    if (key === 't') {
      if (timestamp !== undefined)
        return fail('malformed_header', 'The Stripe-Signature header has two timestamps');
      timestamp = item;
    } else if (key === 'v1') {
      const signature = decodeSignature(item, 'hex');
      if (signature !== undefined) signatures.push(signature);
    }
  }
  if (timestamp === undefined)
    return fail('malformed_header', 'The Stripe-Signature header has no timestamp');
  if (signatures.length === 0)
    return fail('malformed_header', 'The Stripe-Signature header has no v1 signature');
  const stale = checkTimestamp(timestamp, options, now);
  if (stale) return stale;
  return verifyHmacSignatures({
    keys: secrets,
    message: [`${timestamp}.`, body],
    signatures,
    mismatch: 'No v1 signature matches the body',
  });
});

/** Stripe: idempotency key `$.id` (the event id), event type `$.type`. */
export const stripeScheme: AuthScheme = {
  name: 'stripe',
  verify: verifyStripe,
  defaults: { idempotencyKey: [{ path: '$.id' }], eventType: { path: '$.type' } },
  credentialHeaders: () => [LABEL.toLowerCase()],
  check: checkCommon,
};
