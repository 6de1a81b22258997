import type { AuthOptions } from '../options.ts';
import { basicScheme } from './basic.ts';
import { bearerScheme } from './bearer.ts';
import { githubScheme } from './github.ts';
import { hmacScheme } from './hmac.ts';
import { shopifyScheme } from './shopify.ts';
import { slackScheme } from './slack.ts';
import { standardWebhooksScheme } from './standard-webhooks.ts';
import { stripeScheme } from './stripe.ts';
import type { AuthScheme } from './types.ts';

export { verifyBasic } from './basic.ts';
export { verifyBearer } from './bearer.ts';
export { verifyGithub } from './github.ts';
export { verifyHmac } from './hmac.ts';
export { safeEqual } from './primitives.ts';
export { verifyShopify } from './shopify.ts';
export { verifySlack } from './slack.ts';
export { standardWebhooksKey, verifyStandardWebhooks } from './standard-webhooks.ts';
export { verifyStripe } from './stripe.ts';
export type { AuthFailureReason, AuthResult, AuthScheme, SchemeDefaults, Verifier } from './types.ts';

/** Every scheme by the name `sources.<name>.auth.scheme` uses; `svix` is `standard-webhooks`. */
export const AUTH_SCHEMES: Readonly<Record<AuthOptions['scheme'], AuthScheme>> = {
  hmac: hmacScheme,
  stripe: stripeScheme,
  github: githubScheme,
  'standard-webhooks': standardWebhooksScheme,
  svix: standardWebhooksScheme,
  shopify: shopifyScheme,
  slack: slackScheme,
  bearer: bearerScheme,
  basic: basicScheme,
};

/** The scheme named by `options.scheme`, or undefined for an unknown name. */
export function authSchemeOf(options: AuthOptions): AuthScheme | undefined {
  return Object.hasOwn(AUTH_SCHEMES, options.scheme) ? AUTH_SCHEMES[options.scheme] : undefined;
}
