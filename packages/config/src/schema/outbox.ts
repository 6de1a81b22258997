import { CONFIG_DEFAULTS } from '@queuebox/core';
import * as z from 'zod';
import { backoffSchema, DAY_MS, int, MAX_ATTEMPTS } from './fields.ts';

// `outbox`: the outbox poller.

const DEFAULTS = CONFIG_DEFAULTS.outbox;

/**
 * Payloads larger than this (bytes of JSON text) the outbox poller has a PostgreSQL claim leave out and reads just
 * before their delivery: packages/outbox's `DEFERRED_PAYLOAD_BYTES` (64 KiB), repeated here because this package
 * imports only core (packages/local/test/config-drift.test.ts compares the two). `outbox.maxPayloadBytes` and
 * `outbox.largePayloadBudgetBytes` only ever count such payloads, so neither may be below it: a smaller
 * `maxPayloadBytes` would still let every payload up to 64 KiB through, which is not what it would say.
 */
export const OUTBOX_DEFERRED_PAYLOAD_BYTES = 65_536;

/**
 * The highest `outbox.maxPayloadBytes`: 256 MiB. PostgreSQL's jsonb holds at most 268,435,455 bytes
 * (JENTRY_OFFLENMASK), so no stored payload is meaningfully larger; it is also half of the longest string V8 can
 * make (2^29 − 24 characters), which the driver's text of a payload must be. (SQL Server answers every payload with
 * its claim: the key does not apply there.)
 */
export const OUTBOX_MAX_PAYLOAD_BYTES_LIMIT = 268_435_456;

/**
 * The highest `outbox.largePayloadBudgetBytes`: 1 GiB of JSON text held at once, which costs a few times that in
 * memory (the driver's text, the parsed value, the request body): more than Node's default heap, and most of the
 * largest Lambda (10,240 MB).
 */
export const OUTBOX_LARGE_PAYLOAD_BUDGET_LIMIT = 1_073_741_824;

export const outboxSchema = z.strictObject({
  pollIntervalMs: int(1, DAY_MS)
    .default(DEFAULTS.pollIntervalMs)
    .describe(
      `Local poll interval when idle, in ms. Default ${DEFAULTS.pollIntervalMs}; at most ${DAY_MS} (24 h).`,
    ),
  batchSize: int(1, 1000)
    .default(DEFAULTS.batchSize)
    .describe(
      `Rows per claim. Default ${DEFAULTS.batchSize}; at most 1000 (SQL Server allows ~2100 parameters per statement).`,
    ),
  claimTimeoutMs: int(1000, DAY_MS)
    .default(DEFAULTS.claimTimeoutMs)
    .describe(
      `Lease of a claim, in ms (never renewed); must exceed the outbox-tick function timeout and be at least the longest destination timeoutMs + 2000 (a batch ends with its lease). Default ${DEFAULTS.claimTimeoutMs}; at most ${DAY_MS} (24 h).`,
    ),
  maxAttempts: int(1, MAX_ATTEMPTS)
    .default(DEFAULTS.maxAttempts)
    .describe(
      `Attempts before a row goes dead, for rows that do not set one. Default ${DEFAULTS.maxAttempts}; at most ${MAX_ATTEMPTS}.`,
    ),
  backoff: backoffSchema
    .prefault({})
    .describe('Retry delay: min(maxMs, baseMs × 2^(attempt−1)) with jitter.'),
  maxPayloadBytes: int(OUTBOX_DEFERRED_PAYLOAD_BYTES, OUTBOX_MAX_PAYLOAD_BYTES_LIMIT)
    .default(DEFAULTS.maxPayloadBytes)
    .describe(
      `Largest payload delivered, in bytes of its JSON text. PostgreSQL (url or pglite) only: a claim leaves payloads over ${OUTBOX_DEFERRED_PAYLOAD_BYTES} bytes (64 KiB) out and the poller reads each just before its delivery; a larger one is never read: its delivery fails with "payload of N bytes is over the largest this poller delivers", retried and then dead. SQL Server and the RDS Data API answer every payload with its claim and ignore it. Default ${DEFAULTS.maxPayloadBytes} (64 MiB); at least ${OUTBOX_DEFERRED_PAYLOAD_BYTES}; at most ${OUTBOX_MAX_PAYLOAD_BYTES_LIMIT} (256 MiB, about the most a jsonb holds).`,
    ),
  largePayloadBudgetBytes: int(OUTBOX_DEFERRED_PAYLOAD_BYTES, OUTBOX_LARGE_PAYLOAD_BUDGET_LIMIT)
    .default(DEFAULTS.largePayloadBudgetBytes)
    .describe(
      `Bytes of left-out payloads (over ${OUTBOX_DEFERRED_PAYLOAD_BYTES}, see maxPayloadBytes) the poller reads and holds at once, across its batches in flight; one always goes, however large, so a smaller budget only delivers them one at a time. PostgreSQL (url or pglite) only. Default ${DEFAULTS.largePayloadBudgetBytes} (16 MiB); at least ${OUTBOX_DEFERRED_PAYLOAD_BYTES}; at most ${OUTBOX_LARGE_PAYLOAD_BUDGET_LIMIT} (1 GiB).`,
    ),
});
