import { decodeStandardWebhooksSecret } from '@queuebox/core';
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
import type { AuthResult, AuthScheme } from './types.ts';

/**
 * The HMAC key of a Standard Webhooks secret (core's `decodeStandardWebhooksSecret`, shared with outbound signing):
 * the base64 after the optional `whsec_` prefix; undefined when it is not base64 or decodes to fewer than 24 bytes.
 */
export function standardWebhooksKey(secret: string): Uint8Array | undefined {
  const decoded = decodeStandardWebhooksSecret(secret);
  return decoded.ok ? decoded.key : undefined;
}

const PARTS = ['id', 'timestamp', 'signature'] as const;

/**
 * The three headers, from the `webhook-` set or else Svix's `svix-` set; a failure when the request carries both
 * sets and they disagree. A sender that adds an unsigned `webhook-id` to a Svix-signed delivery would otherwise be
 * verified with one id and keyed with another: one event, stored once per forged id.
 */
function headerSet(
  headers: Readonly<Record<string, string>>,
): { id?: string; timestamp?: string; signature?: string } | AuthResult {
  const chosen = headers['webhook-signature'] !== undefined ? 'webhook' : 'svix';
  const other = chosen === 'webhook' ? 'svix' : 'webhook';
  for (const part of PARTS) {
    const theirs = headers[`${other}-${part}`];
    if (theirs !== undefined && theirs !== headers[`${chosen}-${part}`]) {
      return fail(
        'malformed_header',
        `The ${other}-${part} header disagrees with ${chosen}-${part}; send one header set, or the same values in both`,
      );
    }
  }
  return {
    id: headers[`${chosen}-id`],
    timestamp: headers[`${chosen}-timestamp`],
    signature: headers[`${chosen}-signature`],
  };
}

/**
 * Standard Webhooks (and Svix, whose headers start with `svix-` instead of `webhook-`): `webhook-signature` holds
 * space-separated `v1,<base64>` entries, each the HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<raw body>`
 * keyed with the base64-decoded secret (after its `whsec_` prefix). Entries of other versions (`v1a`, asymmetric)
 * are ignored. The timestamp must lie within `toleranceSec` (default 300) of now.
 */
export const verifyStandardWebhooks = secretVerifier((body, headers, secrets, options, now) => {
  const keys = secrets.map(standardWebhooksKey).filter((k): k is Uint8Array => k !== undefined);
  if (keys.length === 0) return NO_SECRET;
  const set = headerSet(headers);
  if ('ok' in set) return set;
  const { id, timestamp, signature } = set;
  if (signature === undefined || signature.trim() === '') return missing('webhook-signature');
  if (id === undefined || id === '') return missing('webhook-id');
  if (timestamp === undefined || timestamp === '') return missing('webhook-timestamp');
  const stale = checkTimestamp(timestamp.trim(), options, now);
  if (stale) return stale;
  // `v1,<base64> v1,<base64>`: each signature after its version. Read as a list of tokens between spaces and commas,
  // so that a header the sender repeated, which the server joins (`, ` here, `,` by API Gateway), reads the same
  // (an outside audit: the first of two headers failed as `v1,<sig>,`). Base64 holds neither a space nor a comma.
  const signatures: Buffer[] = [];
  const tokens = signature.split(/[\s,]+/);
  for (let i = 0; i + 1 < tokens.length; i++) {
    if (tokens[i] !== 'v1') continue;
    i++;
    const decoded = decodeSignature(tokens[i] as string, 'base64');
    if (decoded !== undefined) signatures.push(decoded);
  }
  if (signatures.length === 0)
    return fail('malformed_header', 'The webhook-signature header has no v1 signature');
  const verdict = verifyHmacSignatures({
    keys,
    message: [`${id}.${timestamp.trim()}.`, body],
    signatures,
    mismatch: 'No v1 signature matches the body',
  });
  return verdict.ok ? { ok: true, signedId: id } : verdict;
});

/**
 * Standard Webhooks / Svix: idempotency key the signed id (`webhook-id`, or `svix-id`; the verifier returns it as
 * `signedId`), event type `$.type`.
 */
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
    for (const secret of options.secrets) {
      const decoded = secret.length > 0 ? decodeStandardWebhooksSecret(secret) : undefined;
      if (decoded && !decoded.ok) issues.push(`auth.secrets: ${decoded.problem}`);
    }
    return issues;
  },
};
