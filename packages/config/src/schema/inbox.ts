import { CONFIG_DEFAULTS } from '@queuebox/core';
import * as z from 'zod';
import { BASE_PATH, DAY_MS, int, LAMBDA_MAX_PAYLOAD_BYTES, MAX_ATTEMPTS } from './fields.ts';

// `inbox`: HTTP ingestion and the relay.

const DEFAULTS = CONFIG_DEFAULTS.inbox;

/** Default `inbox.transformTimeoutMs`: the inbox package's own default (DEFAULT_INBOX_TRANSFORM_TIMEOUT_MS), as the outbox's. */
export const TRANSFORM_TIMEOUT_DEFAULT_MS = 1000;
/** The longest `transformTimeoutMs` of the inbox or a source: 1 min. */
export const TRANSFORM_TIMEOUT_MAX_MS = 60_000;

/**
 * Paths the local HTTP server serves itself. It hands every request at or under `inbox.basePath` to the inbox first,
 * so a base path equal to one of these, above one or below one would hide it.
 */
export const RESERVED_HTTP_PATHS: readonly string[] = ['/admin', '/health', '/metrics', '/_demo/receiver'];

/** The reserved path `basePath` would hide (equal, above or below it), or undefined. */
function hiddenPath(basePath: string): string | undefined {
  return RESERVED_HTTP_PATHS.find(
    (reserved) =>
      basePath === reserved || reserved.startsWith(`${basePath}/`) || basePath.startsWith(`${reserved}/`),
  );
}

const relaySchema = z.strictObject({
  enabled: z
    .boolean()
    .default(DEFAULTS.relay.enabled)
    .describe(`Whether the relay forwards push-source rows. Default ${DEFAULTS.relay.enabled}.`),
  pollIntervalMs: int(1, DAY_MS)
    .default(DEFAULTS.relay.pollIntervalMs)
    .describe(
      `Local poll interval when idle, in ms. Default ${DEFAULTS.relay.pollIntervalMs}; at most ${DAY_MS} (24 h).`,
    ),
  batchSize: int(1, 1000)
    .default(DEFAULTS.relay.batchSize)
    .describe(`Rows per claim. Default ${DEFAULTS.relay.batchSize}; at most 1000.`),
  claimTimeoutMs: int(1000, DAY_MS)
    .default(DEFAULTS.relay.claimTimeoutMs)
    .describe(
      `Lease of a relay claim, in ms; must exceed the relay-tick function timeout. Default ${DEFAULTS.relay.claimTimeoutMs}; at most ${DAY_MS} (24 h).`,
    ),
  maxAttempts: int(1, MAX_ATTEMPTS)
    .optional()
    .describe(
      `max_attempts of the outbox rows the relay writes. Default: outbox.maxAttempts; at most ${MAX_ATTEMPTS}.`,
    ),
});

export const inboxSchema = z.strictObject({
  basePath: z
    .string()
    .regex(BASE_PATH, 'must start with "/", have no trailing "/" and contain only URL-safe path segments')
    .superRefine((basePath, ctx) => {
      const hidden = hiddenPath(basePath);
      if (hidden === undefined) return;
      ctx.addIssue({
        code: 'custom',
        message: `"${basePath}" would hide ${hidden} of the local server (requests at and under the base path go to the inbox); choose a path outside ${RESERVED_HTTP_PATHS.join(', ')}`,
      });
    })
    .default(DEFAULTS.basePath)
    .describe(
      `Path prefix of the HTTP sources: POST {basePath}/{path}. Default ${DEFAULTS.basePath}; not ${RESERVED_HTTP_PATHS.join(', ')} nor above or below them.`,
    ),
  maxBodyBytes: int(1, LAMBDA_MAX_PAYLOAD_BYTES)
    .default(DEFAULTS.maxBodyBytes)
    .describe(
      `Largest accepted body, in bytes (413 above). Default ${DEFAULTS.maxBodyBytes}; at most ${LAMBDA_MAX_PAYLOAD_BYTES} (6 MiB, Lambda payload limit).`,
    ),
  transformTimeoutMs: int(1, TRANSFORM_TIMEOUT_MAX_MS)
    .default(TRANSFORM_TIMEOUT_DEFAULT_MS)
    .describe(
      `Time one run of a source transform may take, in ms, before the message is answered 503 transform_timeout (HTTP: the sender retries) or redelivered as a failure (a broker source, dead after deadAfterFailures): a JSONata expression is cut short, a function's signal aborts (a function that never yields cannot be interrupted). Default ${TRANSFORM_TIMEOUT_DEFAULT_MS}, as the outbox's; at most ${TRANSFORM_TIMEOUT_MAX_MS}.`,
    ),
  relay: relaySchema.prefault({}),
});
