import { CONFIG_DEFAULTS } from '@queuebox/core';
import * as z from 'zod';
import { BASE_PATH, int, LAMBDA_MAX_PAYLOAD_BYTES } from './fields.ts';

// `inbox`: HTTP ingestion and the relay.

const DEFAULTS = CONFIG_DEFAULTS.inbox;

const relaySchema = z.strictObject({
  enabled: z
    .boolean()
    .default(DEFAULTS.relay.enabled)
    .describe(`Whether the relay forwards push-source rows. Default ${DEFAULTS.relay.enabled}.`),
  pollIntervalMs: int(1)
    .default(DEFAULTS.relay.pollIntervalMs)
    .describe(`Local poll interval when idle, in ms. Default ${DEFAULTS.relay.pollIntervalMs}.`),
  batchSize: int(1, 1000)
    .default(DEFAULTS.relay.batchSize)
    .describe(`Rows per claim. Default ${DEFAULTS.relay.batchSize}.`),
  claimTimeoutMs: int(1000)
    .default(DEFAULTS.relay.claimTimeoutMs)
    .describe(
      `Lease of a relay claim, in ms; must exceed the relay-tick function timeout. Default ${DEFAULTS.relay.claimTimeoutMs}.`,
    ),
  maxAttempts: int(1)
    .optional()
    .describe('max_attempts of the outbox rows the relay writes. Default: outbox.maxAttempts.'),
});

export const inboxSchema = z.strictObject({
  basePath: z
    .string()
    .regex(BASE_PATH, 'must start with "/", have no trailing "/" and contain only URL-safe path segments')
    .default(DEFAULTS.basePath)
    .describe(`Path prefix of the HTTP sources: POST {basePath}/{path}. Default ${DEFAULTS.basePath}.`),
  maxBodyBytes: int(1, LAMBDA_MAX_PAYLOAD_BYTES)
    .default(DEFAULTS.maxBodyBytes)
    .describe(
      `Largest accepted body, in bytes (413 above). Default ${DEFAULTS.maxBodyBytes}; at most 6 MiB (Lambda payload limit).`,
    ),
  relay: relaySchema.prefault({}),
});
