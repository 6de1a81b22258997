import type { ConfigIssue } from '@queuebox/core';
import type { z } from 'zod';
import { coerceText } from './coerce.ts';
import { type ConfigPath, forgetDescendants, formatPath, isPlainObject } from './paths.ts';
import { configSchema } from './schema.ts';
import { childSchema, kindOf, knownKeys, type SchemaKind } from './schema-walk.ts';

/** Prefix of the environment variables that fill the configuration. */
export const ENV_PREFIX = 'QUEUEBOX_';

/**
 * `QUEUEBOX_` variables that are not configuration keys: `QUEUEBOX_CONFIG` names the file; the others belong to
 * the repository's own tools (scripts/services.sh, scripts/check-bundles.ts, the fuzz seed of test/faults).
 */
export const RESERVED_ENV_VARS: readonly string[] = [
  'QUEUEBOX_CONFIG',
  'QUEUEBOX_SKIP_SERVICES',
  'QUEUEBOX_DROP_PROVIDER',
  'QUEUEBOX_FUZZ_SEED',
];

/**
 * Prefixes of the repository's own tool variables, which are never configuration keys: tests
 * (`QUEUEBOX_TEST_POSTGRES_URL`), benchmarks (`QUEUEBOX_BENCH_ROWS`, `QUEUEBOX_SOAK_SCALE`), the service scripts
 * (`QUEUEBOX_KAFKA_HOME`, `QUEUEBOX_ELASTICMQ_HEAP`) and the demo (`QUEUEBOX_DEMO_URL`). A variable is reserved
 * when its first `__` segment goes on after the prefix, so `QUEUEBOX_TEST__X` is still read (and refused) as a
 * key. No top-level key starts with one of these words (a unit test holds that), so none can shadow a key.
 */
export const RESERVED_ENV_PREFIXES: readonly string[] = [
  'QUEUEBOX_TEST_',
  'QUEUEBOX_BENCH_',
  'QUEUEBOX_SOAK_',
  'QUEUEBOX_KAFKA_',
  'QUEUEBOX_ELASTICMQ_',
  'QUEUEBOX_DEMO_',
];

/** Whether `name` (any letter case) is one of {@link RESERVED_ENV_VARS} or starts with a {@link RESERVED_ENV_PREFIXES}. */
export function isReservedEnvVar(name: string): boolean {
  const upper = name.toUpperCase();
  if (RESERVED_ENV_VARS.includes(upper)) return true;
  if (!upper.startsWith(ENV_PREFIX)) return false;
  // The first path segment (`TEST_POSTGRES_URL` of `QUEUEBOX_TEST_POSTGRES_URL`) must go on after the tool's word.
  const first = upper.slice(ENV_PREFIX.length).split('__')[0] ?? '';
  return RESERVED_ENV_PREFIXES.some((prefix) => {
    const word = prefix.slice(ENV_PREFIX.length);
    return first.startsWith(word) && first.length > word.length;
  });
}

/** The result of overlaying the environment: the merged input, and problems with the variables themselves. */
export interface EnvOverlay {
  readonly value: Record<string, unknown>;
  readonly issues: ConfigIssue[];
}

const loose = (s: string) => s.toLowerCase().replace(/[-_]/g, '');

/** The candidate equal to `segment` ignoring case, else ignoring case, "-" and "_" (so `MAX_ATTEMPTS` works). */
function matchKey(segment: string, candidates: readonly string[]): string | undefined {
  const lower = segment.toLowerCase();
  return (
    candidates.find((c) => c.toLowerCase() === lower) ?? candidates.find((c) => loose(c) === loose(segment))
  );
}

/** Gives a flow mapping from a variable (`{MAXATTEMPTS: 5}`) the schema's spelling of its keys. */
function normalizeKeys(value: unknown, schema: z.ZodType | undefined): unknown {
  if (!schema) return value;
  if (Array.isArray(value)) return value.map((item, i) => normalizeKeys(item, childSchema(schema, i, value)));
  if (!isPlainObject(value)) return value;
  const kind = kindOf(schema);
  const keys = kind === 'object' || kind === 'union' ? knownKeys(schema, value) : [];
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    const spelled = matchKey(key, keys) ?? key;
    out[spelled] = normalizeKeys(item, childSchema(schema, spelled, value));
  }
  return out;
}

