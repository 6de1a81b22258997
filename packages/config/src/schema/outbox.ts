import { CONFIG_DEFAULTS } from '@queuebox/core';
import * as z from 'zod';
import { backoffSchema, int } from './fields.ts';

// `outbox`: the outbox poller.

const DEFAULTS = CONFIG_DEFAULTS.outbox;

export const outboxSchema = z.strictObject({
  pollIntervalMs: int(1)
    .default(DEFAULTS.pollIntervalMs)
    .describe(`Local poll interval when idle, in ms. Default ${DEFAULTS.pollIntervalMs}.`),
  batchSize: int(1, 1000)
    .default(DEFAULTS.batchSize)
    .describe(
      `Rows per claim. Default ${DEFAULTS.batchSize}; at most 1000 (SQL Server allows ~2100 parameters per statement).`,
    ),
  claimTimeoutMs: int(1000)
    .default(DEFAULTS.claimTimeoutMs)
    .describe(
      `Lease of a claim, in ms; must exceed the outbox-tick function timeout. Default ${DEFAULTS.claimTimeoutMs}.`,
    ),
  maxAttempts: int(1)
    .default(DEFAULTS.maxAttempts)
    .describe(
      `Attempts before a row goes dead, for rows that do not set one. Default ${DEFAULTS.maxAttempts}.`,
    ),
  backoff: backoffSchema
    .prefault({})
    .describe('Retry delay: min(maxMs, baseMs × 2^(attempt−1)) with jitter.'),
});
