import {
  DESTINATION_TEMPLATE_PLACEHOLDERS,
  decodeStandardWebhooksSecret,
  defaultSourceTopicTemplate,
  jsonPathProblem,
  SOURCE_TEMPLATE_PLACEHOLDERS,
  templateProblems,
  templateUses,
  topicPatternProblem,
} from '@queuebox/core';
// A namespace import: esbuild keeps only the members `import * as z` uses, but all of zod, every locale included,
// behind the re-exported `z` binding of `import { z }` (≈ 360 KiB more in each Lambda bundle).
import * as z from 'zod';

// The schema is the single source of truth: every key, default and description lives here. Loading (YAML, env,
// references) only fills it; cross-section checks live in validate.ts because zod skips an object's refinements
// as soon as any part of it is invalid, and every problem must be reported at once.

/** Identifier rule for `database.schema` (quoted in SQL, but kept portable between PostgreSQL and SQL Server). */
export const SCHEMA_IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** Rule for source and destination names: they appear in URLs, headers, topics and 200-character columns. */
export const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,199}$/;

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const URL_SEGMENT = /^[A-Za-z0-9._~-]+$/;
const BASE_PATH = /^(\/[A-Za-z0-9._~-]+)+$/;
const FUNCTION_NAME = /^[A-Za-z0-9_.-]+$/;
const KAFKA_BROKER = /^[^\s:/]+:\d{1,5}$/;

/** Lambda's hard limit on a function timeout, in seconds. */
const LAMBDA_MAX_TIMEOUT_SECONDS = 900;
/** API Gateway HTTP APIs give up on an integration after 30 s. */
const API_GATEWAY_MAX_TIMEOUT_SECONDS = 30;
/** Lambda's synchronous invocation payload limit; a bigger inbox body can never reach the function. */
const LAMBDA_MAX_PAYLOAD_BYTES = 6 * 1024 * 1024;

const int = (min: number, max = Number.MAX_SAFE_INTEGER) => z.number().int().min(min).max(max);
const text = () => z.string().min(1);
const name = () =>
  z
    .string()
    .regex(
      NAME_PATTERN,
      'must start with a letter or digit and contain only letters, digits, "-" and "_" (at most 200 characters)',
    );
const headerName = () => z.string().regex(HEADER_NAME, 'is not a valid HTTP header name');

function url(schemes: readonly string[], label: string) {
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

function template(allowed: readonly string[], options: { allowEmpty?: boolean } = {}) {
  return z.string().superRefine((value, ctx) => {
    if (value === '' && !options.allowEmpty) {
      ctx.addIssue({ code: 'custom', message: 'is empty; it would render an empty name for every message' });
    }
    for (const problem of templateProblems(value, allowed))
      ctx.addIssue({ code: 'custom', message: problem });
  });
}

const jsonPath = () =>
  z.string().superRefine((value, ctx) => {
    const problem = jsonPathProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

const stringList = () => z.array(text()).min(1);

// ---------------------------------------------------------------------------------------------------------------
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

const idempotencyKeySchema = z
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

const backoffSchema = z
  .strictObject({
    baseMs: int(1)
      .default(1000)
      .describe('Delay before the first retry, in ms; doubles per attempt. Default 1000.'),
    maxMs: int(1)
      .default(600_000)
      .describe('Longest delay between attempts, in ms. Default 600000 (10 min).'),
  })
  .superRefine((b, ctx) => {
    if (b.maxMs < b.baseMs)
      ctx.addIssue({ code: 'custom', path: ['maxMs'], message: 'must be at least baseMs' });
  });

// ---------------------------------------------------------------------------------------------------------------
// database

/** `database.dataApi`: Aurora PostgreSQL through the RDS Data API (SQL over HTTPS, no connection, no VPC). */
export interface DataApiConfig {
  /** ARN of the Aurora cluster with the Data API enabled. */
  readonly resourceArn: string;
  /** ARN of the Secrets Manager secret with the database user's name and password. */
  readonly secretArn: string;
  /** Database name. Default: the cluster's default database. */
  readonly database?: string;
  /** Longest wait per call for a paused cluster to resume, in ms. Default 25000. */
  readonly resumeTimeoutMs: number;
}

/** Database connection settings after provider inference. */
export type DatabaseConfig =
  | {
      readonly provider: 'pglite';
      readonly url?: undefined;
      readonly dataApi?: undefined;
      readonly schema: string;
      readonly poolSize: number;
      readonly dataDir: string;
    }
  | {
      readonly provider: 'postgres' | 'sqlserver';
      readonly url: string;
      readonly dataApi?: undefined;
      readonly schema: string;
      readonly poolSize: number;
      readonly dataDir: string;
    }
  | {
      readonly provider: 'postgres';
      readonly url?: undefined;
      readonly dataApi: DataApiConfig;
      readonly schema: string;
      readonly poolSize: number;
      readonly dataDir: string;
    };

/** Providers QueueBox can store its tables in. */
export const DATABASE_PROVIDERS = ['postgres', 'sqlserver', 'pglite'] as const;
export type DatabaseProvider = (typeof DATABASE_PROVIDERS)[number];

const SCHEME_PROVIDERS: Readonly<Record<string, 'postgres' | 'sqlserver'>> = {
  postgres: 'postgres',
  postgresql: 'postgres',
  sqlserver: 'sqlserver',
  mssql: 'sqlserver',
};

function urlScheme(value: string): string | undefined {
  return /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(value)?.[1]?.toLowerCase();
}

/**
 * The provider a connection URL implies: `postgres://`/`postgresql://` → postgres, `sqlserver://`/`mssql://` →
 * sqlserver; `undefined` for any other text.
 */
export function providerOfUrl(value: string): 'postgres' | 'sqlserver' | undefined {
  const scheme = urlScheme(value);
  return scheme === undefined ? undefined : SCHEME_PROVIDERS[scheme];
}

const databaseSchema = z
  .strictObject({
    provider: z
      .enum(DATABASE_PROVIDERS)
      .optional()
      .describe('postgres | sqlserver | pglite. Default: inferred from url, or pglite when there is no url.'),
    url: text()
      .optional()
      .describe(
        'Connection string (postgres://, postgresql://, sqlserver:// or mssql://). Usually env:// or secret://.',
      ),
    schema: z
      .string()
      .regex(
        SCHEMA_IDENTIFIER,
        'must be an identifier: a letter or "_", then letters, digits or "_" (at most 63)',
      )
      .default('queuebox')
      .describe('Database schema holding the outbox and inbox tables. Default queuebox.'),
    poolSize: int(1, 1000).default(10).describe('Most connections per process. Default 10.'),
    dataApi: z
      .strictObject({
        resourceArn: z
          .string()
          .regex(/^arn:aws[a-z-]*:rds:[a-z0-9-]+:\d{12}:cluster:.+/, 'must be the ARN of an Aurora cluster')
          .describe('ARN of the Aurora PostgreSQL cluster (Data API enabled).'),
        secretArn: z
          .string()
          .regex(/^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:.+/, 'must be the ARN of a secret')
          .describe("ARN of the secret with the database user's username and password."),
        database: text().optional().describe("Database name. Default: the cluster's default database."),
        resumeTimeoutMs: int(1000, 120_000)
          .default(25_000)
          .describe('Longest wait per call while a paused cluster resumes, in ms. Default 25000.'),
      })
      .optional()
      .describe(
        'Aurora PostgreSQL through the RDS Data API (HTTPS, no connection, no VPC) instead of url. Default: none.',
      ),
    dataDir: text().default('.queuebox/pglite').describe('PGlite data directory. Default .queuebox/pglite.'),
  })
  .superRefine((d, ctx) => {
    if (d.dataApi !== undefined) {
      if (d.url !== undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['url'],
          message:
            'is set next to database.dataApi; the Data API needs no connection string, remove one of them',
        });
      }
      if (d.provider !== undefined && d.provider !== 'postgres') {
        ctx.addIssue({
          code: 'custom',
          path: ['provider'],
          message: `is ${d.provider}, but database.dataApi reaches Aurora PostgreSQL: use postgres or leave it out`,
        });
      }
      return;
    }
    const scheme = d.url === undefined ? undefined : urlScheme(d.url);
    const implied = d.url === undefined ? undefined : providerOfUrl(d.url);
    if (d.provider === undefined) {
      if (d.url !== undefined && implied === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['url'],
          message: `cannot tell the provider from ${scheme ? `the scheme "${scheme}://"` : 'a url without a scheme'}; use postgres://, postgresql://, sqlserver:// or mssql://, or set database.provider`,
        });
      }
    } else if (d.provider === 'pglite') {
      if (d.url !== undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['url'],
          message:
            'is set but database.provider is pglite, which keeps its data in database.dataDir; remove one of them (without a provider, the url decides)',
        });
      }
    } else if (d.url === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['url'],
        message: `is required when database.provider is ${d.provider}`,
      });
    } else if (implied !== undefined && implied !== d.provider) {
      ctx.addIssue({
        code: 'custom',
        path: ['url'],
        message: `has the scheme "${scheme}://", which is for ${implied}, but database.provider is ${d.provider}`,
      });
    }
  })
  .transform((d): DatabaseConfig => {
    if (d.dataApi !== undefined) {
      return {
        provider: 'postgres',
        dataApi: d.dataApi,
        schema: d.schema,
        poolSize: d.poolSize,
        dataDir: d.dataDir,
      };
    }
    const provider = d.provider ?? (d.url === undefined ? 'pglite' : (providerOfUrl(d.url) ?? 'pglite'));
    if (provider === 'pglite') {
      return { provider, schema: d.schema, poolSize: d.poolSize, dataDir: d.dataDir };
    }
    return { provider, url: d.url ?? '', schema: d.schema, poolSize: d.poolSize, dataDir: d.dataDir };
  });

