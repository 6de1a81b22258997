import {
  CONFIG_DEFAULTS,
  decodeStandardWebhooksSecret,
  jsonPathProblem,
  SCHEMA_NAME_PATTERN,
  templateProblems,
} from '@queuebox/core';
import * as z from 'zod';

// The building blocks every section uses: value kinds (ints, names, URLs, templates, JSON paths), the shared
// transform / idempotency-key / backoff objects and the Standard Webhooks secret list.

/** Identifier rule for `database.schema` (quoted in SQL, but kept portable between PostgreSQL and SQL Server). */
export const SCHEMA_IDENTIFIER = SCHEMA_NAME_PATTERN;

/** Rule for source and destination names: they appear in URLs, headers, topics and 200-character columns. */
export const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,199}$/;

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
export const URL_SEGMENT = /^[A-Za-z0-9._~-]+$/;
export const BASE_PATH = /^(\/[A-Za-z0-9._~-]+)+$/;
const FUNCTION_NAME = /^[A-Za-z0-9_.-]+$/;
export const KAFKA_BROKER = /^[^\s:/]+:\d{1,5}$/;

/** Lambda's hard limit on a function timeout, in seconds. */
export const LAMBDA_MAX_TIMEOUT_SECONDS = 900;
/** API Gateway HTTP APIs give up on an integration after 30 s. */
export const API_GATEWAY_MAX_TIMEOUT_SECONDS = 30;
/** Lambda's synchronous invocation payload limit; a bigger inbox body can never reach the function. */
export const LAMBDA_MAX_PAYLOAD_BYTES = 6 * 1024 * 1024;

/**
 * The longest delay a Node.js timer keeps (2^31 − 1 ms, about 24.8 days): `setTimeout` runs a longer one after 1 ms,
 * so a poll interval above it would be a busy loop.
 */
export const MAX_TIMER_MS = 2_147_483_647;
/** 24 hours in ms: the upper bound of the poll intervals and claim leases (well under {@link MAX_TIMER_MS}). */
export const DAY_MS = 86_400_000;
/** 7 days in ms: the upper bound of the retry back-off delays. */
export const WEEK_MS = 7 * DAY_MS;
/**
 * The most attempts a row may be given (`maxAttempts` everywhere). The `max_attempts` columns are 32-bit integers
 * (at most 2,147,483,647); a million attempts is years of retries at any back-off, and a round limit to remember.
 */
export const MAX_ATTEMPTS = 1_000_000;
/**
 * The longest retention, in hours: 100 years (876,000 h). Retention deletes rows older than now() − hours, which
 * must stay a valid timestamp (PostgreSQL's start at 4713 BC, SQL Server's datetime2 at year 1).
 */
export const MAX_RETENTION_HOURS = 876_000;

/** A whole number from `min` to `max`: every integer key has an upper bound, documented in its description. */
export const int = (min: number, max: number) => z.number().int().min(min).max(max);
export const text = () => z.string().min(1);
export const name = () =>
  z
    .string()
    .regex(
      NAME_PATTERN,
      'must start with a letter or digit and contain only letters, digits, "-" and "_" (at most 200 characters)',
    );
export const headerName = () => z.string().regex(HEADER_NAME, 'is not a valid HTTP header name');

export function url(schemes: readonly string[], label: string) {
  // The value is never echoed: URLs carry credentials.
  return z.string().superRefine((value, ctx) => {
    let parsed: URL;
    try {
      parsed = new URL(value);
    } catch {
      ctx.addIssue({ code: 'custom', message: `is not a valid URL (expected an ${label} URL)` });
      return;
    }
    const scheme = parsed.protocol.slice(0, -1).toLowerCase();
    if (!schemes.includes(scheme)) {
      ctx.addIssue({
        code: 'custom',
        message: `must be an ${label} URL (${schemes.map((s) => `${s}://`).join(' or ')}), not ${scheme}://`,
      });
    }
  });
}

export function template(allowed: readonly string[], options: { allowEmpty?: boolean } = {}) {
  return z.string().superRefine((value, ctx) => {
    if (value === '' && !options.allowEmpty) {
      ctx.addIssue({ code: 'custom', message: 'is empty; it would render an empty name for every message' });
    }
    for (const problem of templateProblems(value, allowed))
      ctx.addIssue({ code: 'custom', message: problem });
  });
}

