import type { AuthOptions } from '../options.ts';
import {
  anyEqual,
  checkCommon,
  checkTimestamp,
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

const SIGNATURE = 'x-slack-signature';
const TIMESTAMP = 'x-slack-request-timestamp';
const PREFIX = 'v0=';

/**
 * Slack: `X-Slack-Signature: v0=<hex>`, the HMAC-SHA256 of `v0:<X-Slack-Request-Timestamp>:<raw body>` keyed with
 * the app's signing secret. The timestamp must lie within `toleranceSec` (default 300) of now.
 */
export function verifySlack(
  body: Uint8Array,
  headers: Readonly<Record<string, string>>,
  options: AuthOptions,
  now: number,
): AuthResult {
  const secrets = secretsOf(options);
  if (secrets.length === 0) return NO_SECRET;
  const value = headers[SIGNATURE]?.trim();
  if (value === undefined || value === '') return missing('X-Slack-Signature');
  const timestamp = headers[TIMESTAMP]?.trim();
  if (timestamp === undefined || timestamp === '') return missing('X-Slack-Request-Timestamp');
  const stale = checkTimestamp(timestamp, options, now);
  if (stale) return stale;
  if (!value.startsWith(PREFIX)) return fail('malformed_header', 'The X-Slack-Signature header lacks v0=');
  const signature = decodeSignature(value.slice(PREFIX.length), 'hex');
  if (signature === undefined) return fail('malformed_header', 'The X-Slack-Signature header is not hex');
  const signed = utf8(`v0:${timestamp}:`);
  const expected = secrets.map((s) => hmac('sha256', utf8(s), signed, body));
  return anyEqual([signature], expected)
    ? OK
    : fail('signature_mismatch', 'The signature does not match the body');
}

/** Slack Events API: idempotency key `$.event_id`, event type `$.event.type`. */
export const slackScheme: AuthScheme = {
  name: 'slack',
  verify: verifySlack,
  defaults: { idempotencyKey: [{ path: '$.event_id' }], eventType: { path: '$.event.type' } },
  credentialHeaders: () => [SIGNATURE],
  check: checkCommon,
};