// ---------------------------------------------------------------------------------------------------------------
// http, admin, outbox, inbox

const httpSchema = z.strictObject({
  port: int(0, 65_535).default(8080).describe('Local HTTP port (0 picks a free port). Default 8080.'),
  host: text()
    .default('127.0.0.1')
    .describe(
      'Local HTTP bind address. Default 127.0.0.1 (this machine only); 0.0.0.0 listens on every interface.',
    ),
});

/** A `secret://` or `env://` reference not yet resolved: its value is checked once resolved (infra plans with them). */
const isUnresolvedReference = (value: string): boolean =>
  value.startsWith('secret://') || value.startsWith('env://');

/** The shortest `admin.token`: a token anyone could guess opens requeue, replay and purge. */
export const ADMIN_TOKEN_MIN_LENGTH = 16;

const adminSchema = z
  .strictObject({
    token: z
      .string()
      .refine((value) => isUnresolvedReference(value) || value.length >= ADMIN_TOKEN_MIN_LENGTH, {
        message: `must be at least ${ADMIN_TOKEN_MIN_LENGTH} characters`,
      })
      .optional()
      .describe(
        `Bearer token for the local /admin routes (AWS uses IAM), at least ${ADMIN_TOKEN_MIN_LENGTH} characters. When absent, local admin routes are off.`,
      ),
    protectMetrics: z
      .boolean()
      .default(false)
      .describe(
        'Require the admin token (Authorization: Bearer) on the local GET /metrics too. Default false.',
      ),
  })
  .superRefine((a, ctx) => {
    if (a.protectMetrics && a.token === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['protectMetrics'],
        message: 'needs admin.token, the token /metrics asks for',
      });
    }
  });

const outboxSchema = z.strictObject({
  pollIntervalMs: int(1).default(100).describe('Local poll interval when idle, in ms. Default 100.'),
  batchSize: int(1, 1000)
    .default(100)
    .describe(
      'Rows per claim. Default 100; at most 1000 (SQL Server allows ~2100 parameters per statement).',
    ),
  claimTimeoutMs: int(1000)
    .default(300_000)
    .describe('Lease of a claim, in ms; must exceed the outbox-tick function timeout. Default 300000.'),
  maxAttempts: int(1)
    .default(10)
    .describe('Attempts before a row goes dead, for rows that do not set one. Default 10.'),
  backoff: backoffSchema
    .prefault({})
    .describe('Retry delay: min(maxMs, baseMs × 2^(attempt−1)) with jitter.'),
});

