import { resolve } from 'node:path';
import {
  type ConfigOrigins,
  type ConfigPath,
  DEFAULT_CONFIG_FILE,
  formatPath,
  isPlainObject,
  originOf,
  overlayEnv,
  parseReference,
  providerOfUrl,
  type QueueBoxConfig,
  type Reference,
  readConfigFile,
  resolveReferences,
  validateConfig,
} from '@queuebox/config';
import { ConfigError, type ConfigIssue, QueueBoxError } from '@queuebox/core';
import { FUNCTION_ENV } from '@queuebox/deploy-contract';
import { describeError, loadJsonata } from '@queuebox/transform';
import { deployDatabaseProvider } from './database-plan.ts';
import { STAND_IN_HOST } from './stand-ins.ts';

// Infra reads the same queuebox.yaml as the functions, at deploy time, where secret values are not at hand (and
// must not be: they belong in Secrets Manager, not in the deploying shell). So secret:// references are checked
// with stand-ins of the right shape, env:// references are read from the deploying environment (infra passes
// them on to the functions), and the database section is the one infra gives the functions. The deployment
// settings (`aws.*`) are keys of the same schema: nothing is split off before validation.

export { type DeployPlan, planDeployment } from './plan.ts';

/** A `secret://` or `env://` reference found in the document. */
export interface ReferenceUse {
  readonly path: ConfigPath;
  /** The reference as written, e.g. `secret://stripe#webhook`. */
  readonly text: string;
  readonly reference: Reference;
}

/** What infra knows about the configuration at deploy time. */
export interface DeployConfig {
  /** The file read, as named (`queuebox.yaml`, or the value of `QUEUEBOX_CONFIG`); `undefined` when none existed. */
  readonly file: string | undefined;
  /**
   * The validated configuration, deployment settings (`config.aws`) included. Values of secret:// references are
   * stand-ins; never ship them.
   */
  readonly config: QueueBoxConfig;
  /** The document (file plus `QUEUEBOX_` overlay, without `admin.token`), references as written. */
  readonly document: Record<string, unknown>;
  /** Every reference in {@link document}. */
  readonly references: readonly ReferenceUse[];
  /** `database.provider` as written in the file or environment, if it was. */
  readonly writtenProvider: string | undefined;
  readonly origins: ConfigOrigins;
}

