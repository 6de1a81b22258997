import {
  authorizationCredentials,
  checkCommon,
  secretVerifier,
  utf8,
  verifyCredential,
} from './primitives.ts';
import type { AuthScheme } from './types.ts';

const SCHEME = /^bearer[ \t]+(\S+)[ \t]*$/i;

/** Bearer token: `Authorization: Bearer <token>` equal to one of the secrets. */
export const verifyBearer = secretVerifier((_body, headers, secrets) => {
  const token = authorizationCredentials(headers, SCHEME, 'a bearer token');
  if (typeof token !== 'string') return token;
  return verifyCredential(utf8(token), secrets, 'The bearer token is not valid');
});

/** Bearer token; no natural idempotency key or event type. */
export const bearerScheme: AuthScheme = {
  name: 'bearer',
  verify: verifyBearer,
  defaults: {},
  credentialHeaders: () => ['authorization'],
  check: checkCommon,
};