const relaySchema = z.strictObject({
  enabled: z.boolean().default(true).describe('Whether the relay forwards push-source rows. Default true.'),
  pollIntervalMs: int(1).default(100).describe('Local poll interval when idle, in ms. Default 100.'),
  batchSize: int(1, 1000).default(100).describe('Rows per claim. Default 100.'),
  claimTimeoutMs: int(1000)
    .default(300_000)
    .describe('Lease of a relay claim, in ms; must exceed the relay-tick function timeout. Default 300000.'),
  maxAttempts: int(1)
    .optional()
    .describe('max_attempts of the outbox rows the relay writes. Default: outbox.maxAttempts.'),
});

const inboxSchema = z.strictObject({
  basePath: z
    .string()
    .regex(BASE_PATH, 'must start with "/", have no trailing "/" and contain only URL-safe path segments')
    .default('/inbox')
    .describe('Path prefix of the HTTP sources: POST {basePath}/{path}. Default /inbox.'),
  maxBodyBytes: int(1, LAMBDA_MAX_PAYLOAD_BYTES)
    .default(1_048_576)
    .describe(
      'Largest accepted body, in bytes (413 above). Default 1048576; at most 6 MiB (Lambda payload limit).',
    ),
  relay: relaySchema.prefault({}),
});

// ---------------------------------------------------------------------------------------------------------------
// AWS services (SQS, SNS, EventBridge) as sources and destinations

const AWS_REGION = /^[a-z]{2}(-[a-z]+)+-\d$/;
const SNS_TOPIC_ARN = /^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$/;
const EVENT_BUS =
  /^([A-Za-z0-9._\-/]{1,256}|arn:aws[a-z-]*:events:[a-z0-9-]+:\d{12}:event-bus\/[A-Za-z0-9._\-/]{1,256})$/;
// MessageGroupId: 1–128 alphanumerics and punctuation.
const MESSAGE_GROUP_ID = /^[A-Za-z0-9!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]{1,128}$/;

const sqsQueueUrl = () =>
  url(['http', 'https'], 'SQS queue').superRefine((value, ctx) => {
    let path = '';
    try {
      path = new URL(value).pathname;
    } catch {
      return;
    }
    if (!/^\/[^/]+\/[A-Za-z0-9_-]{1,80}(\.fifo)?\/?$/.test(path)) {
      ctx.addIssue({
        code: 'custom',
        message: 'must end in /<account>/<queue name> (a queue URL as SQS gives it)',
      });
    }
  });

/** Where the SDK connects: shared by every SQS / SNS / EventBridge source and destination. */
const awsClientFields = {
  region: z
    .string()
    .regex(AWS_REGION, 'must be an AWS region such as eu-west-1')
    .optional()
    .describe(
      'AWS region. Default: the one in the queue URL or ARN, else the SDK chain (AWS_REGION), else us-east-1 with an endpoint.',
    ),
  endpoint: url(['http', 'https'], 'HTTP')
    .optional()
    .describe(
      "Another endpoint than AWS's, e.g. http://127.0.0.1:9324 (ElasticMQ). Credentials: the usual AWS chain.",
    ),
};

const messageGroupId = () =>
  z
    .string()
    .regex(MESSAGE_GROUP_ID, 'must be 1–128 letters, digits or punctuation')
    .default('queuebox')
    .describe(
      'FIFO only: the MessageGroupId of rows without a key (rows with a key use it). Default queuebox.',
    );

const maxMessageBytes = (what: string) =>
  int(1024, 1_048_576)
    .default(262_144)
    .describe(
      `Largest message (body + attributes) the ${what} accepts; larger rows go dead at once. Default 262144 (256 KiB); at most 1048576 (a ${what} configured for 1 MiB).`,
    );

// ---------------------------------------------------------------------------------------------------------------
// sources

const secrets = () =>
  stringList().describe(
    'Active secrets; several for rotation (any one verifies). Usually secret:// references.',
  );

/** Standard Webhooks secrets (`whsec_<base64>`, at least 24 bytes decoded), inbound or outbound. */
const standardWebhooksSecrets = (what: string) =>
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
const toleranceSec = () =>
  int(1, 86_400)
    .default(300)
    .describe('Largest accepted age of the signed timestamp, in seconds. Default 300.');

const authSchema = z.discriminatedUnion('scheme', [
  z.strictObject({
    scheme: z.literal('hmac'),
    secrets: secrets(),
    algorithm: z.enum(['sha256', 'sha512']).default('sha256').describe('HMAC hash. Default sha256.'),
    header: headerName().describe('Header carrying the signature, e.g. X-Signature.'),
    encoding: z.enum(['hex', 'base64']).default('hex').describe('Signature encoding. Default hex.'),
    prefix: z.string().optional().describe('Text before the signature in the header, e.g. "sha256=".'),
  }),
  z.strictObject({ scheme: z.literal('stripe'), secrets: secrets(), toleranceSec: toleranceSec() }),
  z.strictObject({ scheme: z.literal('github'), secrets: secrets() }),
  z.strictObject({
    scheme: z.literal('standard-webhooks'),
    secrets: standardWebhooksSecrets(
      'Active whsec_<base64> secrets (at least 24 bytes each); several for rotation. Usually secret:// references.',
    ),
    toleranceSec: toleranceSec(),
  }),
  z.strictObject({
    scheme: z.literal('svix'),
    secrets: standardWebhooksSecrets(
      'Svix signing secrets (whsec_…): svix is standard-webhooks under another name.',
    ),
    toleranceSec: toleranceSec(),
  }),
  z.strictObject({ scheme: z.literal('shopify'), secrets: secrets() }),
  z.strictObject({ scheme: z.literal('slack'), secrets: secrets(), toleranceSec: toleranceSec() }),
  z.strictObject({ scheme: z.literal('bearer'), secrets: secrets().describe('Accepted bearer tokens.') }),
  z.strictObject({
    scheme: z.literal('basic'),
    secrets: z
      .array(
        z.string().superRefine((v, ctx) => {
          // Never echo the value: it is a credential.
          if (v.indexOf(':') < 1)
            ctx.addIssue({ code: 'custom', message: 'must have the form user:password' });
        }),
      )
      .min(1)
      .describe('Accepted credentials, each "user:password"; several for rotation.'),
  }),
  z.strictObject({ scheme: z.literal('none') }),
]);

