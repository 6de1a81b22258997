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

const HEADER = 'x-hub-signature-256';
const PREFIX = 'sha256=';

/**
 * GitHub: `X-Hub-Signature-256: sha256=<hex>`, the HMAC-SHA256 of the raw body keyed with the webhook secret.
 * GitHub signs no timestamp, so there is no tolerance; replays are caught by the idempotency key. The legacy
 * SHA-1 `X-Hub-Signature` is not accepted.
 */
export function verifyGithub(
  body: Uint8Array,
  headers: Readonly<Record<string, string>>,
  options: AuthOptions,
): AuthResult {
  const secrets = secretsOf(options);
  if (secrets.length === 0) return NO_SECRET;
  const value = headers[HEADER]?.trim();
  if (value === undefined || value === '') return missing('X-Hub-Signature-256');
  if (!value.startsWith(PREFIX))
    return fail('malformed_header', 'The X-Hub-Signature-256 header lacks sha256=');
  const signature = decodeSignature(value.slice(PREFIX.length), 'hex');
  if (signature === undefined) return fail('malformed_header', 'The X-Hub-Signature-256 header is not hex');
  const expected = secrets.map((s) => hmac('sha256', utf8(s), body));
  return anyEqual([signature], expected)
    ? OK
    : fail('signature_mismatch', 'The signature does not match the body');
}

/** GitHub: idempotency key `X-GitHub-Delivery`, event type `X-GitHub-Event`. */
export const githubScheme: AuthScheme = {
  name: 'github',
  verify: verifyGithub,
  defaults: { idempotencyKey: [{ header: 'X-GitHub-Delivery' }], eventType: { header: 'X-GitHub-Event' } },
  credentialHeaders: () => [HEADER, 'x-hub-signature'],
  check: checkCommon,
};
