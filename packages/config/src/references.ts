import type { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { type ConfigIssue, QueueBoxError } from '@queuebox/core';
import type { z } from 'zod';
import { AWS_CLIENT_DEFAULTS } from './aws-clients.ts';
import { coerceText } from './coerce.ts';
import { type ConfigOrigins, type ConfigPath, formatPath, isPlainObject, originOf } from './paths.ts';
import { configSchema } from './schema.ts';
import { schemaAt } from './schema-walk.ts';

/** Reads secrets by name for `secret://` references. */
export interface SecretResolver {
  /**
   * The secret's text (for AWS Secrets Manager: its SecretString). Rejects when it cannot be read. With `fresh`, a
   * resolver that caches reads the secret anew (a rotation is seen at once) and caches what it read.
   */
  getSecret(name: string, options?: { readonly fresh?: boolean }): Promise<string>;
}

/** A parsed reference. */
export type Reference =
  | { readonly kind: 'secret'; readonly name: string; readonly jsonKey?: string | undefined }
  | { readonly kind: 'env'; readonly name: string };

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Parses `secret://name[#jsonKey]` or `env://NAME`; `undefined` for any other text (which is a plain value).
 * Throws nothing: a malformed reference comes back with an empty name, which resolution reports.
 */
export function parseReference(value: string): Reference | undefined {
  if (value.startsWith('secret://')) {
    const rest = value.slice('secret://'.length);
    const hash = rest.indexOf('#');
    return hash < 0
      ? { kind: 'secret', name: rest }
      : { kind: 'secret', name: rest.slice(0, hash), jsonKey: rest.slice(hash + 1) };
  }
  if (value.startsWith('env://')) return { kind: 'env', name: value.slice('env://'.length) };
  return undefined;
}

/** What resolution needs. */
export interface ResolveReferencesOptions {
  /** Variables for `env://` references. */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Reads `secret://` references; asked at most once per secret name per call. */
  readonly secrets: SecretResolver;
  /** Read every secret anew, past the resolver's cache (see `SecretResolver.getSecret`). Default false. */
  readonly freshSecrets?: boolean;
  /** Origins of the values, for issues. */
  readonly origins?: ConfigOrigins;
  /** Schema used to read resolved text as the kind a key expects. Default: the QueueBox schema. */
  readonly schema?: z.ZodType;
}

/** Resolved input, the formatted paths whose values came from references, and every resolution problem. */
export interface ResolvedReferences {
  readonly value: unknown;
  readonly references: Set<string>;
  readonly issues: ConfigIssue[];
}

/**
 * Replaces every `secret://` and `env://` string in `input` by the value it names. A resolved value is read as the
 * kind its key expects (`http.port: env://PORT` becomes a number). Problems (unset variable, unreadable secret,
 * missing JSON key) are returned as issues with path and origin, never thrown, and never quote a secret.
 */
export async function resolveReferences(
  input: unknown,
  options: ResolveReferencesOptions,
): Promise<ResolvedReferences> {
  const schema = options.schema ?? configSchema;
  const found: { path: ConfigPath; reference: Reference; text: string }[] = [];
  const collect = (value: unknown, path: (string | number)[]): void => {
    if (typeof value === 'string') {
      const reference = parseReference(value);
      if (reference) found.push({ path, reference, text: value });
    } else if (Array.isArray(value)) {
      value.forEach((item, i) => {
        collect(item, [...path, i]);
      });
    } else if (isPlainObject(value)) {
      for (const [key, item] of Object.entries(value)) collect(item, [...path, key]);
    }
  };
  collect(input, []);
  const output: unknown = found.length === 0 ? input : structuredClone(input);
  const references = new Set<string>();
  const issues: ConfigIssue[] = [];
  const fetched = new Map<string, Promise<string>>();
  const readSecret = (name: string): Promise<string> => {
    let pending = fetched.get(name);
    if (!pending) {
      pending =
        options.freshSecrets === true
          ? options.secrets.getSecret(name, { fresh: true })
          : options.secrets.getSecret(name);
      fetched.set(name, pending);
    }
    return pending;
  };

  await Promise.all(
    found.map(async ({ path, reference }) => {
      const fail = (message: string): void => {
        issues.push({ path: formatPath(path), message, origin: originOf(options.origins, path) });
      };
      let text: string;
      if (reference.kind === 'env') {
        if (!ENV_NAME.test(reference.name)) {
          fail(`env://${reference.name} is not a valid reference; use env://NAME`);
          return;
        }
        const value = options.env[reference.name];
        if (value === undefined) {
          fail(`refers to the environment variable ${reference.name}, which is not set`);
          return;
        }
        text = value;
      } else {
        const label = `secret://${reference.name}`;
        if (reference.name === '' || reference.jsonKey === '') {
          fail('is not a valid reference; use secret://name or secret://name#key');
          return;
        }
        let secret: string;
        try {
          secret = await readSecret(reference.name);
        } catch (error) {
          fail(`${label} could not be read: ${(error as Error).message ?? String(error)}`);
          return;
        }
        if (reference.jsonKey === undefined) {
          text = secret;
        } else {
          let parsed: unknown;
          try {
            parsed = JSON.parse(secret);
          } catch {
            fail(`${label} is not a JSON object, so it has no key "${reference.jsonKey}"`);
            return;
          }
          const field = isPlainObject(parsed) ? parsed[reference.jsonKey] : undefined;
          if (field === undefined || field === null || typeof field === 'object') {
            fail(
              isPlainObject(parsed)
                ? `${label} has no text value at key "${reference.jsonKey}"`
                : `${label} is not a JSON object, so it has no key "${reference.jsonKey}"`,
            );
            return;
          }
          text = String(field);
        }
      }
      if (text === '' && isDestinationHeader(path)) {
        // An unset credential exported as empty (`AUTHZ= APIKEY=`) would go out as an empty header on every request.
        fail(
          `${reference.kind === 'env' ? `env://${reference.name}` : `secret://${reference.name}${reference.jsonKey === undefined ? '' : `#${reference.jsonKey}`}`} is empty: the header would be sent with no value on every request; set it, or remove the header`,
        );
        return;
      }
      setAt(output, path, coerceText(text, schemaAt(schema, path, input), { flow: false }));
      references.add(formatPath(path));
    }),
  );
  return { value: output, references, issues };
}

/** Whether `path` is a static header value of a destination (`destinations.<name>.headers.<header>`). */
function isDestinationHeader(path: ConfigPath): boolean {
  return path.length === 4 && path[0] === 'destinations' && path[2] === 'headers';
}

function setAt(root: unknown, path: ConfigPath, value: unknown): void {
  let node = root as Record<string | number, unknown>;
  for (const segment of path.slice(0, -1)) node = node[segment] as Record<string | number, unknown>;
  const last = path[path.length - 1];
  if (last !== undefined) node[last] = value;
}

/** Options of {@link createSecretsManagerResolver}. */
export interface SecretsManagerResolverOptions {
  /**
   * An SDK client to read with (in tests: one whose middleware answers without a network). Default: a
   * `SecretsManagerClient` created on the first read, with {@link AWS_CLIENT_DEFAULTS}, `region` and `clientConfig`.
   */
  readonly client?: SecretsManagerClient;
  /** Region of the default client. Default: the SDK's (AWS_REGION). */
  readonly region?: string;
  /**
   * More settings of the default client, over `AWS_CLIENT_DEFAULTS` (e.g. `endpoint` and `credentials` in tests).
   * Default none.
   */
  readonly clientConfig?: Readonly<Record<string, unknown>>;
  /**
   * How long a value read stays cached, in seconds; a later read fetches it again, so a rotated secret is seen.
   * Default 300 (5 minutes: secrets here are read once per configuration load). 0 or less caches nothing.
   */
  readonly maxAgeSeconds?: number;
  /**
   * Milliseconds of a monotonic clock, for the values' age. Not the wall clock: stepped back (NTP, a resumed VM), it
   * kept a rotated secret cached for as long as the step. Default `performance.now`.
   */
  readonly now?: () => number;
}

/** Default of {@link SecretsManagerResolverOptions.maxAgeSeconds}. */
export const SECRET_CACHE_MAX_AGE_SECONDS = 300;

/** The client and command of a Secrets Manager read, once the SDK is loaded. */
interface SecretsManagerSdk {
  readonly client: SecretsManagerClient;
  readonly GetSecretValueCommand: typeof GetSecretValueCommand;
}

/**
 * Reads secrets from AWS Secrets Manager (GetSecretValue; SecretString, or SecretBinary as UTF-8), with the timeouts
 * of {@link AWS_CLIENT_DEFAULTS}. The SDK (`@aws-sdk/client-secrets-manager`) is imported and the client created on
 * the first read, so a configuration without `secret://` costs nothing. A value is cached for `maxAgeSeconds`
 * (default 5 minutes), so a rotated secret is read again; a failed read is not cached; a `fresh` read skips the cache
 * and refreshes it.
 *
 * The SDK is imported here, behind `await import(…)`, and not through Powertools Parameters' `SecretsProvider`
 * (which this replaced, with the same caching): that module imports the SDK statically, and the SDK is external to
 * the Lambda bundles (the runtime provides it), so esbuild, bundling without code splitting, hoisted that import to
 * the top of every bundle and every function loaded the Secrets Manager client at init (≈ 60 ms of CPU), secrets or
 * not (an outside audit; `scripts/check-bundles.ts` now fails on a top-level import of it).
 */
export function createSecretsManagerResolver(options: SecretsManagerResolverOptions = {}): SecretResolver {
  const maxAgeMs = (options.maxAgeSeconds ?? SECRET_CACHE_MAX_AGE_SECONDS) * 1000;
  const now = options.now ?? (() => performance.now());
  const cache = new Map<string, { readonly value: string | Uint8Array; readonly expiresAt: number }>();
  let sdk: Promise<SecretsManagerSdk> | undefined;
  const load = async (): Promise<SecretsManagerSdk> => {
    const { GetSecretValueCommand, SecretsManagerClient } = await import('@aws-sdk/client-secrets-manager');
    const client =
      options.client ??
      new SecretsManagerClient({
        ...AWS_CLIENT_DEFAULTS,
        ...(options.region ? { region: options.region } : {}),
        ...options.clientConfig,
      });
    return { client, GetSecretValueCommand };
  };
  const fetch = async (name: string): Promise<string | Uint8Array | undefined> => {
    sdk ??= load().catch((error: unknown) => {
      sdk = undefined;
      throw error;
    });
    const { client, GetSecretValueCommand } = await sdk;
    const result = await client.send(new GetSecretValueCommand({ SecretId: name }));
    // An empty SecretString counts as none (as Powertools read it): the binary, else no value.
    const value = result.SecretString ? result.SecretString : result.SecretBinary;
    if (value !== undefined && maxAgeMs > 0) cache.set(name, { value, expiresAt: now() + maxAgeMs });
    return value;
  };
  return {
    async getSecret(name, read) {
      const cached = read?.fresh === true ? undefined : cache.get(name);
      // Still valid at its expiry's very millisecond; read again after it.
      const value = cached !== undefined && cached.expiresAt >= now() ? cached.value : await fetch(name);
      if (typeof value === 'string') return value;
      if (value instanceof Uint8Array) return Buffer.from(value).toString('utf8');
      throw new QueueBoxError(`Secret ${name} has no value`, { context: { secret: name } });
    },
  };
}

/** A resolver over fixed values, for tests and local runs: `{ 'queuebox/admin': '{"token":"…"}' }`. */
export function createInMemorySecretResolver(secrets: Readonly<Record<string, string>>): SecretResolver {
  return {
    async getSecret(name) {
      if (!Object.hasOwn(secrets, name)) {
        throw new QueueBoxError(`Secret ${name} does not exist`, { context: { secret: name } });
      }
      return secrets[name] ?? '';
    },
  };
}