/** Source authentication schemes. */
export const AUTH_SCHEMES = [
  'hmac',
  'stripe',
  'github',
  'standard-webhooks',
  'svix',
  'shopify',
  'slack',
  'bearer',
  'basic',
  'none',
] as const;

/** Schemes whose provider names the event type itself (Stripe `$.type`, GitHub `X-GitHub-Event`, …). */
export const SCHEMES_WITH_EVENT_TYPE: ReadonlySet<string> = new Set([
  'stripe',
  'github',
  'standard-webhooks',
  'svix',
  'shopify',
  'slack',
]);

const sourceCommon = {
  mode: z
    .enum(['push', 'pull'])
    .default('push')
    .describe(
      'push: the relay forwards stored rows to the outbox; pull: your worker claims them. Default push.',
    ),
  idempotencyKey: idempotencyKeySchema
    .optional()
    .describe("{ path } or { header }. When absent, the source uses its transport's message id."),
  eventTypePath: jsonPath().optional().describe('JSON path of the event type in the body, e.g. $.type.'),
  eventTypeFromHeader: z
    .union([z.boolean(), headerName()], { error: 'must be true, false or a header name' })
    .optional()
    .describe(
      'Read the event type from a header: a header name, or true for the header "type" (for AMQP, the message\'s type property).',
    ),
  aggregateIdPath: jsonPath().optional().describe('JSON path of the aggregate id; becomes the outbox key.'),
  aggregateIdHeader: headerName().optional().describe('Header carrying the aggregate id.'),
  correlationIdPath: jsonPath().optional().describe('JSON path of the correlation id.'),
  correlationIdHeader: headerName()
    .optional()
    .describe(
      'Header carrying the correlation id. Default X-Correlation-Id unless correlationIdPath is set.',
    ),
  transform: transformSchema.optional().describe('Reshapes the payload before the duplicate check.'),
  keepHeaders: z
    .array(headerName())
    .optional()
    .describe(
      'Received headers to store and relay (any letter case); the others are dropped. Credentials, signatures, proxy and forwarding headers are never kept. Default: all but those.',
    ),
  maxAttempts: int(1)
    .optional()
    .describe(
      'max_attempts of the inbox rows this source stores (what a pull worker gets). Default outbox.maxAttempts.',
    ),
};

const sourceTopic = (fallback: string) =>
  template(SOURCE_TEMPLATE_PLACEHOLDERS)
    .default(fallback)
    .describe(
      `Outbox topic the relay writes: a template with {{ source }} and {{ eventType }}. Default ${fallback}.`,
    );

interface SourceShape {
  readonly type: string;
  readonly auth?: { readonly scheme: string };
  readonly topic: string;
  readonly eventTypePath?: string | undefined;
  readonly eventTypeFromHeader?: boolean | string | undefined;
  readonly aggregateIdPath?: string | undefined;
  readonly aggregateIdHeader?: string | undefined;
  readonly correlationIdPath?: string | undefined;
  readonly correlationIdHeader?: string | undefined;
}

function checkSource(s: SourceShape, ctx: z.RefinementCtx): void {
  const fromHeader = s.eventTypeFromHeader !== undefined && s.eventTypeFromHeader !== false;
  if (s.eventTypePath !== undefined && fromHeader) {
    ctx.addIssue({
      code: 'custom',
      path: ['eventTypeFromHeader'],
      message: 'set either eventTypePath or eventTypeFromHeader, not both',
    });
  }
  if (s.aggregateIdPath !== undefined && s.aggregateIdHeader !== undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['aggregateIdHeader'],
      message: 'set either aggregateIdPath or aggregateIdHeader, not both',
    });
  }
  if (s.correlationIdPath !== undefined && s.correlationIdHeader !== undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['correlationIdHeader'],
      message: 'set either correlationIdPath or correlationIdHeader, not both',
    });
  }
  const natural = s.type === 'http' && s.auth !== undefined && SCHEMES_WITH_EVENT_TYPE.has(s.auth.scheme);
  if (templateUses(s.topic, 'eventType') && s.eventTypePath === undefined && !fromHeader && !natural) {
    const why =
      s.type === 'amqp'
        ? 'an AMQP message carries no event type of its own'
        : 'nothing would give the message an event type';
    ctx.addIssue({
      code: 'custom',
      path: ['topic'],
      message: `uses {{ eventType }} but the source sets neither eventTypePath nor eventTypeFromHeader (${why}); set one, or use {{ source }}`,
    });
  }
}

const httpSourceSchema = z
  .strictObject({
    type: z.literal('http'),
    ...sourceCommon,
    topic: sourceTopic(defaultSourceTopicTemplate('http')),
    path: z
      .string()
      .regex(URL_SEGMENT, 'must be one URL path segment (letters, digits, ".", "-", "_", "~"), without "/"')
      .optional()
      .describe("Path under inbox.basePath. Default: the source's name."),
    auth: authSchema.describe(
      'How requests are authenticated, on the raw body; { scheme: none } to opt out.',
    ),
  })
  .superRefine(checkSource);

const amqpSourceSchema = z
  .strictObject({
    type: z.literal('amqp'),
    ...sourceCommon,
    topic: sourceTopic(defaultSourceTopicTemplate('amqp')),
    url: url(['amqp', 'amqps'], 'AMQP').describe('Broker URL (amqp:// or amqps://), for the local consumer.'),
    queue: text().describe('Queue to consume.'),
    prefetch: int(1, 65_535).default(10).describe('Unacknowledged messages in flight. Default 10.'),
  })
  .superRefine(checkSource);

const kafkaSourceSchema = z
  .strictObject({
    type: z.literal('kafka'),
    ...sourceCommon,
    topic: sourceTopic(defaultSourceTopicTemplate('kafka')),
    brokers: z
      .array(z.string().regex(KAFKA_BROKER, 'must be host:port'))
      .min(1)
      .describe('Bootstrap brokers, host:port.'),
    topics: stringList().describe('Kafka topics to consume.'),
    groupId: text().optional().describe('Consumer group. Default queuebox-{name}.'),
  })
  .superRefine(checkSource);

