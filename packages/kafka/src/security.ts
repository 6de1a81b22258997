import type { ConfigIssue } from '@queuebox/core';
import { ConfigError } from '@queuebox/core';
import type { KafkaConfig, SASLOptions } from 'kafkajs';

/** `ssl` of a Kafka destination or source, as configured: PEM texts (references are resolved at load). */
export interface KafkaSslOptions {
  /** CA certificate(s), PEM, the brokers' certificates are checked against. Default: the system's CAs. */
  readonly ca?: string | undefined;
  /** Client certificate, PEM, for mutual TLS; with `key`. Default none. */
  readonly cert?: string | undefined;
  /** The client certificate's private key, PEM. Default none. */
  readonly key?: string | undefined;
  /** Check the brokers' certificates. Default true. */
  readonly rejectUnauthorized?: boolean | undefined;
}

/**
 * `sasl` of a Kafka destination or source, as configured: a user and password (PLAIN, SCRAM), or `aws`, MSK IAM
 * (SASL/OAUTHBEARER with a token signed by the AWS credentials of the process).
 */
export type KafkaSaslOptions =
  | {
      readonly mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512';
      readonly username: string;
      readonly password: string;
    }
  | {
      readonly mechanism: 'aws';
      /** Region the token is signed for. Default: the one in MSK broker names, else `AWS_REGION`. */
      readonly region?: string | undefined;
    };

/** The connection security of a Kafka client: TLS and SASL. Both absent: plaintext, no authentication. */
export interface KafkaSecurityOptions {
  /** TLS: `true` (the system's CAs) or its settings. Default none. */
  readonly ssl?: boolean | KafkaSslOptions | undefined;
  /** SASL authentication. Default none. */
  readonly sasl?: KafkaSaslOptions | undefined;
}

/** The MSK IAM token of `aws-msk-iam-sasl-signer-js`: the signed token and when it expires (ms since the epoch). */
export interface MskIamToken {
  readonly token: string;
  readonly expiryTime: number;
}

/** Signs an MSK IAM token for a region (`generateAuthToken` of `aws-msk-iam-sasl-signer-js`). */
export type MskIamSigner = (options: { readonly region: string }) => Promise<MskIamToken>;

/** What {@link kafkaSecurity} needs besides the options; defaults for a real process. */
export interface KafkaSecurityDeps {
  /**
   * Signs MSK IAM tokens. Default: `generateAuthToken` of `aws-msk-iam-sasl-signer-js` (the AWS default credential
   * chain), imported on the first token, so a process without `mechanism: aws` never loads it or the AWS SDK.
   */
  readonly signer?: MskIamSigner;
  /** Environment for the region's fallback (`AWS_REGION`, `AWS_DEFAULT_REGION`). Default `process.env`. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** The clock, for the token cache. Default `Date.now`. */
  readonly now?: () => number;
}

/**
 * A token is signed anew once less than this remains of it (they last 15 minutes): a connection that authenticates
 * with it has time to finish, and a burst of connections (one per broker) signs once.
 */
const TOKEN_RENEW_BEFORE_MS = 60_000;

/** The region in an MSK broker name: `b-1.<cluster>.<id>.c2.kafka.<region>.amazonaws.com`, serverless too. */
const MSK_BROKER_REGION = /\.kafka(?:-serverless)?\.([a-z]{2}(?:-[a-z]+)+-\d)\.amazonaws\.com(?:\.cn)?:\d+$/;

/** The region an MSK IAM token is signed for: configured, else in the broker names, else the environment's. */
export function mskIamRegion(
  brokers: readonly string[],
  sasl: { readonly region?: string | undefined },
  env: Readonly<Record<string, string | undefined>> = process.env,
): string | undefined {
  if (sasl.region !== undefined) return sasl.region;
  for (const broker of brokers) {
    const found = MSK_BROKER_REGION.exec(broker)?.[1];
    if (found !== undefined) return found;
  }
  return env.AWS_REGION || env.AWS_DEFAULT_REGION || undefined;
}

const defaultSigner: MskIamSigner = async (options) => {
  const { generateAuthToken } = await import('aws-msk-iam-sasl-signer-js');
  return generateAuthToken({ region: options.region });
};

