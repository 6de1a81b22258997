/**
 * The option shapes this package reads. Field names follow docs/design.md §8 exactly, so the validated configuration
 * (packages/config) can be passed straight in; this package does not import the config package. Secret
 * references are resolved before options reach it.
 */

/** Exponential backoff: delay = min(maxMs, baseMs × 2^(attempt−1)), with jitter (see backoff.ts). */
export interface BackoffOptions {
  /** Delay before the first retry, before jitter. Outbox default 1000 ms. */
  readonly baseMs: number;
  /** Cap on any delay, a `Retry-After` included. Outbox default 600000 ms. */
  readonly maxMs: number;
}

/** A transform: a JSONata expression from config, or the name of a function registered in code. */
export type TransformSpec = { readonly jsonata: string } | { readonly function: string };

/** Standard Webhooks signing of outgoing HTTP requests. */
export interface SigningOptions {
  readonly scheme: 'standard-webhooks';
  /**
   * Secrets, each `whsec_<base64>` (the prefix is optional). Every secret signs; several secrets give several
   * space-separated signatures, so a receiver can rotate keys.
   */
  readonly secrets: readonly string[];
}

/** Default time for one HTTP request: within the 15–30 s Standard Webhooks recommends to senders. */
export const DEFAULT_HTTP_TIMEOUT_MS = 15_000;

/**
 * One configured destination (`destinations.<name>`). Only `type: http` is published by this package; broker types
 * carry their own fields, which are ignored here.
 */
export interface DestinationOptions {
  /** `http`, or a broker type (`rabbitmq`, `kafka`, `nats`) that another package publishes. */
  readonly type: string;
  /** HTTP: the URL requests go to. */
  readonly url?: string;
  /** HTTP: the request method. Default `POST`. */
  readonly method?: string;
  /** HTTP: static headers sent with every request; they replace a row header of the same name. */
  readonly headers?: Readonly<Record<string, string>>;
  /** HTTP: time allowed for one request, response headers and the read error body included. Default 15000 ms. */
  readonly timeoutMs?: number;
  /** HTTP: optional Standard Webhooks signing. */
  readonly signing?: SigningOptions;
  /** Most requests in flight to this destination at once. Default 16. */
  readonly maxConcurrency?: number;
  /** HTTP: response-body bytes kept in an error text (`last_error`, logs); 0 keeps none. Default 256. */
  readonly maxErrorBodyBytes?: number;
  /** Lowers the rows' max_attempts for this destination (a row's own max_attempts always applies). */
  readonly maxAttempts?: number;
  /** Overrides `outbox.backoff` for this destination, field by field. */
  readonly backoff?: Partial<BackoffOptions>;
  /** Runs after the route's transform. */
  readonly transform?: TransformSpec;
}

/** One entry of `routes`: the first whose pattern matches the topic names the destination. */
export interface RouteOptions {
  /** Dot-separated topic pattern; `*` is exactly one segment, `#` zero or more. */
  readonly match: string;
  /** The name of a key of `destinations`. */
  readonly destination: string;
  /** Runs before the destination's transform. */
  readonly transform?: TransformSpec;
}

/** The `outbox` section. */
export interface OutboxOptions {
  /** Most rows per claim. Default 100. */
  readonly batchSize: number;
  /** Lease of a claim, in milliseconds. Default 300000. */
  readonly claimTimeoutMs: number;
  /**
   * Default max_attempts of new rows (used where rows are inserted). The poller obeys each row's own max_attempts
   * and a destination's lower `maxAttempts`.
   */
  readonly maxAttempts: number;
  /** Backoff of every destination without its own. Default `{ baseMs: 1000, maxMs: 600000 }`. */
  readonly backoff: BackoffOptions;
  /**
   * Largest payload delivered, in bytes of its JSON text (`outbox.maxPayloadBytes`). A claim leaves a large payload
   * out of its answer (the PostgreSQL store over `pg` or PGlite: over 64 KiB, `DEFERRED_PAYLOAD_BYTES`) and the
   * poller reads it just before its delivery; one over this is never read: its delivery fails with an error naming
   * its size and the limit, retried as any failure (so it ends dead when no attempt is left) rather than read into a
   * process it could kill (SQL Server leaves out a payload over twice as many bytes of UTF-16 and reports its length
   * in characters). A store that answers every payload with its claim (the RDS Data API) is not limited by it. Default 64 MiB (`DEFAULT_MAX_PAYLOAD_BYTES`).
   */
  readonly maxPayloadBytes?: number;
  /**
   * Bytes of left-out (large) payloads read and held at once, across the batches in flight
   * (`outbox.largePayloadBudgetBytes`); one such payload is always let through, however large. Default 16 MiB
   * (`DEFAULT_LARGE_PAYLOAD_BUDGET_BYTES`).
   */
  readonly largePayloadBudgetBytes?: number;
  /** Pause of the local loop between drains that found no work. Default 100 ms. */
  readonly pollIntervalMs?: number;
}