const natsSourceSchema = z
  .strictObject({
    type: z.literal('nats'),
    ...sourceCommon,
    topic: sourceTopic(defaultSourceTopicTemplate('nats')),
    servers: stringList().describe('NATS servers, e.g. nats://127.0.0.1:4222.'),
    stream: text().describe('JetStream stream.'),
    durable: text().optional().describe('Durable consumer name. Default queuebox-{name}.'),
    subject: text()
      .optional()
      .describe('Filter subject of the consumer. Default: every subject of the stream.'),
    batchSize: int(1, 1000).default(100).describe('Messages pulled per fetch. Default 100.'),
  })
  .superRefine(checkSource);

const sqsSourceSchema = z
  .strictObject({
    type: z.literal('sqs'),
    ...sourceCommon,
    topic: sourceTopic(defaultSourceTopicTemplate('sqs')),
    queueUrl: sqsQueueUrl().describe(
      'Queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>); on AWS its ARN is derived from it.',
    ),
    ...awsClientFields,
    batchSize: int(1, 10)
      .default(10)
      .describe(
        'Local consumer: messages per ReceiveMessage (on AWS: aws.sources.<name>.batchSize). Default 10.',
      ),
    waitTimeSeconds: int(0, 20)
      .default(20)
      .describe('Local consumer: long-poll wait, in seconds. Default 20.'),
  })
  .superRefine(checkSource);

const sourceSchema = z.discriminatedUnion('type', [
  httpSourceSchema,
  amqpSourceSchema,
  kafkaSourceSchema,
  natsSourceSchema,
  sqsSourceSchema,
]);

/** Source types. */
export const SOURCE_TYPES = ['http', 'amqp', 'kafka', 'nats', 'sqs'] as const;

/** The default correlation-id header of a source that configures neither a correlation path nor a header. */
export const DEFAULT_CORRELATION_ID_HEADER = 'X-Correlation-Id';

// Defaults that depend on the source's name, or on another key, are filled once the entry is valid.
function withSourceDefaults(sourceName: string, s: z.output<typeof sourceSchema>) {
  const correlationIdHeader =
    s.correlationIdHeader ?? (s.correlationIdPath === undefined ? DEFAULT_CORRELATION_ID_HEADER : undefined);
  switch (s.type) {
    case 'http':
      return { ...s, correlationIdHeader, path: s.path ?? sourceName };
    case 'kafka':
      return { ...s, correlationIdHeader, groupId: s.groupId ?? `queuebox-${sourceName}` };
    case 'nats':
      return { ...s, correlationIdHeader, durable: s.durable ?? `queuebox-${sourceName}` };
    default:
      return { ...s, correlationIdHeader };
  }
}

const sourcesSchema = z
  .record(name(), sourceSchema)
  .transform((sources) =>
    Object.fromEntries(Object.entries(sources).map(([key, s]) => [key, withSourceDefaults(key, s)])),
  );

// ---------------------------------------------------------------------------------------------------------------
// destinations

const destinationCommon = {
  transform: transformSchema.optional().describe('Runs after the route transform, before publishing.'),
  maxAttempts: int(1).optional().describe('Attempts for rows routed here. Default outbox.maxAttempts.'),
  backoff: z
    .strictObject({
      baseMs: int(1).optional().describe('Default outbox.backoff.baseMs.'),
      maxMs: int(1).optional().describe('Default outbox.backoff.maxMs.'),
    })
    .optional()
    .describe('Overrides outbox.backoff for rows routed here.'),
};

const httpDestinationSchema = z.strictObject({
  type: z.literal('http'),
  ...destinationCommon,
  url: url(['http', 'https'], 'HTTP').describe('Endpoint receiving the message body.'),
  method: z.enum(['POST', 'PUT', 'PATCH']).default('POST').describe('Default POST.'),
  headers: z
    .record(headerName(), z.string())
    .default({})
    .describe('Extra request headers; values may be secret:// or env:// references.'),
  timeoutMs: int(1, 900_000)
    .default(15_000)
    .describe('Request timeout, in ms. Default 15000 (Standard Webhooks recommends 15–30 s).'),
  signing: z
    .strictObject({
      scheme: z.literal('standard-webhooks'),
      secrets: standardWebhooksSecrets(
        'Signing secrets (whsec_<base64>, at least 24 bytes each); each signs, so receivers can rotate.',
      ),
    })
    .optional()
    .describe('Sign deliveries (webhook-id, webhook-timestamp, webhook-signature).'),
  retryableStatuses: z
    .array(int(400, 499))
    .default([])
    .describe('4xx statuses to retry instead of dead-lettering (408, 425, 429 always retry). Default [].'),
  maxConcurrency: int(1, 1000).default(16).describe('Requests in flight to this destination. Default 16.'),
});

const rabbitmqDestinationSchema = z.strictObject({
  type: z.literal('rabbitmq'),
  ...destinationCommon,
  url: url(['amqp', 'amqps'], 'AMQP').describe('Broker URL.'),
  exchange: z.string().describe('Exchange to publish to ("" is the default exchange).'),
  routingKey: template(DESTINATION_TEMPLATE_PLACEHOLDERS, { allowEmpty: true })
    .default('{{ topic }}')
    .describe('Routing key template with {{ topic }} and {{ key }}. Default {{ topic }}.'),
  persistent: z.boolean().default(true).describe('Publish persistent messages. Default true.'),
});

const kafkaDestinationSchema = z.strictObject({
  type: z.literal('kafka'),
  ...destinationCommon,
  brokers: z
    .array(z.string().regex(KAFKA_BROKER, 'must be host:port'))
    .min(1)
    .describe('Bootstrap brokers, host:port.'),
  topic: template(DESTINATION_TEMPLATE_PLACEHOLDERS)
    .default('{{ topic }}')
    .describe('Kafka topic template with {{ topic }} and {{ key }}. Default {{ topic }}.'),
  clientId: text().optional().describe('Kafka client id. Default chosen by the publisher.'),
});

const natsDestinationSchema = z.strictObject({
  type: z.literal('nats'),
  ...destinationCommon,
  servers: stringList().describe('NATS servers, e.g. nats://127.0.0.1:4222.'),
  subject: template(DESTINATION_TEMPLATE_PLACEHOLDERS)
    .default('{{ topic }}')
    .describe('Subject template with {{ topic }} and {{ key }}. Default {{ topic }}.'),
  jetstream: z.boolean().default(true).describe('Publish through JetStream and await its ack. Default true.'),
});

