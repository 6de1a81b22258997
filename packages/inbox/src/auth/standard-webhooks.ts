import {
  checkCommon,
  checkTimestamp,
  decodeSignature,
  fail,
  missing,
  NO_SECRET,
  secretVerifier,
  verifyHmacSignatures,
} from './primitives.ts';
import type { AuthScheme } from './types.ts';

const SECRET_PREFIX = 'whsec_';
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** The HMAC key of a Standard Webhooks secret: the base64 after the optional `whsec_` prefix. */
export function standardWebhooksKey(secret: string): Buffer | undefined {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  return BASE64.test(encoded) ? Buffer.from(encoded, 'base64') : undefined;
}

/** The three headers, from the `webhook-` set or else Svix's `svix-` set. */
function headerSet(headers: Readonly<Record<string, string>>): {
  id?: string;
  timestamp?: string;
  signature?: string;
} {
  const prefix = headers['webhook-signature'] !== undefined ? 'webhook' : 'svix';
  return {
    id: headers[`${prefix}-id`],
    timestamp: headers[`${prefix}-timestamp`],
    signature: headers[`${prefix}-signature`],
  };
}

/**
 * Standard Webhooks (and Svix, whose headers start with `svix-` instead of `webhook-`): `webhook-signature` holds
 * space-separated `v1,<base64>` entries, each the HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<raw body>`
 * keyed with the base64-decoded secret (after its `whsec_` prefix). Entries of other versions (`v1a`, asymmetric)
 * are ignored. The timestamp must lie within `toleranceSec` (default 300) of now.
 */
export const verifyStandardWebhooks = secretVerifier((body, headers, secrets, options, now) => {
  const keys = secrets.map(standardWebhooksKey).filter((k): k is Buffer => k !== undefined);
  if (keys.length === 0) return NO_SECRET;
  const { id, timestamp, signature } = headerSet(headers);
  if (signature === undefined || signature.trim() === '') return missing('webhook-signature');
  if (id === undefined || id === '') return missing('webhook-id');
  if (timestamp === undefined || timestamp === '') return missing('webhook-timestamp');
  const stale = checkTimestamp(timestamp.trim(), options, now);
  if (stale) return stale;
  const signatures: Buffer[] = [];
  for (const entry of signature.split(' ')) {
    const comma = entry.indexOf(',');
    if (comma <= 0 || entry.slice(0, comma) !== 'v1') continue;
    const decoded = decodeSignature(entry.slice(comma + 1), 'base64');
    if (decoded !== undefined) signatures.push(decoded);
  }
  if (signatures.length === 0)
    return fail('malformed_header', 'The webhook-signature header has no v1 signature');
  return verifyHmacSignatures({
    keys,
    message: [`${id}.${timestamp.trim()}.`, body],
    signatures,
    mismatch: 'No v1 signature matches the body',
  });
});

/** Standard Webhooks / Svix: idempotency key `webhook-id` (or `svix-id`), event type `$.type`. */
export const standardWebhooksScheme: AuthScheme = {
  name: 'standard-webhooks',
  verify: verifyStandardWebhooks,
  defaults: {
    idempotencyKey: [{ header: 'webhook-id' }, { header: 'svix-id' }],
    eventType: { path: '$.type' },
  },
  credentialHeaders: () => ['webhook-signature', 'svix-signature'],
  check: (options) => {
    const issues = checkCommon(options);
    if (options.secrets.some((s) => s.length > 0 && standardWebhooksKey(s) === undefined)) {
      issues.push('auth.secrets of standard-webhooks must be whsec_<base64> secrets');
    }
    return issues;
  },
};
