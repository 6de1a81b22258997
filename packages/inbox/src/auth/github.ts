import { checkCommon, secretVerifier, verifyBodySignature } from './primitives.ts';
import type { AuthScheme } from './types.ts';

const LABEL = 'X-Hub-Signature-256';

/**
 * GitHub: `X-Hub-Signature-256: sha256=<hex>`, the HMAC-SHA256 of the raw body keyed with the webhook secret.
 * GitHub signs only the body: no timestamp, and neither `X-GitHub-Delivery` (the natural key) nor `X-GitHub-Event`
 * (the event type). A captured delivery re-sent with a new delivery id is therefore a new message, on whatever event
 * the sender names; only a source with `idempotencyKey: { bodyHash: true }` takes it as a duplicate. The legacy
 * SHA-1 `X-Hub-Signature` is not accepted.
 */
export const verifyGithub = secretVerifier((body, headers, secrets) =>
  verifyBodySignature(body, headers, secrets, { label: LABEL, prefix: 'sha256=', encoding: 'hex' }),
);

/** GitHub: idempotency key `X-GitHub-Delivery`, event type `X-GitHub-Event`. */
export const githubScheme: AuthScheme = {
  name: 'github',
  verify: verifyGithub,
  defaults: { idempotencyKey: [{ header: 'X-GitHub-Delivery' }], eventType: { header: 'X-GitHub-Event' } },
  credentialHeaders: () => [LABEL.toLowerCase(), 'x-hub-signature'],
  check: checkCommon,
};