const sqsDestinationSchema = z.strictObject({
  type: z.literal('sqs'),
  ...destinationCommon,
  queueUrl: sqsQueueUrl().describe(
    'Queue URL; a name ending in .fifo is a FIFO queue (key → MessageGroupId).',
  ),
  ...awsClientFields,
  messageGroupId: messageGroupId(),
  maxMessageBytes: maxMessageBytes('queue'),
});

const snsDestinationSchema = z.strictObject({
  type: z.literal('sns'),
  ...destinationCommon,
  topicArn: z
    .string()
    .regex(SNS_TOPIC_ARN, 'must be the ARN of an SNS topic (arn:aws:sns:<region>:<account>:<name>)')
    .describe('Topic ARN; a name ending in .fifo is a FIFO topic (key → MessageGroupId).'),
  ...awsClientFields,
  messageGroupId: messageGroupId(),
  maxMessageBytes: maxMessageBytes('topic'),
});

const eventBridgeDestinationSchema = z.strictObject({
  type: z.literal('eventbridge'),
  ...destinationCommon,
  eventBus: z
    .string()
    .regex(EVENT_BUS, 'must be an event bus name or an event bus ARN')
    .default('default')
    .describe("Event bus name or ARN. Default default (the account's default bus)."),
  source: z
    .string()
    .min(1)
    .max(256)
    .refine((v) => !/^aws\./i.test(v), 'must not start with "aws." (reserved for AWS services)')
    .describe("The events' Source, e.g. com.example.orders."),
  detailType: template(DESTINATION_TEMPLATE_PLACEHOLDERS)
    .default('{{ topic }}')
    .describe('DetailType template with {{ topic }} and {{ key }}. Default {{ topic }}.'),
  ...awsClientFields,
});

const destinationSchema = z.discriminatedUnion('type', [
  httpDestinationSchema,
  rabbitmqDestinationSchema,
  kafkaDestinationSchema,
  natsDestinationSchema,
  sqsDestinationSchema,
  snsDestinationSchema,
  eventBridgeDestinationSchema,
]);

/** Destination types. */
export const DESTINATION_TYPES = ['http', 'rabbitmq', 'kafka', 'nats', 'sqs', 'sns', 'eventbridge'] as const;

// ---------------------------------------------------------------------------------------------------------------
// routes, aws, retention

const routeSchema = z.strictObject({
  match: z
    .string()
    .superRefine((pattern, ctx) => {
      const problem = topicPatternProblem(pattern);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    })
    .describe('Topic pattern: dot-separated segments, "*" one segment, "#" zero or more.'),
  destination: text().describe('Name of a configured destination.'),
  transform: transformSchema.optional().describe('Runs before the destination transform.'),
});

function functionSchema(timeoutSeconds: number, maxTimeoutSeconds = LAMBDA_MAX_TIMEOUT_SECONDS) {
  return z.strictObject({
    timeoutSeconds: int(1, maxTimeoutSeconds)
      .default(timeoutSeconds)
      .describe(`Function timeout, in seconds. Default ${timeoutSeconds}; at most ${maxTimeoutSeconds}.`),
    memoryMb: int(128, 10_240).default(512).describe('Function memory, in MB. Default 512.'),
    reservedConcurrency: z
      .union([int(1, 1000), z.literal(false)])
      .optional()
      .describe(
        'Reserved concurrency: the most instances at once (each holds up to 2 database connections). Default 2 for outboxTick and relayTick, 1 for maintenanceTick, natsSourceTick and migrate, none otherwise; false reserves none (accounts must keep 100 unreserved).',
      ),
  });
}

function tickSchema(timeoutSeconds: number, rateMinutes: number) {
  return functionSchema(timeoutSeconds).extend({
    rateMinutes: int(1, 1440)
      .default(rateMinutes)
      .describe(`Minutes between scheduled ticks (wake-ups come in between). Default ${rateMinutes}.`),
  });
}

// Deployment settings: infra/ reads them when it plans the install; the local runtime and the functions accept
// them (one file serves every runtime) and ignore them.

const arnOf = (service: string, what: string) =>
  z
    .string()
    .regex(new RegExp(`^arn:aws[a-z-]*:${service}:[a-z0-9-]+:\\d{12}:.+`), `must be the ARN of ${what}`);

const secretArn = () => arnOf('secretsmanager', 'a Secrets Manager secret');

/** Where a Kafka or Amazon MQ event source mapping finds its credentials (`aws.sources.<name>.auth.type`). */
export const BROKER_AUTH_TYPES = [
  'none',
  'iam',
  'sasl-scram-512',
  'sasl-scram-256',
  'sasl-plain',
  'basic',
  'mtls',
] as const;
/** One of {@link BROKER_AUTH_TYPES}. */
export type BrokerAuthType = (typeof BROKER_AUTH_TYPES)[number];

const awsNetworkSchema = z.strictObject({
  functionsInVpc: z
    .boolean()
    .optional()
    .describe(
      'Run the functions in a VPC (with NAT for their egress). Default: false with Aurora, which the functions reach through the RDS Data API over HTTPS (no NAT, nothing billed by the hour); true with an existing database (aws.database.secretArn), which needs a connection.',
    ),
  nat: z
    .enum(['ec2', 'managed', 'none'])
    .default('ec2')
    .describe(
      'NAT of a created VPC (functions in a VPC only): ec2, one t4g.nano fck-nat instance per AZ (cheap); managed: NAT Gateways; none. Default ec2.',
    ),
  azs: int(2, 6).default(2).describe('Availability zones of the created VPC. Default 2 (Aurora needs 2).'),
  existing: z
    .strictObject({
      privateSubnetIds: z.array(z.string().regex(/^subnet-[0-9a-f]+$/, 'must be a subnet id')).min(1),
      securityGroupIds: z.array(z.string().regex(/^sg-[0-9a-f]+$/, 'must be a security group id')).min(1),
    })
    .optional()
    .describe('Run the functions in subnets you already have (with their own egress) instead of a new VPC.'),
});

