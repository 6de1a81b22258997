import { createHmac } from 'node:crypto';
import { ConfigError, decodeStandardWebhooksSecret } from '@queuebox/core';

/** The three headers of a Standard Webhooks delivery. */
export interface StandardWebhooksHeaders {
  readonly 'webhook-id': string;
  readonly 'webhook-timestamp': string;
  readonly 'webhook-signature': string;
}

/** Signs webhook deliveries with one or more secrets. */
export interface StandardWebhooksSigner {
  /**
   * The headers for a delivery of `body` with message id `id` at `timestampSeconds` (Unix seconds). The signature
   * header holds one `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` per secret, space-separated.
   */
  sign(id: string, timestampSeconds: number, body: string): StandardWebhooksHeaders;
}

/**
 * The key bytes of a `whsec_<base64>` secret (the prefix is optional), decoded by core's
 * `decodeStandardWebhooksSecret`, the decoder inbound sources use too. Throws `ConfigError` when unusable: not base64,
 * or shorter than 24 bytes.
 */
export function decodeSecret(secret: string, path = 'signing.secrets'): Uint8Array {
  const decoded = decodeStandardWebhooksSecret(secret);
  if (!decoded.ok) throw new ConfigError([{ path, message: decoded.problem }]);
  return decoded.key;
}

/** A signer with `secrets` (at least one), each decoded once here. */
export function createStandardWebhooksSigner(
  secrets: readonly string[],
  path = 'signing.secrets',
): StandardWebhooksSigner {
  if (secrets.length === 0) {
    throw new ConfigError([{ path, message: 'Standard Webhooks signing needs at least one secret' }]);
  }
  const keys = secrets.map((secret, i) => decodeSecret(secret, `${path}[${i}]`));
  return {
    sign(id, timestampSeconds, body) {
      const timestamp = String(Math.floor(timestampSeconds));
      // The signed content is `id.timestamp.body`, fed in parts: no copy of a large body per secret.
      const prefix = `${id}.${timestamp}.`;
      const signatures = keys.map(
        (key) => `v1,${createHmac('sha256', key).update(prefix).update(body).digest('base64')}`,
      );
      return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signatures.join(' ') };
    },
  };
}
