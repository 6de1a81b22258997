import * as z from 'zod';
import { isUnresolvedReference, text } from './fields.ts';

// `ssl` and `sasl` of Kafka destinations and sources: how a cluster that needs TLS or SASL is reached (MSK with
// IAM, SCRAM or TLS; MSK Serverless, IAM over TLS only; Confluent Cloud, SASL_SSL with PLAIN).

const AWS_REGION = /^[a-z]{2}(-[a-z]+)+-\d$/;

/**
 * A PEM text (`ca`, `cert`, `key`): its own value, or a `secret://` / `env://` reference resolved at load like any
 * other credential. The problem never quotes the value: a private key is a credential, and a certificate pasted
 * in the wrong place may be one.
 */
const pem = (what: 'certificate' | 'private key', describe: string) =>
  text()
    .superRefine((value, ctx) => {
      if (isUnresolvedReference(value)) return;
      const found =
        what === 'certificate'
          ? /-----BEGIN CERTIFICATE-----/.test(value)
          : /-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----/.test(value);
      if (!found) {
        ctx.addIssue({
          code: 'custom',
          message: `must be PEM text (-----BEGIN ${what === 'certificate' ? 'CERTIFICATE' : 'PRIVATE KEY'}----- …), or a secret:// or env:// reference to it; a file path is not read`,
        });
      }
    })
    .describe(describe);

/** `ssl` as configured: `true` (TLS, the system's CAs), `false` or absent (no TLS), or the TLS settings. */
export type KafkaSslConfig =
  | boolean
  | {
      readonly ca?: string | undefined;
      readonly cert?: string | undefined;
      readonly key?: string | undefined;
      readonly rejectUnauthorized?: boolean | undefined;
    };

export const kafkaSslSchema = z
  .union(
    [
      z.boolean(),
      z
        .strictObject({
          ca: pem(
            'certificate',
            "CA certificate(s) the brokers' certificates are checked against, instead of the system's: PEM text, or a secret:// or env:// reference. Default: the system's CAs (enough for MSK and Confluent Cloud).",
          ).optional(),
          cert: pem(
            'certificate',
            'Client certificate for mutual TLS (MSK TLS client authentication), PEM; with key.',
          ).optional(),
          key: pem(
            'private key',
            "The client certificate's private key, PEM (unencrypted); with cert. Give it as a secret:// or env:// reference: a value read from a reference is never printed.",
          ).optional(),
          rejectUnauthorized: z
            .boolean()
            .optional()
            .describe(
              "Check the brokers' certificates. Default true; false accepts any certificate (a test cluster only: anyone on the path can read and change the traffic).",
            ),
        })
        .superRefine((s, ctx) => {
          if ((s.cert === undefined) !== (s.key === undefined)) {
            ctx.addIssue({
              code: 'custom',
              path: [s.cert === undefined ? 'cert' : 'key'],
              message: 'set both cert and key (mutual TLS), or neither',
            });
          }
        }),
    ],
    { error: 'must be true, false or { ca, cert, key, rejectUnauthorized }' },
  )
  .optional()
  .describe(
    "TLS to the brokers: true (the system's CAs), or { ca, cert, key, rejectUnauthorized }. Default none (plaintext). MSK's TLS and IAM listeners (9094, 9096, 9098), MSK Serverless and Confluent Cloud need it.",
  );

/** A SASL password: used as it is, so a line break left by a file or a secret would fail every login. */
const password = () =>
  text()
    .superRefine((value, ctx) => {
      if (isUnresolvedReference(value)) return;
      // Never names the value, its length or a position: it is a credential.
      if (/^\s|\s$|\p{Cc}/u.test(value)) {
        ctx.addIssue({
          code: 'custom',
          message:
            'begins or ends with white space or holds a control character: the password is used as it is, so the broker would refuse every login (a secret stored with a trailing line break?)',
        });
      }
    })
    .describe('Password; usually a secret:// or env:// reference. Never printed.');

/** SASL mechanisms of a Kafka destination or source. */
export const KAFKA_SASL_MECHANISMS = ['plain', 'scram-sha-256', 'scram-sha-512', 'aws'] as const;

/** `sasl` as configured. */
export type KafkaSaslConfig =
  | {
      readonly mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512';
      readonly username: string;
      readonly password: string;
    }
  | { readonly mechanism: 'aws'; readonly region?: string | undefined };

const userPassword = <const M extends string>(mechanism: M) =>
  z.strictObject({
    mechanism: z.literal(mechanism),
    username: text().describe('User name.'),
    password: password(),
  });

export const kafkaSaslSchema = z
  .discriminatedUnion('mechanism', [
    userPassword('plain'),
    userPassword('scram-sha-256'),
    userPassword('scram-sha-512'),
    z.strictObject({
      mechanism: z.literal('aws'),
      region: z
        .string()
        .regex(AWS_REGION, 'must be an AWS region such as eu-west-1')
        .optional()
        .describe(
          "Region the IAM token is signed for. Default: the one in the MSK broker names (b-1.<cluster>.kafka.<region>.amazonaws.com), else AWS_REGION. Credentials: the usual AWS chain (the function's role on Lambda).",
        ),
    }),
  ])
  .optional()
  .describe(
    'SASL: { mechanism: plain | scram-sha-256 | scram-sha-512, username, password } (MSK SCRAM: scram-sha-512; Confluent Cloud: plain, the API key and secret) or { mechanism: aws } (MSK IAM; needs ssl). Default none. Without ssl, plain sends the password readable on the wire (accepted, for a SASL_PLAINTEXT listener in a private network).',
  );

/** The `ssl` and `sasl` keys of a Kafka destination or source. */
export const kafkaSecurityFields = { ssl: kafkaSslSchema, sasl: kafkaSaslSchema };

/**
 * The checks across `ssl` and `sasl`: MSK IAM (`aws`) is offered only on TLS listeners, so without `ssl` every
 * connection would fail; that is an error. PLAIN (or SCRAM) without TLS is accepted: a self-managed cluster's
 * SASL_PLAINTEXT listener inside a private network is one; PLAIN then sends the password readable on the wire,
 * which the option's description says.
 */
export function checkKafkaSecurity(
  s: { readonly ssl?: KafkaSslConfig | undefined; readonly sasl?: KafkaSaslConfig | undefined },
  ctx: z.RefinementCtx,
): void {
  const tls = s.ssl !== undefined && s.ssl !== false;
  if (s.sasl?.mechanism === 'aws' && !tls) {
    ctx.addIssue({
      code: 'custom',
      path: ['ssl'],
      message:
        'must be set with sasl.mechanism aws: MSK offers IAM only over TLS (port 9098, MSK Serverless 9098); set ssl: true',
    });
  }
}
