import type { AuthOptions } from '../options.ts';
import { anyEqual, checkCommon, fail, missing, NO_SECRET, OK, secretsOf, utf8 } from './primitives.ts';
import type { AuthResult, AuthScheme } from './types.ts';

const SCHEME = /^basic[ \t]+([A-Za-z0-9+/]+={0,2})[ \t]*$/i;

/** Basic auth: `Authorization: Basic base64(user:password)`, where `user:password` equals one of the secrets. */
export function verifyBasic(
  _body: Uint8Array,
  headers: Readonly<Record<string, string>>,
  options: AuthOptions,
): AuthResult {
  const secrets = secretsOf(options);
  if (secrets.length === 0) return NO_SECRET;
  const value = headers.authorization;
  if (value === undefined || value.trim() === '') return missing('Authorization');
  const encoded = SCHEME.exec(value.trim())?.[1];
  if (encoded === undefined)
    return fail('malformed_header', 'The Authorization header is not basic credentials');
  return anyEqual([Buffer.from(encoded, 'base64')], secrets.map(utf8))
    ? OK
    : fail('credentials_mismatch', 'The user name or password is not valid');
}

/** Basic auth; each secret is `user:password`. No natural idempotency key or event type. */
export const basicScheme: AuthScheme = {
  name: 'basic',
  verify: verifyBasic,
  defaults: {},
  credentialHeaders: () => ['authorization'],
  check: (options) => {
    const issues = checkCommon(options);
    if (options.secrets.some((s) => s.length > 0 && !s.includes(':'))) {
      issues.push('auth.secrets of basic must be user:password pairs');
    }
    return issues;
  },
};
