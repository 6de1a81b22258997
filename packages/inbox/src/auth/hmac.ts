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

/**
 * Generic HMAC: `header` carries `prefix` + the HMAC (`algorithm`, default sha256) of the raw body, encoded as
 * `encoding` (default hex). Each secret is used as UTF-8 key bytes.
 */
export function verifyHmac(
  body: Uint8Array,
  headers: Readonly<Record<string, string>>,
  options: AuthOptions,
): AuthResult {
  const secrets = secretsOf(options);
  if (secrets.length === 0) return NO_SECRET;
  const name = (options.header ?? '').toLowerCase();
  if (name === '') return fail('no_secret', 'The source names no signature header');
  const value = headers[name]?.trim();
  if (value === undefined || value === '') return missing(options.header ?? name);
  const prefix = options.prefix ?? '';
  if (!value.startsWith(prefix))
    return fail('malformed_header', `The ${options.header} header lacks its prefix`);
  const signature = decodeSignature(value.slice(prefix.length), options.encoding ?? 'hex');
  if (signature === undefined)
    return fail('malformed_header', `The ${options.header} header is not a signature`);
  const algorithm = options.algorithm ?? 'sha256';
  const expected = secrets.map((s) => hmac(algorithm, utf8(s), body));
  return anyEqual([signature], expected)
    ? OK
    : fail('signature_mismatch', 'The signature does not match the body');
}

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
