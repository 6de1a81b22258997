/**
 * The defaults of the configuration keys that more than one package applies: the config schema fills them in
 * (packages/config), and the packages that take options without the config package (inbox, outbox, client) fall
 * back to the same values here, so the two can never drift. Everything else defaults in the config schema alone.
 */
export const CONFIG_DEFAULTS = {
  outbox: {
    /** Local poll interval when idle, in ms. */
    pollIntervalMs: 100,
    /** Rows per claim. */
    batchSize: 200,
    /** Lease of a claim, in ms. */
    claimTimeoutMs: 300_000,
    /** Attempts before a row goes dead, for rows that set none. */
    maxAttempts: 10,
    /** Retry delay: min(maxMs, baseMs × 2^(attempt−1)) with jitter. */
    backoff: { baseMs: 1000, maxMs: 600_000 },
    /** Largest payload the poller delivers, in bytes of its JSON text (64 MiB); a larger left-out one is never read. */
    maxPayloadBytes: 67_108_864,
    /** Bytes of left-out (large) payloads the poller reads and holds at once (16 MiB). */
    largePayloadBudgetBytes: 16_777_216,
  },
  inbox: {
    /** Path prefix of the HTTP sources: POST {basePath}/{path}. */
    basePath: '/inbox',
    /** Largest accepted body, in bytes (1 MiB). */
    maxBodyBytes: 1_048_576,
    relay: {
      enabled: true,
      /** Local poll interval when idle, in ms. */
      pollIntervalMs: 100,
      /** Rows per claim. */
      batchSize: 100,
      /** Lease of a relay claim, in ms. */
      claimTimeoutMs: 300_000,
    },
  },
  source: {
    mode: 'push',
    /** Largest accepted age of a signed timestamp, in seconds (schemes with a timestamp). */
    toleranceSec: 300,
    /** The correlation-id header of a source that configures neither a correlation path nor a header. */
    correlationIdHeader: 'X-Correlation-Id',
    /** The idempotency-key header of a source whose scheme has no natural key and that configures none. */
    idempotencyKeyHeader: 'Idempotency-Key',
    /** The event-type header of `eventTypeFromHeader: true` when the scheme names none. */
    eventTypeHeader: 'X-Event-Type',
    /**
     * Broker sources: a message whose ingestion keeps failing for another reason than a database outage becomes a
     * dead row once it has failed this many times in one process…
     */
    deadAfterFailures: 10,
    /** …and its first failure is at least this old, in ms. */
    deadAfterMs: 300_000,
  },
} as const;