const auroraSchema = z
  .strictObject({
    minAcu: z
      .number()
      .min(0)
      .max(256)
      .multipleOf(0.5)
      .default(0)
      .describe('Smallest capacity; 0 lets the database pause when nothing connects. Default 0.'),
    maxAcu: z.number().min(1).max(256).multipleOf(0.5).default(4).describe('Largest capacity. Default 4.'),
    pauseAfterMinutes: int(5, 1440)
      .default(5)
      .describe('Minutes without connections before a database with minAcu 0 pauses. Default 5.'),
    version: z
      .string()
      .regex(/^\d+(\.\d+)?$/, 'must be a version such as 17 or 16.4')
      .default('17')
      .describe('Aurora PostgreSQL engine version. Default 17.'),
    idleSessionTimeoutSeconds: int(0, 86_400)
      .default(60)
      .describe(
        'PostgreSQL idle_session_timeout: closes connections that frozen Lambda environments keep open, so the database can pause. 0 turns it off. Default 60.',
      ),
  })
  .superRefine((a, ctx) => {
    if (a.maxAcu < a.minAcu)
      ctx.addIssue({ code: 'custom', path: ['maxAcu'], message: 'must be at least minAcu' });
  });

const awsDatabaseSchema = z.strictObject({
  secretArn: secretArn()
    .optional()
    .describe(
      'Existing PostgreSQL or SQL Server: a secret whose JSON holds the connection URL. Default: Aurora.',
    ),
  urlKey: text().default('url').describe('JSON key of the connection URL in secretArn. Default url.'),
  provider: z
    .enum(['postgres', 'sqlserver'])
    .optional()
    .describe('Provider of the existing database. Default: database.provider, else postgres.'),
  aurora: auroraSchema
    .prefault({})
    .describe('Aurora Serverless v2 PostgreSQL, created when secretArn is absent.'),
});

const awsSourceSchema = z.strictObject({
  mskClusterArn: arnOf('kafka', 'an MSK cluster')
    .optional()
    .describe(
      'Kafka source: consume from this MSK cluster. Default: self-managed Kafka at the source brokers.',
    ),
  mqBrokerArn: arnOf('mq', 'an Amazon MQ broker')
    .optional()
    .describe('AMQP source: the Amazon MQ for RabbitMQ broker holding the queue. Required for AMQP sources.'),
  auth: z
    .strictObject({
      type: z.enum(BROKER_AUTH_TYPES).describe('How the event source mapping authenticates to the broker.'),
      secretArn: secretArn()
        .optional()
        .describe('Secret with the credentials (every type but none and iam).'),
      kmsKeyArn: arnOf('kms', 'a KMS key')
        .optional()
        .describe(
          'Customer-managed KMS key encrypting secretArn: infra grants kms:Decrypt through Secrets Manager. Required for MSK SASL/SCRAM (MSK refuses secrets under the default key).',
        ),
    })
    .optional()
    .describe(
      'Default: iam for MSK, none for self-managed Kafka; Amazon MQ needs { type: basic, secretArn }.',
    ),
  virtualHost: text().default('/').describe('Amazon MQ virtual host. Default /.'),
  batchSize: int(1, 10_000)
    .default(100)
    .describe('Records per invocation. Default 100 (an SQS FIFO queue allows at most 10).'),
  batchWindowSeconds: int(0, 300)
    .default(0)
    .describe('Longest wait to fill a batch, in seconds. Default 0 (Lambda default: 0.5 s for Kafka).'),
  startingPosition: z
    .enum(['LATEST', 'TRIM_HORIZON'])
    .default('LATEST')
    .describe('Kafka: where a new consumer group starts. Default LATEST.'),
  enabled: z.boolean().default(true).describe('Whether the mapping polls. Default true.'),
  inVpc: z
    .boolean()
    .default(true)
    .describe('Self-managed Kafka: poll from the install VPC (private subnets, via NAT). Default true.'),
});

const awsSchema = z.strictObject({
  functions: z
    .strictObject({
      // The safety ticks: wake-ups (inbox → relay → outbox, the client's createOutboxWaker) and deferred ticks start
      // the drains; a periodic tick only catches what no wake-up announced. Each one wakes a paused Aurora.
      outboxTick: tickSchema(60, 360).prefault({}),
      relayTick: tickSchema(60, 360).prefault({}),
      natsSourceTick: tickSchema(60, 1).prefault({}),
      maintenanceTick: tickSchema(300, 1440).prefault({}),
      inboxHttp: functionSchema(29, API_GATEWAY_MAX_TIMEOUT_SECONDS).prefault({}),
      adminHttp: functionSchema(29, API_GATEWAY_MAX_TIMEOUT_SECONDS).prefault({}),
      kafkaSource: functionSchema(60).prefault({}),
      amqpSource: functionSchema(60).prefault({}),
      sqsSource: functionSchema(60).prefault({}),
      migrate: functionSchema(300).prefault({}),
    })
    .prefault({}),
  alarms: z
    .strictObject({
      oldestPendingAgeSeconds: int(1)
        .default(900)
        .describe('Alarm when the oldest pending row of either table is older than this. Default 900.'),
      email: z
        .array(z.email('must be an email address'))
        .default([])
        .describe('Addresses subscribed to the alarm topic (each confirms once). Default none.'),
    })
    .prefault({}),
  network: awsNetworkSchema
    .prefault({})
    .describe('Where the functions run: outside any VPC (default with Aurora), a new VPC, or your subnets.'),
  dashboard: z
    .boolean()
    .default(false)
    .describe(
      'Create a CloudWatch dashboard ($3/month beyond the first three of an account). Default false.',
    ),
  database: awsDatabaseSchema
    .prefault({})
    .describe(
      'The database on AWS: Aurora (default) or an existing one; replaces the database section there.',
    ),
  sources: z
    .record(z.string().regex(NAME_PATTERN, 'must be the name of a configured source'), awsSourceSchema)
    .default({})
    .describe('Event source mapping settings per Kafka, AMQP or SQS source.'),
  secrets: z
    .strictObject({
      external: z
        .array(text())
        .default([])
        .describe('secret:// names that already exist in Secrets Manager: infra grants read access only.'),
      kmsKeyArns: z
        .array(arnOf('kms', 'a KMS key'))
        .default([])
        .describe(
          'Customer-managed KMS keys of secrets the functions read (the existing database secret, external ones): infra grants kms:Decrypt through Secrets Manager.',
        ),
    })
    .prefault({}),
});