/** Where {@link loadDeployConfig} reads from. */
export interface LoadDeployConfigOptions {
  /** Project root; relative file names start here. Default `process.cwd()`. */
  readonly root?: string;
  /** File to read. Default: `QUEUEBOX_CONFIG`, else `queuebox.yaml` in `root` (optional: absent means defaults). */
  readonly file?: string;
  /** The deploying environment (`QUEUEBOX_` overlay, `QUEUEBOX_CONFIG`, `env://` values). Default `process.env`. */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/** Walks a document and lists its `secret://` and `env://` strings. Pure. */
export function collectReferences(document: unknown): ReferenceUse[] {
  const found: ReferenceUse[] = [];
  const visit = (value: unknown, path: (string | number)[]): void => {
    if (typeof value === 'string') {
      const reference = parseReference(value);
      if (reference) found.push({ path, text: value, reference });
    } else if (Array.isArray(value)) {
      value.forEach((item, i) => {
        visit(item, [...path, i]);
      });
    } else if (isPlainObject(value)) {
      for (const [key, item] of Object.entries(value)) visit(item, [...path, key]);
    }
  };
  visit(document, []);
  return found;
}

function at(document: unknown, path: ConfigPath): unknown {
  let value = document;
  for (const segment of path) {
    if (!isPlainObject(value) && !Array.isArray(value)) return undefined;
    value = (value as Record<string | number, unknown>)[segment];
  }
  return value;
}

function setAt(document: unknown, path: ConfigPath, value: unknown): void {
  const parent = at(document, path.slice(0, -1)) as Record<string | number, unknown> | undefined;
  const last = path[path.length - 1];
  if (parent !== undefined && last !== undefined) parent[last] = value;
}

/**
 * A value of the shape the key at `path` expects, standing in for a secret during deploy-time validation: URLs
 * with the scheme their section needs, `user:password` for basic auth, plain text otherwise. Pure.
 */
export function secretStandIn(document: unknown, path: ConfigPath): string {
  const [section, entry] = path;
  const last = path[path.length - 1];
  const type = at(document, [section ?? '', entry ?? '', 'type']);
  if (last === 'url' && path.length === 3) {
    if (section === 'destinations' && type === 'http') return `https://${STAND_IN_HOST}/`;
    if (section === 'sources' || section === 'destinations') return `amqp://${STAND_IN_HOST}`;
  }
  if (section === 'sources' && path[2] === 'auth' && path[3] === 'secrets') {
    const scheme = at(document, ['sources', entry ?? '', 'auth', 'scheme']);
    if (scheme === 'basic') return 'secret:secret';
    if (scheme === 'standard-webhooks' || scheme === 'svix') return STANDARD_WEBHOOKS_STAND_IN;
  }
  if (section === 'destinations' && path[2] === 'signing' && path[3] === 'secrets') {
    return STANDARD_WEBHOOKS_STAND_IN;
  }
  return 'secret';
}

/**
 * The stand-in of a Standard Webhooks (or Svix) secret: `whsec_` and 32 bytes in base64, the shape the schema asks
 * for. With the plain `secret` stand-in (4 bytes decoded) the deploy refused every such source and signing
 * destination whose secret is a secret:// reference, which the README's own example is (an outside audit).
 */
const STANDARD_WEBHOOKS_STAND_IN = `whsec_${Buffer.from('queuebox deploy-time stand-in 32').toString('base64')}`;

const STAND_IN_DATABASE_URL = {
  postgres: 'postgres://queuebox@database.invalid:5432/queuebox',
  sqlserver: 'sqlserver://database.invalid:1433;database=queuebox',
} as const;

/**
 * Reads queuebox.yaml once for a deployment: the file, the deploying environment's `QUEUEBOX_` overlay, and
 * validation by packages/config (deployment settings `aws.*` included) with stand-ins for secrets. Throws
 * core's `ConfigError` listing every problem (paths and origins as `queuebox config check` prints them).
 */
export async function loadDeployConfig(options: LoadDeployConfigOptions = {}): Promise<DeployConfig> {
  const env = options.env ?? process.env;
  const root = options.root ?? process.cwd();
  // The variable that names the file for the functions names it for the deploy too.
  const fromEnv = env[FUNCTION_ENV.config];
  const named = options.file ?? (fromEnv === '' ? undefined : fromEnv);
  const display = named ?? DEFAULT_CONFIG_FILE;
  const file = await readConfigFile(resolve(root, display), display);
  if (file === undefined && named !== undefined) {
    throw new ConfigError([
      {
        path: '',
        message: `the configuration file ${display} does not exist`,
        origin: options.file !== undefined ? display : FUNCTION_ENV.config,
      },
    ]);
  }
  if (file !== undefined && file.issues.length > 0) throw new ConfigError(file.issues);

  const origins = new Map(file?.origins ?? []);
  const overlay = overlayEnv(file?.value ?? {}, env, origins);
  const document = overlay.value;
  // The admin API is behind IAM on AWS; a local bearer token (often a secret:// reference) is not shipped, nor
  // protectMetrics, which asks that token of the local /metrics (no function serves /metrics: CloudWatch has them).
  // Kept, it refused the deploy of a file that `config check` accepts.
  if (isPlainObject(document.admin)) {
    delete document.admin.token;
    delete document.admin.protectMetrics;
  }
  // The local runtime's wake-up listener: no function listens, and it is not shipped (config-plan.ts); an env:// or
  // secret:// of it would otherwise be read (or stood in for) at deploy.
  if (isPlainObject(document.database)) delete document.database.listenUrl;
  const writtenDatabase = document.database;
  const writtenProvider = providerWritten(writtenDatabase, env);
  const databaseIssues = databaseReferenceIssues(document, origins);

  // Validate what the functions will see: infra's database section, stand-ins for secrets, real env values.
  const candidate = structuredClone(document);
  // Read before validation, which needs the database section it decides; a wrong value is reported by it anyway.
  const aws = isPlainObject(document.aws) ? document.aws : {};
  const awsDatabase = isPlainObject(aws.database) ? aws.database : {};
  const provider = deployDatabaseProvider(
    {
      secretArn: typeof awsDatabase.secretArn === 'string' ? awsDatabase.secretArn : undefined,
      provider:
        awsDatabase.provider === 'postgres' || awsDatabase.provider === 'sqlserver'
          ? awsDatabase.provider
          : undefined,
    },
    writtenProvider,
  );
  candidate.database = {
    ...(isPlainObject(writtenDatabase) ? writtenDatabase : {}),
    provider,
    url: STAND_IN_DATABASE_URL[provider],
  };
  const references = collectReferences(document);
  const standIns = new Set<string>();
  for (const use of collectReferences(candidate)) {
    if (use.reference.kind !== 'secret') continue;
    setAt(candidate, use.path, secretStandIn(candidate, use.path));
    standIns.add(formatPath(use.path));
  }
  const resolved = await resolveReferences(candidate, {
    env,
    origins,
    secrets: {
      getSecret: async (name) => {
        throw new QueueBoxError(`secret ${name} is not read at deploy time`);
      },
    },
  });
  // A path already refused (an unresolved reference, a database reference) is not reported again by validation.
  const unresolved = new Set([...resolved.issues, ...databaseIssues].map((i) => i.path));
  const validation = validateConfig(resolved.value, origins, { defaultOrigin: file ? display : 'defaults' });
  const validationIssues = validation.ok
    ? []
    : validation.issues
        .filter((i) => !unresolved.has(i.path))
        .map((i) =>
          standIns.has(i.path)
            ? { ...i, message: `${i.message} (checked with a stand-in for its secret:// reference)` }
            : i,
        );
  // What the functions' start would refuse beyond the schema: JSONata that does not compile, a transform function
  // (no function registers any). Before, such a file deployed and then every function failed at its start (an
  // outside audit). `queuebox config check` runs the runtime's whole check (`checkServices`); infra does not import
  // it, because it would bundle the publishers and the stores into sst.config.ts.
  const serviceIssues = validation.ok ? await transformIssues(validation.config, origins) : [];
  const issues: ConfigIssue[] = [
    ...overlay.issues,
    ...databaseIssues,
    ...sqlServerWithoutDatabase(writtenProvider, awsDatabase, origins),
    ...resolved.issues,
    ...validationIssues,
    ...serviceIssues,
  ];
  if (issues.length > 0 || !validation.ok) throw new ConfigError(issues);
  return {
    file: file ? display : undefined,
    config: validation.config,
    document,
    references,
    writtenProvider,
    origins,
  };
}

/**
 * The database provider the file (or the deploying shell) names: `database.provider` as written, else the one its
 * `database.url` implies by its scheme (`sqlserver://` …), as the runtime infers it — read from the deploying
 * environment for an `env://` url that is set there. Before, only a written provider counted, so an existing SQL
 * Server named by its url was planned as PostgreSQL and every function refused the shipped file (an outside audit).
 */
function providerWritten(
  database: unknown,
  env: Readonly<Record<string, string | undefined>>,
): string | undefined {
  if (!isPlainObject(database)) return undefined;
  if (typeof database.provider === 'string') return database.provider;
  if (typeof database.url !== 'string') return undefined;
  const reference = parseReference(database.url);
  const url =
    reference === undefined ? database.url : reference.kind === 'env' ? env[reference.name] : undefined;
  return url === undefined ? undefined : providerOfUrl(url);
}

/**
 * SQL Server named in the file while the deploy would create Aurora PostgreSQL (no `aws.database.secretArn`): the
 * functions would run on another kind of database than the file says. Refused; before, the deploy planned Aurora
 * without a word.
 */
function sqlServerWithoutDatabase(
  writtenProvider: string | undefined,
  awsDatabase: Record<string, unknown>,
  origins: ConfigOrigins,
): ConfigIssue[] {
  if (writtenProvider !== 'sqlserver' || typeof awsDatabase.secretArn === 'string') return [];
  const origin = originOf(origins, ['database', 'provider']) ?? originOf(origins, ['database', 'url']);
  return [
    {
      path: 'database',
      message:
        'names SQL Server, but on AWS QueueBox creates an Aurora PostgreSQL cluster unless aws.database.secretArn names an existing database: set aws.database.secretArn (a Secrets Manager secret with the url, or an RDS database secret) to deploy on SQL Server, or remove the SQL Server provider and url from the file for AWS',
      ...(origin === undefined ? {} : { origin }),
    },
  ];
}

/** The keys of `database` that the deploy drops or decides itself: their references are never read. */
const DATABASE_KEYS_INFRA_DECIDES = new Set(['url', 'listenUrl', 'dataDir', 'dataApi', 'provider']);

/**
 * `env://` and `secret://` references under `database` in keys the functions are shipped as written (`schema`,
 * `queryTimeoutMs`, …): infra neither passes those variables on nor grants those secrets (the database section is
 * infra's), so every function would refuse its start. Refused at deploy; write the value, or set it with a
 * `QUEUEBOX_DATABASE__…` variable in the deploying shell.
 */
function databaseReferenceIssues(document: Record<string, unknown>, origins: ConfigOrigins): ConfigIssue[] {
  if (!isPlainObject(document.database)) return [];
  return collectReferences(document.database)
    .filter((use) => !DATABASE_KEYS_INFRA_DECIDES.has(String(use.path[0])))
    .map((use) => {
      const path: ConfigPath = ['database', ...use.path];
      const origin = originOf(origins, path);
      return {
        path: formatPath(path),
        message: `is ${use.reference.kind === 'env' ? 'an env://' : 'a secret://'} reference, which the functions cannot read: on AWS only database.url may be one (infra decides it), so write the value, or set it with a QUEUEBOX_DATABASE__… variable in the deploying shell`,
        ...(origin === undefined ? {} : { origin }),
      };
    });
}

/**
 * The transforms of the sources, routes and destinations that a function's start would refuse: a JSONata
 * expression that does not compile, and a `{ function: name }` transform, which only a program embedding the local
 * runtime can register (the Lambda functions register none).
 */
export async function transformIssues(
  config: QueueBoxConfig,
  origins: ConfigOrigins,
): Promise<ConfigIssue[]> {
  const found: { path: ConfigPath; transform: { jsonata?: string; function?: string } }[] = [];
  for (const [name, source] of Object.entries(config.sources)) {
    if (source.transform) found.push({ path: ['sources', name, 'transform'], transform: source.transform });
  }
  config.routes.forEach((route, i) => {
    if (route.transform) found.push({ path: ['routes', i, 'transform'], transform: route.transform });
  });
  for (const [name, destination] of Object.entries(config.destinations)) {
    if (destination.transform) {
      found.push({ path: ['destinations', name, 'transform'], transform: destination.transform });
    }
  }
  if (found.length === 0) return [];
  const compile = found.some((f) => f.transform.jsonata !== undefined) ? await loadJsonata() : undefined;
  const issues: ConfigIssue[] = [];
  for (const { path, transform } of found) {
    let message: string | undefined;
    if (transform.function !== undefined) {
      message = `names the transform function ${JSON.stringify(transform.function)}, but on AWS no function is registered (only a program that embeds the local runtime registers them): use a JSONata transform`;
    } else if (transform.jsonata !== undefined && compile !== undefined) {
      try {
        compile(transform.jsonata);
      } catch (error) {
        message = `the JSONata expression does not compile: ${describeError(error)}`;
      }
    }
    if (message === undefined) continue;
    const origin = originOf(origins, path);
    issues.push({ path: formatPath(path), message, ...(origin === undefined ? {} : { origin }) });
  }
  return issues;
}
