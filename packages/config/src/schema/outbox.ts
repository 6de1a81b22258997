import { CONFIG_DEFAULTS } from '@queuebox/core';
import * as z from 'zod';
import { backoffSchema, DAY_MS, int, MAX_ATTEMPTS } from './fields.ts';

// `outbox`: the outbox poller.

const DEFAULTS = CONFIG_DEFAULTS.outbox;

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
});