const retentionSchema = z.strictObject({
  keepSentHours: int(0)
    .default(168)
    .describe(
      'Delete sent outbox and processed inbox rows older than this; 0 keeps them. Default 168 (7 days).',
    ),
  keepDeadHours: int(0)
    .default(720)
    .describe('Delete dead rows older than this; 0 keeps them. Default 720 (30 days).'),
  batchSize: int(1, 10_000).default(1000).describe('Rows deleted per statement. Default 1000.'),
});

/** Log levels, most verbose first. */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;

// ---------------------------------------------------------------------------------------------------------------
// the whole configuration

/**
 * The configuration schema (zod 4): keys, defaults and descriptions. Every object is strict, so an unknown key
 * anywhere is refused. Cross-section rules (routes name existing destinations, leases outlive function timeouts,
 * HTTP source paths are unique) are checked by `validateConfig`, which also reports every problem at once.
 */
export const configSchema = z.strictObject({
  database: databaseSchema.prefault({}).describe('Where the outbox and inbox tables live.'),
  http: httpSchema.prefault({}).describe('The local HTTP server.'),
  admin: adminSchema.prefault({}).describe('Admin API access.'),
  outbox: outboxSchema.prefault({}).describe('The outbox poller.'),
  inbox: inboxSchema.prefault({}).describe('HTTP ingestion and the relay.'),
  sources: sourcesSchema.prefault({}).describe('Inbox sources by name: http, amqp, kafka, nats or sqs.'),
  destinations: z
    .record(name(), destinationSchema)
    .prefault({})
    .describe('Destinations by name: http, rabbitmq, kafka, nats, sqs, sns or eventbridge.'),
  routes: z.array(routeSchema).default([]).describe('Topic pattern → destination; the first match wins.'),
  aws: awsSchema
    .prefault({})
    .describe('AWS deployment settings, read by infra/ at deploy time; accepted and ignored elsewhere.'),
  retention: retentionSchema.prefault({}).describe('Clean-up of finished rows by the maintenance tick.'),
  logLevel: z.enum(LOG_LEVELS).default('info').describe('debug | info | warn | error. Default info.'),
});

/** The validated configuration, with every default filled in. */
export type QueueBoxConfig = z.output<typeof configSchema>;
/** What a YAML file (plus environment overlay) may contain before defaults are applied. */
export type QueueBoxConfigInput = z.input<typeof configSchema>;

export type HttpConfig = QueueBoxConfig['http'];
export type AdminConfig = QueueBoxConfig['admin'];
export type OutboxConfig = QueueBoxConfig['outbox'];
export type BackoffConfig = OutboxConfig['backoff'];
export type InboxConfig = QueueBoxConfig['inbox'];
export type RelayConfig = InboxConfig['relay'];

/** Any inbox source, discriminated by `type`. */
export type SourceConfig = QueueBoxConfig['sources'][string];
export type HttpSourceConfig = Extract<SourceConfig, { type: 'http' }>;
export type AmqpSourceConfig = Extract<SourceConfig, { type: 'amqp' }>;
export type KafkaSourceConfig = Extract<SourceConfig, { type: 'kafka' }>;
export type NatsSourceConfig = Extract<SourceConfig, { type: 'nats' }>;
export type SqsSourceConfig = Extract<SourceConfig, { type: 'sqs' }>;
export type SourceType = SourceConfig['type'];
export type SourceMode = SourceConfig['mode'];

/** An HTTP source's authentication, discriminated by `scheme`. */
export type SourceAuthConfig = HttpSourceConfig['auth'];
export type AuthScheme = SourceAuthConfig['scheme'];
export type HmacAuthConfig = Extract<SourceAuthConfig, { scheme: 'hmac' }>;

/** Any destination, discriminated by `type`. */
export type DestinationConfig = QueueBoxConfig['destinations'][string];
export type HttpDestinationConfig = Extract<DestinationConfig, { type: 'http' }>;
export type RabbitmqDestinationConfig = Extract<DestinationConfig, { type: 'rabbitmq' }>;
export type KafkaDestinationConfig = Extract<DestinationConfig, { type: 'kafka' }>;
export type NatsDestinationConfig = Extract<DestinationConfig, { type: 'nats' }>;
export type SqsDestinationConfig = Extract<DestinationConfig, { type: 'sqs' }>;
export type SnsDestinationConfig = Extract<DestinationConfig, { type: 'sns' }>;
export type EventBridgeDestinationConfig = Extract<DestinationConfig, { type: 'eventbridge' }>;
export type DestinationType = DestinationConfig['type'];
export type DestinationBackoffConfig = NonNullable<DestinationConfig['backoff']>;

export type RouteConfig = QueueBoxConfig['routes'][number];
export type AwsConfig = QueueBoxConfig['aws'];
export type AwsFunctionsConfig = AwsConfig['functions'];
export type FunctionConfig = AwsFunctionsConfig['inboxHttp'];
export type TickFunctionConfig = AwsFunctionsConfig['outboxTick'];
export type AwsAlarmsConfig = AwsConfig['alarms'];
/** `aws.network` after defaults (a new VPC over 2 AZs with fck-nat EC2 instances). */
export type AwsNetworkConfig = AwsConfig['network'];
/** `aws.database` after defaults (Aurora; `urlKey` url). */
export type AwsDatabaseConfig = AwsConfig['database'];
/** `aws.database.aurora` after defaults (0–4 ACU, pause after 5 min, PostgreSQL 17, idle sessions closed after 60 s). */
export type AuroraConfig = AwsDatabaseConfig['aurora'];
/** `aws.sources.<name>` after defaults (batch 100, window 0 s, LATEST, enabled, in the VPC, vhost `/`). */
export type AwsSourceConfig = AwsConfig['sources'][string];
export type RetentionConfig = QueueBoxConfig['retention'];
export type LogLevel = QueueBoxConfig['logLevel'];

/** The JSON Schema of the configuration file (for editors: yaml-language-server, VS Code). */
export function configJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(configSchema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
}
