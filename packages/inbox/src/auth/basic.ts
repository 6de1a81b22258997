import { authorizationCredentials, checkCommon, secretVerifier, verifyCredential } from './primitives.ts';
import type { AuthScheme } from './types.ts';

const SCHEME = /^basic[ \t]+([A-Za-z0-9+/]+={0,2})[ \t]*$/i;

/** Basic auth: `Authorization: Basic base64(user:password)`, where `user:password` equals one of the secrets. */
export const verifyBasic = secretVerifier((_body, headers, secrets) => {
  const encoded = authorizationCredentials(headers, SCHEME, 'basic credentials');
  if (typeof encoded !== 'string') return encoded;
  return verifyCredential(Buffer.from(encoded, 'base64'), secrets, 'The user name or password is not valid');
});

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