/**
 * Overlays `QUEUEBOX_` variables on `base` (usually the YAML file's content): path segments are joined by `__`
 * and matched to schema keys without regard to case; a record entry (a source or destination name) matches an
 * existing name without regard to case (and with "_" standing for "-"), else it is taken lower-cased; a list
 * takes a numeric index. Values are read as YAML scalars or flow collections (`5`, `true`, `[a, b]`) unless the key
 * expects text. A mapping is merged into the mapping already at its path, key by key (lists and other values
 * replace; a mapping with another `type` or `scheme` replaces too). Two variables that name the same key (`MAXATTEMPTS`
 * and `MAX_ATTEMPTS`, or two letter cases) are refused. The origin of each value set is recorded as the variable's
 * name. Pure: `base` is not changed.
 */
export function overlayEnv(
  base: unknown,
  env: Readonly<Record<string, string | undefined>>,
  origins: Map<string, string>,
  schema: z.ZodType = configSchema,
): EnvOverlay {
  const value: Record<string, unknown> = isPlainObject(base) ? structuredClone(base) : {};
  const issues: ConfigIssue[] = [];
  const variables = Object.entries(env)
    .filter((entry): entry is [string, string] => entry[1] !== undefined)
    .filter(([key]) => key.toUpperCase().startsWith(ENV_PREFIX))
    .filter(([key]) => !isReservedEnvVar(key))
    .map(([key, raw]) => ({ key, raw, segments: key.slice(ENV_PREFIX.length).split('__') }))
    // Whole sections first, so a more specific variable refines them.
    .sort((a, b) => a.segments.length - b.segments.length || a.key.localeCompare(b.key));

  // The variable that set each path, so that two spellings of one key are refused.
  const assigned = new Map<string, string>();
  for (const { key: variable, raw, segments } of variables) {
    if (segments.some((s) => s === '')) {
      issues.push({
        path: '',
        message: `${variable} has an empty path segment; join keys with a double underscore, e.g. QUEUEBOX_OUTBOX__MAXATTEMPTS`,
        origin: variable,
      });
      continue;
    }
    let node: Record<string, unknown> | unknown[] = value;
    let position: z.ZodType | undefined = schema;
    const path: (string | number)[] = [];
    for (const [index, segment] of segments.entries()) {
      const last = index === segments.length - 1;
      const kind: SchemaKind = position ? kindOf(position) : 'object';
      let key: string | number;
      if (kind === 'array') {
        const list = node as unknown[];
        const at = /^\d+$/.test(segment) ? Number(segment) : Number.NaN;
        if (!(at <= list.length)) {
          issues.push({
            path: formatPath(path),
            message: `is a list; ${variable} must name an index from 0 to ${list.length}`,
            origin: variable,
          });
          break;
        }
        key = at;
      } else if (kind === 'leaf') {
        issues.push({
          path: formatPath(path),
          message: `is a single value, not a section, so ${variable} cannot set a key inside it`,
          origin: variable,
        });
        break;
      } else {
        const candidates: string[] =
          kind === 'record' ? Object.keys(node) : position ? knownKeys(position, node) : [];
        key = matchKey(segment, candidates) ?? segment.toLowerCase();
      }
      path.push(key);
      const next: z.ZodType | undefined = position ? childSchema(position, key, node) : undefined;
      if (last) {
        const target = formatPath(path);
        const earlier = assigned.get(target);
        if (earlier !== undefined) {
          // Letter case, "_" and "-" are ignored, so both name this key: which one wins would be an accident.
          issues.push({
            path: target,
            message: `is set by both ${earlier} and ${variable}, which name the same key; keep one`,
            origin: variable,
          });
          break;
        }
        assigned.set(target, variable);
        const incoming = normalizeKeys(coerceText(raw, next, { flow: true }), next);
        const existing = getChild(node, key);
        if (mergeable(existing, incoming, next)) {
          // A mapping refines the mapping it lands on, key by key; the keys it leaves keep their value and origin.
          mergeMapping(existing, incoming as Record<string, unknown>, path, origins, variable, next);
        } else {
          setChild(node, key, incoming);
          forgetDescendants(origins, path);
          origins.set(target, variable);
        }
      } else {
        const wantsList: boolean = next !== undefined && kindOf(next) === 'array';
        const existing = getChild(node, key);
        const container: Record<string, unknown> | unknown[] = wantsList
          ? Array.isArray(existing)
            ? existing
            : []
          : isPlainObject(existing)
            ? existing
            : {};
        if (container !== existing) {
          setChild(node, key, container);
          // What this variable creates (a new source, destination or route, a section the file lacks, or a key the
          // schema does not know, e.g. `outboxx` of QUEUEBOX_OUTBOXX__MAXATTEMPTS) comes from it, not from the file
          // around it: a problem with it, or a key it lacks, is then reported with the variable's name.
          forgetDescendants(origins, path);
          origins.set(formatPath(path), variable);
        }
        node = container;
        position = next;
      }
    }
  }
  return { value, issues };
}

