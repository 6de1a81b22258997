import { ConfigError, type ConfigIssue } from '@queuebox/core';
import type { z } from 'zod';
import { closestMatch } from './did-you-mean.ts';
import { type ConfigOrigins, type ConfigPath, formatPath, isPlainObject, originOf } from './paths.ts';
import { attachProvenance } from './provenance.ts';
import { configSchema, type QueueBoxConfig } from './schema.ts';
import { knownKeys, schemaAt } from './schema-walk.ts';

/** Options of {@link validateConfig} and {@link parseConfig}. */
export interface ValidateOptions {
  /** Origin for issues whose value has none recorded (e.g. a default), such as the file that was read. */
  readonly defaultOrigin?: string;
  /** Formatted paths whose values came from references; `redactConfig` hides them. */
  readonly references?: Iterable<string>;
}

/** The outcome of validation: the configuration, or every problem found. */
export type ConfigValidation =
  | { readonly ok: true; readonly config: QueueBoxConfig }
  | { readonly ok: false; readonly issues: ConfigIssue[] };

type Issue = z.core.$ZodIssue;

function valueAt(root: unknown, path: ConfigPath): unknown {
  let value = root;
  for (const segment of path) {
    if (!isPlainObject(value) && !Array.isArray(value)) return undefined;
    value = (value as Record<string | number, unknown>)[segment];
  }
  return value;
}

const EXPECTED: Readonly<Record<string, string>> = {
  string: 'text',
  number: 'a number',
  int: 'a whole number',
  boolean: 'true or false',
  array: 'a list',
  object: 'a mapping',
  record: 'a mapping',
};

function describeValue(value: unknown): string {
  if (value === null) return 'empty (null)';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  if (typeof value === 'string') return 'text';
  if (typeof value === 'number') return Number.isInteger(value) ? 'a whole number' : 'a number';
  if (typeof value === 'boolean') return 'true/false';
  return typeof value;
}

// Only short enum-like words are quoted back; longer text might be a credential pasted into the wrong key.
function quoted(value: unknown): string {
  return typeof value === 'string' && value.length <= 40 && !value.includes('://')
    ? `"${value}"`
    : 'the value';
}

function hint(word: unknown, candidates: readonly string[]): string {
  if (typeof word !== 'string') return '';
  const match = closestMatch(word, candidates);
  return match !== undefined && match !== word ? ` (did you mean "${match}"?)` : '';
}

function oneOf(values: readonly unknown[]): string {
  return values.map((v) => String(v)).join(', ');
}

function describeIssue(
  issue: Issue,
  path: ConfigPath,
  input: unknown,
): { path: ConfigPath; message: string }[] {
  const value = valueAt(input, path);
  switch (issue.code) {
    case 'unrecognized_keys': {
      const known = knownKeys(schemaAt(configSchema, path, input) ?? configSchema, value);
      return issue.keys.map((key) => ({
        path: [...path, key],
        message: `unknown key "${key}"${hint(key, known)}`,
      }));
    }
    case 'invalid_union': {
      // A discriminated union whose `type`/`scheme` matches no option.
      if (issue.discriminator !== undefined && 'options' in issue && issue.errors.length === 0) {
        const options = (issue.options ?? []).map(String);
        const message =
          value === undefined
            ? `is required: one of ${oneOf(options)}`
            : `${quoted(value)} is not one of ${oneOf(options)}${hint(value, options)}`;
        return [{ path, message }];
      }
      return [{ path, message: issue.message }];
    }
    case 'invalid_value': {
      const options = issue.values.map(String);
      return [{ path, message: `${quoted(value)} is not one of ${oneOf(options)}${hint(value, options)}` }];
    }
    case 'invalid_type': {
      const expected = EXPECTED[issue.expected] ?? issue.expected;
      if (value === undefined) return [{ path, message: `is required (${expected})` }];
      return [{ path, message: `must be ${expected}, not ${describeValue(value)}` }];
    }
    case 'too_small': {
      const min = Number(issue.minimum);
      if (issue.origin === 'string') {
        return [{ path, message: min <= 1 ? 'must not be empty' : `must have at least ${min} characters` }];
      }
      if (issue.origin === 'array' || issue.origin === 'set') {
        return [{ path, message: `must list at least ${min} item${min === 1 ? '' : 's'}` }];
      }
      return [{ path, message: `must be at least ${min}${issue.inclusive === false ? ' (exclusive)' : ''}` }];
    }
    case 'too_big': {
      const max = Number(issue.maximum);
      if (issue.origin === 'string') return [{ path, message: `must have at most ${max} characters` }];
      if (issue.origin === 'array' || issue.origin === 'set') {
        return [{ path, message: `must list at most ${max} item${max === 1 ? '' : 's'}` }];
      }
      return [{ path, message: `must be at most ${max}` }];
    }
    case 'invalid_key': {
      const inner = issue.issues[0]?.message ?? 'is not a valid name';
      return [{ path, message: `name "${String(path[path.length - 1])}" ${inner}` }];
    }
    default:
      return [{ path, message: issue.message }];
  }
}

