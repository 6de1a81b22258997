import { CONFIG_DEFAULTS } from '@queuebox/core';

/**
 * The slices of the QueueBox configuration this package reads. Field names follow docs/design.md §8 and the seed, so
 * the validated configuration can be passed in as it is; secrets arrive already resolved. The defaults it applies
 * are core's CONFIG_DEFAULTS, the ones the config schema fills in.
 */

/** Names of the source authentication schemes. `svix` is another name for `standard-webhooks`. */
export type AuthSchemeName =
  | 'hmac'
  | 'stripe'
  | 'github'
  | 'standard-webhooks'
  | 'svix'
  | 'shopify'
  | 'slack'
  | 'bearer'
  | 'basic';

/** `sources.<name>.auth`. */
export interface AuthOptions {
  readonly scheme: AuthSchemeName;
  /**
   * Every secret that is active at once (rotation): the request passes when any of them verifies it.
   * For `bearer` each entry is a token; for `basic` each entry is `user:password`; for `standard-webhooks` each is
   * a `whsec_<base64>` secret (the prefix is optional); for the others each is the raw signing secret.
   */
  readonly secrets: readonly string[];
  /** Largest allowed distance between the signed timestamp and now, either way. Default 300 (schemes with a timestamp). */
  readonly toleranceSec?: number;
  /** `hmac` only: digest algorithm. Default `sha256`. */
  readonly algorithm?: 'sha256' | 'sha512';
  /** `hmac` only (required there): the header that carries the signature. */
  readonly header?: string;
  /** `hmac` only: encoding of the signature. Default `hex`. */
  readonly encoding?: 'hex' | 'base64';
  /** `hmac` only: text before the signature in the header, e.g. `sha256=`. Default none. */
  readonly prefix?: string;
}

/** Where a value comes from: a JSON path into the payload, or a request header. */
export type FieldLocation = { readonly path: string } | { readonly header: string };

/**
 * Where a source finds its idempotency key: a FieldLocation, or `{ bodyHash: true }`: `sha256:` + the hex SHA-256 of
 * the raw body, the bytes an untimed scheme (GitHub, Shopify, hmac) signs, so a captured delivery re-sent with new
 * unsigned headers is a duplicate. Two deliveries with identical bytes are then one message.
 */
export type KeyLocation = FieldLocation | { readonly bodyHash: true };

/** `sources.<name>.transform`: a JSONata expression, or the name of a function registered in code. */
export type TransformOptions = { readonly jsonata: string } | { readonly function: string };

/** `sources.<name>`. */
export interface SourceOptions {
  /** `http` sources answer at `{inbox.basePath}/{path}`; the others are broker consumers. */
  readonly type: 'http' | 'amqp' | 'kafka' | 'nats' | 'sqs';
  /** `push`: the relay forwards rows into the outbox; `pull`: the application's worker claims them. Default `push`. */
  readonly mode?: 'push' | 'pull';
  /** Path segment under `inbox.basePath`. Default the source's name. */
  readonly path?: string;
  /** Authentication of an HTTP source. Default none (every request is accepted). */
  readonly auth?: AuthOptions;
  /** Default: the scheme's natural key (see each scheme), else the `Idempotency-Key` header. */
  readonly idempotencyKey?: KeyLocation;
  /**
   * The received headers to store (names in any case); the others are dropped. Credentials, signatures, proxy,
   * hop-by-hop and request-bound headers (digests, ranges, conditions: `UNSTORED_HEADERS`) are never stored, listed
   * or not. Default: every header but those.
   */
  readonly keepHeaders?: readonly string[];
  /** JSON path of the event type. */
  readonly eventTypePath?: string;
  /**
   * Take the event type from a header: a header name, or `true` for the scheme's event header
   * (e.g. `X-GitHub-Event`), else `X-Event-Type`. Default: the scheme's natural event type, if any.
   */
  readonly eventTypeFromHeader?: boolean | string;
  readonly aggregateIdPath?: string;
  readonly aggregateIdHeader?: string;
  readonly correlationIdPath?: string;
  /** Default `X-Correlation-Id` (used when `correlationIdPath` is not set). */
  readonly correlationIdHeader?: string;
  /** Outbox topic template with `{{ source }}` and `{{ eventType }}`. Default `{{ eventType }}` (http), `{{ source }}` (others). */
  readonly topic?: string;
  readonly transform?: TransformOptions;
  /** Time this source's transform may take before it is a rejection. Default `inbox.transformTimeoutMs`. */
  readonly transformTimeoutMs?: number;
  /** max_attempts of the stored inbox rows. Default `inbox.relay.maxAttempts`, then `outbox.maxAttempts`, then 10. */
  readonly maxAttempts?: number;
  /**
   * Broker sources: a message whose ingestion fails for another reason than a database outage becomes a dead row
   * once it has failed this many times in one process and its first failure is `deadAfterMs` old. Default 10.
   */
  readonly deadAfterFailures?: number;
  /** See `deadAfterFailures`. Default 300000 (5 minutes). */
  readonly deadAfterMs?: number;
}

/** `inbox.relay`. */
export interface RelayOptions {
  /** Default true. */
  readonly enabled?: boolean;
  /** Rows claimed per batch. Default 100. */
  readonly batchSize?: number;
  /** Lease of a relay claim in milliseconds. Default 300000. */
  readonly claimTimeoutMs?: number;
  /** max_attempts of the outbox rows the relay writes. Default `outbox.maxAttempts`. */
  readonly maxAttempts?: number;
}

/** `inbox`. */
export interface InboxOptions {
  /** Default `/inbox`. */
  readonly basePath?: string;
  /**
   * Largest body, in bytes. Default 1048576 (1 MiB). A transform's result may not be larger as JSON either (nor than
   * the message it received, when that is larger: a broker message).
   */
  readonly maxBodyBytes?: number;
  /**
   * Time one run of a source transform may take before it is a rejection (422, or a dead row for a broker source).
   * Default {@link DEFAULT_INBOX_TRANSFORM_TIMEOUT_MS} (1000 ms, as the outbox's).
   */
  readonly transformTimeoutMs?: number;
  readonly relay?: RelayOptions;
}

/** Default `inbox.transformTimeoutMs`: 1000 ms, the outbox's default too. */
export const DEFAULT_INBOX_TRANSFORM_TIMEOUT_MS = 1000;

/** `outbox` (only what the inbox needs). */
export interface OutboxOptions {
  /** Default 10. */
  readonly maxAttempts?: number;
}

/** `sources`: every configured source by name. */
export type Sources = Readonly<Record<string, SourceOptions>>;

/** The mode of a source, with its default. */
export function sourceMode(source: SourceOptions): 'push' | 'pull' {
  return source.mode ?? CONFIG_DEFAULTS.source.mode;
}

/** max_attempts of the inbox rows a source stores: source, then `inbox.relay`, then `outbox`, then 10. */
export function inboxMaxAttempts(
  source: SourceOptions,
  inbox: InboxOptions | undefined,
  outbox: OutboxOptions | undefined,
): number {
  return (
    source.maxAttempts ??
    inbox?.relay?.maxAttempts ??
    outbox?.maxAttempts ??
    CONFIG_DEFAULTS.outbox.maxAttempts
  );
}
