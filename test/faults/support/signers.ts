/**
 * Signers of the hostile-input suite, written from the providers' documents rather than imported, and the sources
 * they sign for. Nothing here imports vitest.
 */
import { createHmac, randomBytes } from 'node:crypto';

export type Secrets = Record<string, string>;
export const hmacHex = (key: string | Buffer, ...parts: (string | Buffer)[]) => {
  const h = createHmac('sha256', key);
  for (const part of parts) h.update(part);
  return h.digest('hex');
};
export const hmacBase64 = (key: string | Buffer, ...parts: (string | Buffer)[]) => {
  const h = createHmac('sha256', key);
  for (const part of parts) h.update(part);
  return h.digest('base64');
};
export const nowSeconds = () => Math.floor(Date.now() / 1000);

/** The headers that authenticate `body` for `source` with `secret` (a wrong secret forges). */
export function credentials(
  source: string,
  body: Buffer,
  secret: string,
  at = nowSeconds(),
): Record<string, string> {
  switch (source) {
    case 'sw': {
      const id = `sw-${randomBytes(6).toString('hex')}`;
      const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
      return {
        'webhook-id': id,
        'webhook-timestamp': String(at),
        'webhook-signature': `v1,${hmacBase64(key, `${id}.${at}.`, body)}`,
      };
    }
    case 'hm':
      return { 'x-sig': hmacHex(secret, body) };
    case 'stripe':
      return { 'stripe-signature': `t=${at},v1=${hmacHex(secret, `${at}.`, body)}` };
    case 'github':
      return { 'x-hub-signature-256': `sha256=${hmacHex(secret, body)}` };
    case 'shopify':
      return { 'x-shopify-hmac-sha256': hmacBase64(secret, body) };
    case 'slack':
      return {
        'x-slack-request-timestamp': String(at),
        'x-slack-signature': `v0=${hmacHex(secret, `v0:${at}:`, body)}`,
      };
    case 'bearer':
      return { authorization: `Bearer ${secret}` };
    case 'basic':
      return { authorization: `Basic ${Buffer.from(secret).toString('base64')}` };
    default:
      throw new Error(`no signer for ${source}`);
  }
}

export const SOURCES = ['sw', 'hm', 'stripe', 'github', 'shopify', 'slack', 'bearer', 'basic'] as const;
export type Source = (typeof SOURCES)[number];
export const TIMED: ReadonlySet<Source> = new Set(['sw', 'stripe', 'slack']);
/** Header names any scheme reads, so garbage can be put in all of them at once. */
export const AUTH_HEADERS = [
  'webhook-id',
  'webhook-timestamp',
  'webhook-signature',
  'x-sig',
  'stripe-signature',
  'x-hub-signature-256',
  'x-shopify-hmac-sha256',
  'x-slack-request-timestamp',
  'x-slack-signature',
  'authorization',
];

export function sourcesYaml(secrets: Secrets): string {
  const common = `    eventTypePath: $.type
    aggregateIdPath: $.agg`;
  const keyed = `    idempotencyKey: { path: $.id }
${common}
    correlationIdPath: $.corr`;
  const source = (name: string, auth: string, fields = keyed) =>
    `  ${name}:\n    type: http\n    auth: ${auth}\n${fields}\n    topic: "${name}.{{ eventType }}"\n`;
  const s = (name: string) => JSON.stringify(secrets[name]);
  return [
    source('sw', `{ scheme: standard-webhooks, secrets: [${s('sw')}] }`, common),
    source('hm', `{ scheme: hmac, secrets: [${s('hm')}], header: X-Sig }`),
    source('stripe', `{ scheme: stripe, secrets: [${s('stripe')}] }`),
    source('github', `{ scheme: github, secrets: [${s('github')}] }`),
    source('shopify', `{ scheme: shopify, secrets: [${s('shopify')}] }`),
    source('slack', `{ scheme: slack, secrets: [${s('slack')}] }`),
    source(
      'bearer',
      `{ scheme: bearer, secrets: [${s('bearer')}] }`,
      `    idempotencyKey: { header: Idempotency-Key }
    eventTypePath: $.type
    aggregateIdHeader: X-Aggregate-Id`,
    ),
    source('basic', `{ scheme: basic, secrets: [${s('basic')}] }`),
  ].join('');
}