/**
 * kafkajs's `ssl` and `sasl` of these options. `aws` becomes `oauthbearer` with a token provider that signs through
 * `deps.signer` for the region ({@link mskIamRegion}) and reuses a token until a minute before it expires. Throws
 * `ConfigError` (path `sasl.region`) when `aws` has no region to sign for. Nothing here copies a password or key
 * into a message.
 */
export function kafkaSecurity(
  options: KafkaSecurityOptions & { readonly brokers: readonly string[] },
  deps: KafkaSecurityDeps = {},
): Pick<KafkaConfig, 'ssl' | 'sasl'> {
  const ssl = options.ssl;
  const sasl = options.sasl;
  const result: { ssl?: KafkaConfig['ssl']; sasl?: SASLOptions } = {};
  if (ssl === true) result.ssl = true;
  else if (typeof ssl === 'object') {
    result.ssl = {
      ...(ssl.ca === undefined ? {} : { ca: ssl.ca }),
      ...(ssl.cert === undefined ? {} : { cert: ssl.cert }),
      ...(ssl.key === undefined ? {} : { key: ssl.key }),
      ...(ssl.rejectUnauthorized === undefined ? {} : { rejectUnauthorized: ssl.rejectUnauthorized }),
    };
  }
  if (sasl === undefined) return result;
  if (sasl.mechanism !== 'aws') {
    result.sasl = {
      mechanism: sasl.mechanism,
      username: sasl.username,
      password: sasl.password,
    } as SASLOptions;
    return result;
  }
  const region = mskIamRegion(options.brokers, sasl, deps.env);
  if (region === undefined) {
    throw new ConfigError([
      {
        path: 'sasl.region',
        message:
          'is needed for mechanism aws: the brokers are not MSK names (…kafka.<region>.amazonaws.com) and AWS_REGION is not set',
      },
    ]);
  }
  const signer = deps.signer ?? defaultSigner;
  const now = deps.now ?? Date.now;
  // The signing in progress or done (dropped when it fails, so the next call signs again), and its token once
  // signed. Decided before any await: the callers of a burst (one connection per broker) share one signing; each
  // signed its own when every caller awaited the cache before looking at it (an outside security review).
  let cached: Promise<MskIamToken> | undefined;
  let signed: MskIamToken | undefined;
  result.sasl = {
    mechanism: 'oauthbearer',
    oauthBearerProvider: async () => {
      if (
        cached === undefined ||
        (signed !== undefined && signed.expiryTime - now() < TOKEN_RENEW_BEFORE_MS)
      ) {
        const signing = signer({ region });
        cached = signing;
        signed = undefined;
        signing.then(
          (token) => {
            if (cached === signing) signed = token;
          },
          () => {
            if (cached === signing) cached = undefined;
          },
        );
      }
      return { value: (await cached).token };
    },
  };
  return result;
}

/**
 * The problems of `ssl` and `sasl` in fields that did not come through the configuration schema (a publisher
 * factory's caller): their shape only, never their values. `prefix`: the fields' path, e.g. `destinations.orders`.
 */
export function kafkaSecurityIssues(
  fields: Readonly<Record<string, unknown>>,
  prefix: string,
): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const { ssl, sasl } = fields;
  if (ssl !== undefined && typeof ssl !== 'boolean' && (typeof ssl !== 'object' || ssl === null)) {
    issues.push({
      path: `${prefix}.ssl`,
      message: 'must be true, false or { ca, cert, key, rejectUnauthorized }',
    });
  }
  if (sasl !== undefined) {
    const s = (typeof sasl === 'object' && sasl !== null ? sasl : {}) as Readonly<Record<string, unknown>>;
    const userPassword =
      (s.mechanism === 'plain' || s.mechanism === 'scram-sha-256' || s.mechanism === 'scram-sha-512') &&
      typeof s.username === 'string' &&
      typeof s.password === 'string';
    if (!userPassword && s.mechanism !== 'aws') {
      issues.push({
        path: `${prefix}.sasl`,
        message:
          'must be { mechanism: plain | scram-sha-256 | scram-sha-512, username, password } or { mechanism: aws }',
      });
    }
  }
  return issues;
}