export const jsonPath = () =>
  z.string().superRefine((value, ctx) => {
    const problem = jsonPathProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

export const stringList = () => z.array(text()).min(1);

/**
 * NATS server URLs (sources and destinations): credentials in them (`nats://user:password@host:4222`,
 * `nats://token@host:4222`) are used, so a server with credentials must carry its scheme (a bare `user:pass@host`
 * is not recognised as a URL, and would be neither used nor redacted).
 */
export const natsServers = () =>
  stringList()
    .refine(
      (servers) =>
        servers.every((server) => !server.includes('@') || /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(server)),
      {
        message: 'a server with credentials needs its scheme, e.g. nats://user:password@host:4222',
      },
    )
    .describe(
      'NATS servers, e.g. nats://127.0.0.1:4222; credentials in them (nats://user:password@host:4222, nats://token@host:4222, percent-encoded) are used, the same for every server.',
    );

// Shared parts

/** A transform: a JSONata expression from the configuration, or a function registered in code by name. */
export type TransformConfig =
  | { readonly jsonata: string; readonly function?: undefined }
  | { readonly function: string; readonly jsonata?: undefined };

/** `{ jsonata: "…" }` or `{ function: name-registered-in-code }`, exactly one of the two. */
export const transformSchema = z
  .strictObject({
    jsonata: text().optional().describe('A JSONata expression evaluated against the message.'),
    function: z
      .string()
      .regex(FUNCTION_NAME, 'must be a registered function name (letters, digits, ".", "-", "_")')
      .optional()
      .describe('The name of a transform function registered in code.'),
  })
  .superRefine((t, ctx) => {
    if ((t.jsonata === undefined) === (t.function === undefined)) {
      ctx.addIssue({ code: 'custom', message: 'set exactly one of "jsonata" or "function"' });
    }
  })
  .transform(
    (t): TransformConfig =>
      t.jsonata !== undefined ? { jsonata: t.jsonata } : { function: t.function ?? '' },
  )
  .describe('A transform: { jsonata: expression } or { function: name registered in code }.');

/**
 * Where a source finds a message's idempotency key: a JSON path into the body, a header, or the SHA-256 of the raw
 * body (`bodyHash: true`).
 */
export type IdempotencyKeyConfig =
  | { readonly path: string; readonly header?: undefined; readonly bodyHash?: undefined }
  | { readonly header: string; readonly path?: undefined; readonly bodyHash?: undefined }
  | { readonly bodyHash: true; readonly path?: undefined; readonly header?: undefined };

export const idempotencyKeySchema = z
  .strictObject({
    path: jsonPath().optional().describe('JSON path into the body, e.g. $.id.'),
    header: headerName()
      .optional()
      .describe('Header (or broker message property) name, e.g. Idempotency-Key.'),
    bodyHash: z
      .literal(true)
      .optional()
      .describe(
        'Key = "sha256:" + the hex SHA-256 of the raw body: a replay of signed bytes with new unsigned headers is a duplicate; identical bodies are one message.',
      ),
  })
  .superRefine((k, ctx) => {
    const set = [k.path, k.header, k.bodyHash].filter((v) => v !== undefined).length;
    if (set !== 1) {
      ctx.addIssue({ code: 'custom', message: 'set exactly one of "path", "header" or "bodyHash: true"' });
    }
  })
  .transform((k): IdempotencyKeyConfig => {
    if (k.path !== undefined) return { path: k.path };
    if (k.header !== undefined) return { header: k.header };
    return { bodyHash: true };
  });

export const backoffSchema = z
  .strictObject({
    baseMs: int(1, WEEK_MS)
      .default(CONFIG_DEFAULTS.outbox.backoff.baseMs)
      .describe(
        `Delay before the first retry, in ms; doubles per attempt. Default ${CONFIG_DEFAULTS.outbox.backoff.baseMs}; at most ${WEEK_MS} (7 days).`,
      ),
    maxMs: int(1, WEEK_MS)
      .default(CONFIG_DEFAULTS.outbox.backoff.maxMs)
      .describe(
        `Longest delay between attempts, in ms. Default ${CONFIG_DEFAULTS.outbox.backoff.maxMs} (10 min); at most ${WEEK_MS} (7 days).`,
      ),
  })
  .superRefine((b, ctx) => {
    if (b.maxMs < b.baseMs)
      ctx.addIssue({ code: 'custom', path: ['maxMs'], message: 'must be at least baseMs' });
  });

/** A `secret://` or `env://` reference not yet resolved: its value is checked once resolved (infra plans with them). */
export const isUnresolvedReference = (value: string): boolean =>
  value.startsWith('secret://') || value.startsWith('env://');

/** Standard Webhooks secrets (`whsec_<base64>`, at least 24 bytes decoded), inbound or outbound. */
export const standardWebhooksSecrets = (what: string) =>
  z
    .array(
      z.string().superRefine((value, ctx) => {
        // A secret:// or env:// reference is checked once resolved (infra plans with the references unresolved).
        if (isUnresolvedReference(value)) return;
        // The problem never echoes the value: it is a secret.
        const decoded = decodeStandardWebhooksSecret(value);
        if (!decoded.ok) ctx.addIssue({ code: 'custom', message: decoded.problem });
      }),
    )
    .min(1)
    .describe(what);
