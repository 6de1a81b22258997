import type { JsonValue } from '@queuebox/core';
import {
  checkCommon,
  checkTimestamp,
  decodeSignatureHeader,
  requiredHeader,
  secretVerifier,
  verifyHmacSignatures,
} from './primitives.ts';
import type { AuthScheme } from './types.ts';

const SIGNATURE = 'X-Slack-Signature';
const TIMESTAMP = 'X-Slack-Request-Timestamp';

/**
 * Slack: `X-Slack-Signature: v0=<hex>`, the HMAC-SHA256 of `v0:<X-Slack-Request-Timestamp>:<raw body>` keyed with
 * the app's signing secret. The timestamp must lie within `toleranceSec` (default 300) of now.
 */
export const verifySlack = secretVerifier((body, headers, secrets, options, now) => {
  const value = requiredHeader(headers, SIGNATURE);
  if (typeof value !== 'string') return value;
  const timestamp = requiredHeader(headers, TIMESTAMP);
  if (typeof timestamp !== 'string') return timestamp;
  const stale = checkTimestamp(timestamp, options, now);
  if (stale) return stale;
  const signature = decodeSignatureHeader(value, { label: SIGNATURE, prefix: 'v0=', encoding: 'hex' });
  if (!(signature instanceof Uint8Array)) return signature;
  return verifyHmacSignatures({
    keys: secrets,
    message: [`v0:${timestamp}:`, body],
    signatures: [signature],
  });
});

/**
 * Slack's check of a new Events API request URL: `{"type":"url_verification","challenge":"…"}`, signed like any
 * event, answered with the challenge.
 */
export function answerSlackUrlVerification(payload: JsonValue): { challenge: string } | undefined {
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) return undefined;
  const { type, challenge } = payload as Record<string, JsonValue>;
  return type === 'url_verification' && typeof challenge === 'string' ? { challenge } : undefined;
}

/**
 * Slack Events API: idempotency key `$.event_id`, event type `$.event.type`; the `url_verification` handshake is
 * answered with its challenge and not stored.
 */
export const slackScheme: AuthScheme = {
  name: 'slack',
  verify: verifySlack,
  defaults: { idempotencyKey: [{ path: '$.event_id' }], eventType: { path: '$.event.type' } },
  credentialHeaders: () => [SIGNATURE.toLowerCase()],
  check: checkCommon,
  handshake: answerSlackUrlVerification,
};