function toPath(path: readonly PropertyKey[]): (string | number)[] {
  return path.map((segment) => (typeof segment === 'number' ? segment : String(segment)));
}

const DEFAULTS = configSchema.parse({});

/**
 * The number at `path` when the input holds a usable one there, else the default: cross-section rules then run
 * even when an unrelated key of the same section is broken (that key is reported on its own).
 */
function numberAt(input: unknown, path: ConfigPath): number {
  const value = valueAt(input, path);
  return typeof value === 'number' && Number.isFinite(value) ? value : (valueAt(DEFAULTS, path) as number);
}

function entries(value: unknown): [string, Record<string, unknown>][] {
  if (!isPlainObject(value)) return [];
  return Object.entries(value).filter((e): e is [string, Record<string, unknown>] => isPlainObject(e[1]));
}

/** Rules that span sections (or entries of a record), checked on whatever parts of the input are usable. */
function crossChecks(
  input: unknown,
  origins: ConfigOrigins | undefined,
): { path: ConfigPath; message: string }[] {
  const found: { path: ConfigPath; message: string }[] = [];
  const root = isPlainObject(input) ? input : {};

  // Routes name existing destinations.
  const destinationNames = isPlainObject(root.destinations) ? Object.keys(root.destinations) : [];
  if (Array.isArray(root.routes)) {
    root.routes.forEach((route: unknown, i) => {
      if (!isPlainObject(route) || typeof route.destination !== 'string' || route.destination === '') return;
      if (destinationNames.includes(route.destination)) return;
      const known =
        destinationNames.length === 0 ? 'none is configured' : `known: ${destinationNames.join(', ')}`;
      found.push({
        path: ['routes', i, 'destination'],
        message: `names the destination "${route.destination}", which does not exist${hint(route.destination, destinationNames)}; ${known}`,
      });
    });
  }

  // Names that differ only in case would make QUEUEBOX_ variables ambiguous.
  for (const kind of ['sources', 'destinations'] as const) {
    const seen = new Map<string, string>();
    for (const [entryName] of entries(root[kind])) {
      const other = seen.get(entryName.toLowerCase());
      if (other !== undefined) {
        found.push({
          path: [kind, entryName],
          message: `differs from "${other}" only in letter case; rename one`,
        });
      } else {
        seen.set(entryName.toLowerCase(), entryName);
      }
    }
  }

  // Each HTTP source answers at its own path.
  const rawBasePath = valueAt(input, ['inbox', 'basePath']);
  const basePath = typeof rawBasePath === 'string' ? rawBasePath : DEFAULTS.inbox.basePath;
  const paths = new Map<string, string>();
  for (const [sourceName, source] of entries(root.sources)) {
    if (source.type !== 'http') continue;
    const own = typeof source.path === 'string';
    const path = own ? (source.path as string) : sourceName;
    const other = paths.get(path);
    if (other === undefined) {
      paths.set(path, sourceName);
    } else {
      found.push({
        path: own ? ['sources', sourceName, 'path'] : ['sources', sourceName],
        message: `answers at ${basePath}/${path}, which the source "${other}" already uses; give one of them another path`,
      });
    }
  }

  // budget < function timeout < claim lease: a lease must outlive the function that holds it (docs/design.md §3).
  const leases = [
    {
      leasePath: ['outbox', 'claimTimeoutMs'],
      timeoutPath: ['aws', 'functions', 'outboxTick', 'timeoutSeconds'],
      fn: 'outbox-tick',
    },
    {
      leasePath: ['inbox', 'relay', 'claimTimeoutMs'],
      timeoutPath: ['aws', 'functions', 'relayTick', 'timeoutSeconds'],
      fn: 'relay-tick',
    },
  ];
  for (const { leasePath, timeoutPath, fn } of leases) {
    const lease = numberAt(input, leasePath);
    const timeout = numberAt(input, timeoutPath);
    if (lease > timeout * 1000) continue;
    const leaseSet = origins?.has(formatPath(leasePath)) ?? false;
    const timeoutSet = origins?.has(formatPath(timeoutPath)) ?? false;
    const blameTimeout = timeoutSet && !leaseSet;
    found.push({
      path: blameTimeout ? timeoutPath : leasePath,
      message: blameTimeout
        ? `(${timeout} s) must be shorter than ${formatPath(leasePath)} (${lease} ms): the ${fn} function would outlive its claims`
        : `(${lease} ms) must exceed ${formatPath(timeoutPath)} (${timeout} s = ${timeout * 1000} ms): a claim must outlive the ${fn} function that holds it`,
    });
  }

  // A destination's backoff override still needs base ≤ max once combined with the outbox's.
  for (const [destinationName, destination] of entries(root.destinations)) {
    const backoff = destination.backoff;
    if (!isPlainObject(backoff)) continue;
    const own = typeof backoff.maxMs === 'number';
    const base =
      typeof backoff.baseMs === 'number' ? backoff.baseMs : numberAt(input, ['outbox', 'backoff', 'baseMs']);
    const max = own ? (backoff.maxMs as number) : numberAt(input, ['outbox', 'backoff', 'maxMs']);
    if (max >= base) continue;
    found.push({
      path: ['destinations', destinationName, 'backoff', own ? 'maxMs' : 'baseMs'],
      message: own
        ? `(${max} ms) must be at least the base delay (${base} ms)`
        : `(${base} ms) exceeds outbox.backoff.maxMs (${max} ms); set backoff.maxMs too`,
    });
  }
  return found;
}

