import { CONFIG_DEFAULTS } from '@queuebox/core';
import * as z from 'zod';
import { headerName, int, isUnresolvedReference, standardWebhooksSecrets, text } from './fields.ts';

// `sources.<name>.auth`: the authentication schemes of HTTP sources.

/** What a bearer token cannot hold: the inbox reads `Bearer (\S+)`, so whitespace (or a control character) never matches. */
const BEARER_UNMATCHABLE = /[\s\p{Cc}]/u;

/**
 * Why a signing secret or credential as resolved (from the file, a `QUEUEBOX_` variable, `env://` or `secret://`)
 * could never verify a genuine request, or undefined. A secret read from a file, or stored by
 * `aws secretsmanager create-secret --secret-string file://…`, usually ends in a line break: used as the HMAC key
 * with it, every signature of the sender would mismatch (401). Never names the value, its length or a position: it
 * is a credential. A reference is checked once resolved.
 */
export function secretTextProblem(value: string): string | undefined {
  if (isUnresolvedReference(value)) return undefined;
  const control = /\p{Cc}/u.exec(value);
  const edge = /^\s|\s$/u.test(value);
  if (control === null && !edge) return undefined;
  const lineBreak = /[\r\n]/.test(value);
  const what = control === null ? 'begins or ends with white space' : 'holds a control character';
  const code =
    control === null
      ? ''
      : ` (U+${(control[0].codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')})`;
  return `${what}${code}: the secret is used as it is, so no genuine request could be verified${lineBreak ? ' (a secret stored with a trailing line break?)' : ''}; remove it from the value, or from the variable or secret it is read from`;
}

const secretText = () =>
  text().superRefine((v, ctx) => {
    const problem = secretTextProblem(v);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
  });

const secrets = () =>
  z
    .array(secretText())
    .min(1)
    .describe('Active secrets; several for rotation (any one verifies). Usually secret:// references.');

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
            message: `must not contain spaces or control characters: "Authorization: Bearer <token>" carries one word, so this token could never match${/[\r\n]/.test(v) ? ' (a secret stored with a trailing line break?)' : ''}`,
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
          // Never echo the value: it is a credential. A reference is checked once resolved.
          if (isUnresolvedReference(v)) return;
          if (v.indexOf(':') < 1)
            ctx.addIssue({ code: 'custom', message: 'must have the form user:password' });
          const problem = secretTextProblem(v);
          if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
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
