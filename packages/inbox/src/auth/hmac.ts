import { checkCommon, fail, secretVerifier, verifyBodySignature } from './primitives.ts';
import type { AuthScheme } from './types.ts';

/**
 * Generic HMAC: `header` carries `prefix` + the HMAC (`algorithm`, default sha256) of the raw body, encoded as
 * `encoding` (default hex). Each secret is used as UTF-8 key bytes.
 */
export const verifyHmac = secretVerifier((body, headers, secrets, options) => {
  const label = options.header ?? '';
  if (label === '') return fail('no_secret', 'The source names no signature header');
  return verifyBodySignature(body, headers, secrets, {
    label,
    prefix: options.prefix,
    encoding: options.encoding ?? 'hex',
    algorithm: options.algorithm,
  });
});

/** The generic HMAC scheme. It has no natural idempotency key or event type. */
export const hmacScheme: AuthScheme = {
  name: 'hmac',
  verify: verifyHmac,
  defaults: {},
  credentialHeaders: (options) => (options.header ? [options.header.toLowerCase()] : []),
  check: (options) => {
    const issues = checkCommon(options);
    if (!options.header) issues.push('auth.header is required by the hmac scheme');
    if (options.algorithm !== undefined && !['sha256', 'sha512'].includes(options.algorithm)) {
      issues.push('auth.algorithm must be sha256 or sha512');
    }
    if (options.encoding !== undefined && !['hex', 'base64'].includes(options.encoding)) {
      issues.push('auth.encoding must be hex or base64');
    }
    return issues;
  },
};