/**
 * Validates configuration input (plain data, e.g. parsed YAML with the environment overlaid and references
 * resolved) against the schema and the cross-section rules, and returns the configuration with defaults, or
 * every problem found with its path and origin. Pure: reads no file and no environment.
 */
export function validateConfig(
  input: unknown,
  origins?: ConfigOrigins,
  options: ValidateOptions = {},
): ConfigValidation {
  const result = configSchema.safeParse(input ?? {});
  const found = [
    ...(result.success ? [] : result.error.issues.flatMap((i) => describeIssue(i, toPath(i.path), input))),
    ...crossChecks(input, origins),
  ];
  const seen = new Set<string>();
  const issues: ConfigIssue[] = [];
  for (const { path, message } of found) {
    const text = formatPath(path);
    if (seen.has(`${text}\n${message}`)) continue;
    seen.add(`${text}\n${message}`);
    const origin = originOf(origins, path) ?? options.defaultOrigin;
    issues.push(origin === undefined ? { path: text, message } : { path: text, message, origin });
  }
  if (issues.length > 0 || !result.success) return { ok: false, issues };
  attachProvenance(result.data, {
    origins: origins ?? new Map(),
    references: new Set(options.references ?? []),
  });
  return { ok: true, config: result.data };
}

/** Like {@link validateConfig}, but returns the configuration or throws core's `ConfigError` listing every issue. */
export function parseConfig(
  input: unknown,
  origins?: ConfigOrigins,
  options: ValidateOptions = {},
): QueueBoxConfig {
  const result = validateConfig(input, origins, options);
  if (!result.ok) throw new ConfigError(result.issues);
  return result.config;
}
