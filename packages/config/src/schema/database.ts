import * as z from 'zod';
import { int, SCHEMA_IDENTIFIER, text } from './fields.ts';

// `database`: where the outbox and inbox tables live; the provider is inferred from the url.

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
      readonly listenUrl?: undefined;
      readonly dataApi?: undefined;
      readonly schema: string;
      readonly poolSize: number;
      readonly preparedStatements: boolean;
      readonly connectTimeoutMs: number;
      readonly queryTimeoutMs: number;
      readonly dataDir: string;
    }
  | {
      readonly provider: 'postgres' | 'sqlserver';
      readonly url: string;
      /** PostgreSQL only: where the wake-up listener connects instead of `url` (see the schema's description). */
      readonly listenUrl?: string | undefined;
      readonly dataApi?: undefined;
      readonly schema: string;
      readonly poolSize: number;
      readonly preparedStatements: boolean;
      readonly connectTimeoutMs: number;
      readonly queryTimeoutMs: number;
      readonly dataDir: string;
    }
  | {
      readonly provider: 'postgres';
      readonly url?: undefined;
      readonly listenUrl?: undefined;
      readonly dataApi: DataApiConfig;
      readonly schema: string;
      readonly poolSize: number;
      readonly preparedStatements: boolean;
      readonly connectTimeoutMs: number;
      readonly queryTimeoutMs: number;
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

/** Engines of an RDS database secret, by the provider whose URL they make. */
const SECRET_ENGINES: Readonly<Record<string, 'postgres' | 'sqlserver'>> = {
  postgres: 'postgres',
  'aurora-postgresql': 'postgres',
  // AWS's SQL Server rotation function wants `sqlserver`; RDS's own secrets name the edition.
  sqlserver: 'sqlserver',
  'sqlserver-ee': 'sqlserver',
  'sqlserver-se': 'sqlserver',
  'sqlserver-ex': 'sqlserver',
  'sqlserver-web': 'sqlserver',
};

/**
 * `database.url` given as an RDS database secret — the JSON that RDS managed rotation and AWS's rotation functions
 * keep up to date: `{"engine":"postgres","host":…,"port":5432,"username":…,"password":…,"dbname":…}` — read as the
 * connection URL it describes (`postgres://user:password@host:port/dbname?sslmode=verify-full`, or `sqlserver://…`
 * for a `sqlserver` or `sqlserver-*` engine; user, password and database percent-encoded; no engine: postgres). A JSON object that is not such a secret
 * is refused with a message that quotes none of it. Any other text is left as it is.
 */
function databaseSecretUrl(value: string | undefined, ctx: z.RefinementCtx): string | undefined {
  if (value === undefined || !value.trimStart().startsWith('{')) return value;
  let secret: unknown;
  try {
    secret = JSON.parse(value);
  } catch {
    return value;
  }
  if (typeof secret !== 'object' || secret === null || Array.isArray(secret)) return value;
  const fields = secret as Readonly<Record<string, unknown>>;
  const textOf = (key: string) =>
    typeof fields[key] === 'string' && fields[key] !== '' ? fields[key] : undefined;
  const host = textOf('host');
  const username = textOf('username');
  const password = typeof fields.password === 'string' ? fields.password : undefined;
  const engine = textOf('engine') ?? 'postgres';
  const provider = SECRET_ENGINES[engine];
  const port = fields.port === undefined ? undefined : Number(fields.port);
  const problem =
    host === undefined || username === undefined || password === undefined
      ? 'is a JSON object but not a database secret: it needs host, username and password (as RDS keeps them), or use secret://name#key for a key that holds a URL'
      : provider === undefined
        ? `is a database secret of engine ${JSON.stringify(engine).slice(0, 40)}; QueueBox runs on PostgreSQL (postgres, aurora-postgresql) or SQL Server (sqlserver-*)`
        : port !== undefined && !(Number.isInteger(port) && port > 0 && port < 65536)
          ? 'is a database secret whose port is not a port number'
          : undefined;
  if (problem !== undefined || host === undefined || username === undefined || password === undefined) {
    ctx.addIssue({ code: 'custom', message: problem ?? 'is not a database secret' });
    return z.NEVER;
  }
  const dbname = textOf('dbname');
  const hostPart = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  const where = `${encodeURIComponent(username)}:${encodeURIComponent(password)}@${hostPart}${port === undefined ? '' : `:${port}`}/${dbname === undefined ? '' : encodeURIComponent(dbname)}`;
  // TLS, verified, as infra's Aurora URL asks: RDS expects it (and may refuse a plain connection as class 28). The
  // RDS CA is in the functions' NODE_EXTRA_CA_CERTS; elsewhere, give Node the RDS CA bundle the same way. SQL
  // Server URLs encrypt and verify by default (store-sqlserver's connection-string.ts).
  return provider === 'sqlserver' ? `sqlserver://${where}` : `postgres://${where}?sslmode=verify-full`;
}

export const databaseSchema = z
  .strictObject({
    provider: z
      .enum(DATABASE_PROVIDERS)
      .optional()
      .describe('postgres | sqlserver | pglite. Default: inferred from url, or pglite when there is no url.'),
    // A transform, not a preprocess: the value stays text to the environment overlay (QUEUEBOX_DATABASE__URL is
    // taken as written, never read as YAML, which would cut it at ` #`).
    url: text()
      .optional()
      .transform(databaseSecretUrl)
      .describe(
        'Connection string (postgres://, postgresql://, sqlserver:// or mssql://), usually env:// or secret://; or an RDS database secret (secret://name without #key: its JSON host, port, username, password, dbname and engine, as managed rotation keeps them).',
      ),
    listenUrl: text()
      .optional()
      .describe(
        "PostgreSQL over url: a postgres:// URL of the same database for the local runtime's LISTEN/NOTIFY wake-up listener, when url goes through a pooler in transaction mode (PgBouncer), which drops notifications: a direct or session-mode one. One connection. Default: url.",
      ),
    schema: z
      .string()
      .regex(
        SCHEMA_IDENTIFIER,
        'must be an identifier: a letter or "_", then letters, digits or "_" (at most 63), not starting with pg_ (PostgreSQL reserves it) and not information_schema (pg_dump leaves it out)',
      )
      .default('queuebox')
      .describe('Database schema holding the outbox and inbox tables. Default queuebox.'),
    poolSize: int(1, 1000).default(10).describe('Most connections per process. Default 10; at most 1000.'),
    preparedStatements: z
      .boolean()
      .default(true)
      .describe(
        "PostgreSQL over url: run the outbox claims (the claim of unkeyed rows and the whole, keyed claim), markSent and the inbox group commit's insert as named prepared statements (planned once per connection, guarded against a stale plan). Set false behind a pooler that pins sessions holding prepared statements (RDS Proxy) or drops them. Default true.",
      ),
    connectTimeoutMs: int(100, 600_000)
      .default(30_000)
      .describe(
        "PostgreSQL over url: longest wait to open a connection (or for a free one in the pool), in ms; SQL Server: mssql's connectionTimeout (a connectTimeout in the url wins). Above the ~15 s a paused Aurora Serverless v2 takes to resume. Default 30000; at most 600000 (10 min).",
      ),
    queryTimeoutMs: int(0, 3_600_000)
      .default(30_000)
      .describe(
        "PostgreSQL over url: longest wait for a statement's answer, in ms; then it fails as an outage and its connection is dropped. SQL Server: mssql's requestTimeout (a requestTimeout in the url wins). 0 waits without limit. Migrations have none. Default 30000; at most 3600000 (1 h).",
      ),
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
          .describe(
            'Longest wait per call while a paused cluster resumes, in ms. Default 25000; at most 120000 (2 min).',
          ),
      })
      .optional()
      .describe(
        'Aurora PostgreSQL through the RDS Data API (HTTPS, no connection, no VPC) instead of url. Default: none.',
      ),
    dataDir: text().default('.queuebox/pglite').describe('PGlite data directory. Default .queuebox/pglite.'),
  })
  .superRefine((d, ctx) => {
    if (d.listenUrl !== undefined) {
      const listenScheme = urlScheme(d.listenUrl);
      const provider = d.provider ?? (d.url === undefined ? undefined : providerOfUrl(d.url));
      if (d.dataApi !== undefined || d.url === undefined || provider !== 'postgres') {
        ctx.addIssue({
          code: 'custom',
          path: ['listenUrl'],
          message:
            'is only for PostgreSQL over database.url (the wake-up listener of a pooled url); remove it: SQL Server and the Data API have no LISTEN, and PGlite listens on its own instance',
        });
      } else if (listenScheme === undefined || providerOfUrl(d.listenUrl) !== 'postgres') {
        ctx.addIssue({
          code: 'custom',
          path: ['listenUrl'],
          message: `must be a postgres:// or postgresql:// URL${listenScheme === undefined ? '' : `, not ${listenScheme}://`}`,
        });
      }
    }
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
        preparedStatements: d.preparedStatements,
        connectTimeoutMs: d.connectTimeoutMs,
        queryTimeoutMs: d.queryTimeoutMs,
        dataDir: d.dataDir,
      };
    }
    const provider = d.provider ?? (d.url === undefined ? 'pglite' : (providerOfUrl(d.url) ?? 'pglite'));
    if (provider === 'pglite') {
      const { schema, poolSize, preparedStatements, connectTimeoutMs, queryTimeoutMs, dataDir } = d;
      return { provider, schema, poolSize, preparedStatements, connectTimeoutMs, queryTimeoutMs, dataDir };
    }
    const { schema, poolSize, preparedStatements, connectTimeoutMs, queryTimeoutMs, dataDir } = d;
    return {
      provider,
      url: d.url ?? '',
      ...(d.listenUrl === undefined ? {} : { listenUrl: d.listenUrl }),
      schema,
      poolSize,
      preparedStatements,
      connectTimeoutMs,
      queryTimeoutMs,
      dataDir,
    };
  });
