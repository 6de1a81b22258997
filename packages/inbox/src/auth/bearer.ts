import type { AuthOptions } from '../options.ts';
import { anyEqual, checkCommon, fail, missing, NO_SECRET, OK, secretsOf, utf8 } from './primitives.ts';
import type { AuthResult, AuthScheme } from './types.ts';

const SCHEME = /^bearer[ \t]+(\S+)[ \t]*$/i;

/** Bearer token: `Authorization: Bearer <token>` equal to one of the secrets. */
export function verifyBearer(
  _body: Uint8Array,
  headers: Readonly<Record<string, string>>,
  options: AuthOptions,
): AuthResult {
  const secrets = secretsOf(options);
  if (secrets.length === 0) return NO_SECRET;
  const value = headers.authorization;
  if (value === undefined || value.trim() === '') return missing('Authorization');
  const token = SCHEME.exec(value.trim())?.[1];
  if (token === undefined) return fail('malformed_header', 'The Authorization header is not a bearer token');
  return anyEqual([utf8(token)], secrets.map(utf8))
    ? OK
    : fail('credentials_mismatch', 'The bearer token is not valid');
}

/** Bearer token; no natural idempotency key or event type. */
export const bearerScheme: AuthScheme = {
  name: 'bearer',
  verify: verifyBearer,
  defaults: {},
  credentialHeaders: () => ['authorization'],
  check: checkCommon,
};
