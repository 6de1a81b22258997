/** The prefix of a Standard Webhooks secret as providers print it (`whsec_<base64>`); optional. */
export const STANDARD_WEBHOOKS_SECRET_PREFIX = 'whsec_';

/**
 * The shortest Standard Webhooks key, in bytes. The specification recommends keys of 24 to 64 bytes; a shorter
 * key (`whsec_A` decodes to none at all) lets anyone who guesses it sign.
 */
export const STANDARD_WEBHOOKS_MIN_KEY_BYTES = 24;

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** A decoded Standard Webhooks secret: the HMAC key bytes, or why the secret is unusable (never echoing it). */
export type StandardWebhooksKey =
  | { readonly ok: true; readonly key: Uint8Array }
  | { readonly ok: false; readonly problem: string };

/**
 * Decodes a Standard Webhooks secret, the one decoder of inbound sources and outbound signing: the base64 after the
 * optional `whsec_` prefix, at least {@link STANDARD_WEBHOOKS_MIN_KEY_BYTES} bytes once decoded.
 */
export function decodeStandardWebhooksSecret(secret: string): StandardWebhooksKey {
  const encoded = secret.startsWith(STANDARD_WEBHOOKS_SECRET_PREFIX)
    ? secret.slice(STANDARD_WEBHOOKS_SECRET_PREFIX.length)
    : secret;
  // atob would skip white space and accept a missing padding; the alphabet is checked first.
  if (!BASE64.test(encoded)) {
    return { ok: false, problem: 'a Standard Webhooks secret must be base64, optionally after "whsec_"' };
  }
  let binary: string;
  try {
    binary = atob(encoded);
  } catch {
    return { ok: false, problem: 'a Standard Webhooks secret must be base64, optionally after "whsec_"' };
  }
  if (binary.length < STANDARD_WEBHOOKS_MIN_KEY_BYTES) {
    return {
      ok: false,
      problem: `a Standard Webhooks secret must decode to at least ${STANDARD_WEBHOOKS_MIN_KEY_BYTES} bytes (this one has ${binary.length})`,
    };
  }
  return { ok: true, key: Uint8Array.from(binary, (c) => c.charCodeAt(0)) };
}
