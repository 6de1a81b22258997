import { ConfigError, type ConfigIssue } from '@queuebox/core';
import type { z } from 'zod';
import { closestMatch } from './did-you-mean.ts';
import { LEASE_REQUEST_MARGIN_MS, leaseRequestMs, minimumLeaseMs } from './drain-budget.ts';
import { type ConfigOrigins, type ConfigPath, formatPath, isPlainObject, originOf } from './paths.ts';
import { attachProvenance } from './provenance.ts';
import { HTTP_TIMEOUT_MAX_MS } from './schema/destinations.ts';
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
  if (typeof value === 'number' && Number.isNaN(value)) return 'NaN (.nan)';
  if (typeof value === 'number' && !Number.isFinite(value))
    return value > 0 ? 'infinity (.inf)' : '-infinity (-.inf)';
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

/** A number of seconds in the largest whole unit, e.g. ` (24 h)`, ` (7 days)`; empty when none fits. */
function inWords(seconds: number): string {
  const units: [number, string][] = [
    [31_536_000, 'years'],
    [86_400, 'days'],
    [3_600, 'h'],
    [60, 'min'],
  ];
  for (const [size, unit] of units) {
    const count = seconds / size;
    if (!Number.isInteger(count) || count < 1) continue;
    // 86400 s reads better as 24 h than as 1 days.
    if (unit === 'days' && count === 1) return ' (24 h)';
    if (unit === 'years' && count === 1) return ' (1 year)';
    return ` (${count} ${unit})`;
  }
  return '';
}

/** A bound of the key at `path` with the unit its name gives (`…Ms`, `…Seconds`, `…Sec`, `…Minutes`, `…Hours`). */
function withUnit(path: ConfigPath, bound: number): string {
  const key = String(path[path.length - 1] ?? '');
  if (key.endsWith('Ms')) return `${bound} ms${inWords(bound / 1000)}`;
  if (key.endsWith('Seconds') || key.endsWith('Sec')) return `${bound} s${inWords(bound)}`;
  if (key.endsWith('Minutes')) return `${bound} min${inWords(bound * 60)}`;
  if (key.endsWith('Hours')) return `${bound} h${inWords(bound * 3600)}`;
  return String(bound);
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
      if (
        typeof value === 'number' &&
        !Number.isFinite(value) &&
        (expected === 'a number' || expected === 'a whole number')
      ) {
        return [{ path, message: `must be a finite number, not ${describeValue(value)}` }];
      }
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
      return [{ path, message: `must be at most ${withUnit(path, max)}` }];
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

  found.push(...leaseOutlivesRequest(input, root));

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
 * `outbox.claimTimeoutMs` must leave room for the longest destination timeout and its settle
 * (`minimumLeaseMs`). Leases are never renewed, so the outbox poller ends every batch with its lease: a row whose
 * timeout no longer fits before its lease ends is released untried. A lease shorter than a request could not hold
 * even one: the request would outlive the lease, another drain could claim and deliver the row again, the late
 * answer would be stale, and at last the row would go dead after as many successful deliveries as it has attempts.
 */
function leaseOutlivesRequest(
  input: unknown,
  root: Record<string, unknown>,
): { path: ConfigPath; message: string }[] {
  const leasePath = ['outbox', 'claimTimeoutMs'];
  const raw = valueAt(input, leasePath);
  // A lease that is not a number is reported by the schema; the default in its place would only mislead.
  if (raw !== undefined && !(typeof raw === 'number' && Number.isFinite(raw))) return [];
  const lease = numberAt(input, leasePath);
  let longest: { path: ConfigPath; ms: number; own: boolean; type: string } | undefined;
  for (const [destinationName, destination] of entries(root.destinations)) {
    if (typeof destination.type !== 'string') continue;
    const own = destination.timeoutMs;
    // A timeout the schema refuses is reported there; the drain would run with the default one.
    const usable = typeof own === 'number' && Number.isInteger(own) && own >= 1 && own <= HTTP_TIMEOUT_MAX_MS;
    const ms = leaseRequestMs({ type: destination.type, timeoutMs: usable ? own : undefined });
    if (longest === undefined || ms > longest.ms) {
      longest = {
        path: ['destinations', destinationName, 'timeoutMs'],
        ms,
        own: usable,
        type: destination.type,
      };
    }
  }
  const longestMs = longest?.ms ?? 0;
  const minimum = minimumLeaseMs(longestMs);
  if (lease >= minimum) return [];
  const why =
    'claims are never renewed, so a request running past its lease lets another drain deliver the row again';
  const leaseSet = raw !== undefined;
  if (longest?.own && !leaseSet) {
    const highest = lease - LEASE_REQUEST_MARGIN_MS;
    return [
      {
        path: longest.path,
        message: `(${longest.ms} ms) needs outbox.claimTimeoutMs (${lease} ms) to be at least this timeout + ${LEASE_REQUEST_MARGIN_MS} ms for the settle, ${minimum} ms: set outbox.claimTimeoutMs to at least ${minimum}${highest >= 1 ? `, or this timeout to at most ${highest} ms` : ''} (${why})`,
      },
    ];
  }
  // Only an http destination has a `timeoutMs` to set; a broker or AWS publisher's wait is fixed (a soak's operator
  // was told to set a key the schema then refused).
  const longestText =
    longest === undefined
      ? 'none (no destination is configured)'
      : longest.type === 'http' || longest.own
        ? `${formatPath(longest.path)} (${longest.ms} ms${longest.own ? '' : ', its default'})`
        : `the publish wait of ${formatPath(longest.path.slice(0, 2))}, a ${longest.type} destination (${longest.ms} ms, fixed)`;
  return [
    {
      path: leasePath,
      message: `(${lease} ms) must be at least the longest destination timeout, ${longestText}, + ${LEASE_REQUEST_MARGIN_MS} ms for the settle: set it to at least ${minimum} (${why})`,
    },
  ];
}

/** `${NAME}`: shell syntax QueueBox never substitutes. */
const SHELL_VARIABLE = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/;

/**
 * Every string holding `${NAME}`: the text would be used as it is (a token, a secret, a URL), and `config check`
 * redacts credentials, so nobody would see that nothing was substituted. A value read from a reference is named
 * without its text.
 */
function shellVariables(
  input: unknown,
  references: ReadonlySet<string>,
): { path: ConfigPath; message: string }[] {
  const found: { path: ConfigPath; message: string }[] = [];
  const walk = (value: unknown, path: (string | number)[]): void => {
    if (typeof value === 'string') {
      const match = SHELL_VARIABLE.exec(value);
      if (match === null) return;
      const variable = match[1] ?? '';
      found.push({
        path,
        message: references.has(formatPath(path))
          ? `resolved to text holding \${…}, which looks like a shell variable that was never substituted; QueueBox substitutes nothing, check the value of the reference`
          : `holds \${${variable}}, which QueueBox does not substitute: the text would be used as it is (as a token or secret: one that anyone who reads the file knows); write env://${variable} as the whole value to read the variable, or set the key with a QUEUEBOX_ variable`,
      });
    } else if (Array.isArray(value)) {
      value.forEach((item, i) => {
        walk(item, [...path, i]);
      });
    } else if (isPlainObject(value)) {
      for (const [key, item] of Object.entries(value)) walk(item, [...path, key]);
    }
  };
  walk(input, []);
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
  const references = new Set(options.references ?? []);
  const result = configSchema.safeParse(input ?? {});
  const found = [
    ...(result.success ? [] : result.error.issues.flatMap((i) => describeIssue(i, toPath(i.path), input))),
    ...crossChecks(input, origins),
    ...shellVariables(input, references),
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
    references,
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
