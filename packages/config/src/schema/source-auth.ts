import { CONFIG_DEFAULTS } from '@queuebox/core';
import * as z from 'zod';
import {
  headerName,
  int,
  isUnresolvedReference,
  standardWebhooksSecrets,
  stringList,
  text,
} from './fields.ts';

// `sources.<name>.auth`: the authentication schemes of HTTP sources.

/** What a bearer token cannot hold: the inbox reads `Bearer (\S+)`, so whitespace (or a control character) never matches. */
const BEARER_UNMATCHABLE = /[\s\p{Cc}]/u;

const secrets = () =>
  stringList().describe(
    'Active secrets; several for rotation (any one verifies). Usually secret:// references.',
  );

const toleranceSec = () =>
  int(1, 86_400)
    .default(CONFIG_DEFAULTS.source.toleranceSec)
    .describe(
      `Largest accepted age of the signed timestamp, in seconds. Default ${CONFIG_DEFAULTS.source.toleranceSec}; at most 86400 (24 h).`,
    );

export const authSchema = z.discriminatedUnion('scheme', [
  z.strictObject({
    scheme: z.literal('hmac'),
    secrets: secrets(),
    algorithm: z.enum(['sha256', 'sha512']).default('sha256').describe('HMAC hash. Default sha256.'),
    header: headerName().describe('Header carrying the signature, e.g. X-Signature.'),
    encoding: z.enum(['hex', 'base64']).default('hex').describe('Signature encoding. Default hex.'),
    prefix: z.string().optional().describe('Text before the signature in the header, e.g. "sha256=".'),
  }),
  z.strictObject({ scheme: z.literal('stripe'), secrets: secrets(), toleranceSec: toleranceSec() }),
  z.strictObject({ scheme: z.literal('github'), secrets: secrets() }),
  z.strictObject({
    scheme: z.literal('standard-webhooks'),
    secrets: standardWebhooksSecrets(
      'Active whsec_<base64> secrets (at least 24 bytes each); several for rotation. Usually secret:// references.',
    ),
    toleranceSec: toleranceSec(),
  }),
  z.strictObject({
    scheme: z.literal('svix'),
    secrets: standardWebhooksSecrets(
      'Svix signing secrets (whsec_…): svix is standard-webhooks under another name.',
    ),
    toleranceSec: toleranceSec(),
  }),
  z.strictObject({ scheme: z.literal('shopify'), secrets: secrets() }),
  z.strictObject({ scheme: z.literal('slack'), secrets: secrets(), toleranceSec: toleranceSec() }),
  z.strictObject({
    scheme: z.literal('bearer'),
    secrets: z
      .array(
        text().superRefine((v, ctx) => {
          // Never echo the value: it is a credential. A reference is checked once resolved.
          if (isUnresolvedReference(v) || !BEARER_UNMATCHABLE.test(v)) return;
          ctx.addIssue({
            code: 'custom',
            message:
              'must not contain spaces or control characters: "Authorization: Bearer <token>" carries one word, so this token could never match',
          });
        }),
      )
      .min(1)
      .describe('Accepted bearer tokens (one word each: no spaces or control characters).'),
  }),
  z.strictObject({
    scheme: z.literal('basic'),
    secrets: z
      .array(
        z.string().superRefine((v, ctx) => {
          // Never echo the value: it is a credential.
          if (v.indexOf(':') < 1)
            ctx.addIssue({ code: 'custom', message: 'must have the form user:password' });
        }),
      )
      .min(1)
      .describe('Accepted credentials, each "user:password"; several for rotation.'),
  }),
  z.strictObject({ scheme: z.literal('none') }),
]);

/** Source authentication schemes. */
export const AUTH_SCHEMES = [
  'hmac',
  'stripe',
  'github',
  'standard-webhooks',
  'svix',
  'shopify',
  'slack',
  'bearer',
  'basic',
  'none',
] as const;

/** Schemes whose provider names the event type itself (Stripe `$.type`, GitHub `X-GitHub-Event`, …). */
export const SCHEMES_WITH_EVENT_TYPE: ReadonlySet<string> = new Set([
  'stripe',
  'github',
  'standard-webhooks',
  'svix',
  'shopify',
  'slack',
]);