/**
 * Whether a variable's value merges into what is at its path: both are mappings of fixed keys (a section such as
 * `inbox.relay`, one source or destination), and the value does not change the mapping's `type` or `scheme` (a
 * source that becomes another type, an auth of another scheme, takes none of the keys of the old one). A mapping of
 * names (`sources`, `destinations`, a destination's `headers`) is replaced whole, so a variable can still say what
 * the whole set is: merged, a source or a header of the file that the variable left out survived unseen (review).
 */
function mergeable(
  existing: unknown,
  incoming: unknown,
  schema: z.ZodType | undefined,
): existing is Record<string, unknown> {
  if (!isPlainObject(existing) || !isPlainObject(incoming)) return false;
  if (schema !== undefined && kindOf(schema) === 'record') return false;
  return ['type', 'scheme'].every(
    (discriminator) =>
      !Object.hasOwn(incoming, discriminator) ||
      !Object.hasOwn(existing, discriminator) ||
      incoming[discriminator] === existing[discriminator],
  );
}

/** Deep-merges `incoming` into `existing` (mappings merge, lists and values replace), recording `variable` as the origin of what it sets. */
function mergeMapping(
  existing: Record<string, unknown>,
  incoming: Record<string, unknown>,
  path: readonly (string | number)[],
  origins: Map<string, string>,
  variable: string,
  schema: z.ZodType | undefined,
): void {
  for (const [key, value] of Object.entries(incoming)) {
    const childPath = [...path, key];
    const current = existing[key];
    const childOf = schema ? childSchema(schema, key, existing) : undefined;
    if (mergeable(current, value, childOf)) {
      mergeMapping(current, value as Record<string, unknown>, childPath, origins, variable, childOf);
    } else {
      existing[key] = value;
      forgetDescendants(origins, childPath);
      origins.set(formatPath(childPath), variable);
    }
  }
}

function getChild(node: Record<string, unknown> | unknown[], key: string | number): unknown {
  return Array.isArray(node) ? node[Number(key)] : node[String(key)];
}

function setChild(node: Record<string, unknown> | unknown[], key: string | number, child: unknown): void {
  if (Array.isArray(node)) node[Number(key)] = child;
  else node[String(key)] = child;
}

/** The variable name that would set `path` (for documentation and messages): `outbox.maxAttempts` → `QUEUEBOX_OUTBOX__MAXATTEMPTS`. */
export function envVarFor(path: ConfigPath): string {
  return `${ENV_PREFIX}${path.map((s) => String(s).toUpperCase().replace(/-/g, '_')).join('__')}`;
}
