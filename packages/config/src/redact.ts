import { formatPath, isPlainObject } from './paths.ts';
import { provenanceOf } from './provenance.ts';

/** The text that replaces a redacted value. */
export const REDACTED = '***';

/** Key names whose values are always redacted, wherever they appear (`token`, `secrets`, `Authorization`, …). */
export const SENSITIVE_KEY = /token|secret|passw(or)?d|authorization|api[-_]?key|credential/i;

/** Hides a password inside a connection string: `postgres://u:p@h` → `postgres://u:***@h`, `Password=p;` → `Password=***;`. */
export function redactConnectionString(value: string): string {
  return value
    .replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/[^:/?#@\s]*):[^@/?#\s]*@/, `$1:${REDACTED}@`)
    .replace(/\b(password|pwd)=[^;&]*/gi, `$1=${REDACTED}`);
}

function hideAll(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(hideAll);
  if (isPlainObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, hideAll(v)]));
  return value === undefined ? undefined : REDACTED;
}

/**
 * A deep copy of `config` that is safe to print (for `queuebox config check` and logs): every value that came
 * from a `secret://` or `env://` reference, every value under a key that names a credential ({@link SENSITIVE_KEY};
 * each item of a list such as `secrets`), and the password inside any connection string become `'***'`.
 * Reference provenance is known for configurations returned by `loadConfig`/`parseConfig`; for other objects the
 * key-name and connection-string rules still apply. Redacted values are strings whatever the key's type.
 */
export function redactConfig<T>(config: T): T {
  const references =
    (typeof config === 'object' && config !== null && provenanceOf(config)?.references) || new Set();
  const walk = (value: unknown, path: (string | number)[]): unknown => {
    if (references.has(formatPath(path))) return hideAll(value);
    const last = path[path.length - 1];
    if (typeof last === 'string' && SENSITIVE_KEY.test(last)) return hideAll(value);
    if (Array.isArray(value)) return value.map((item, i) => walk(item, [...path, i]));
    if (isPlainObject(value)) {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, walk(v, [...path, k])]));
    }
    if (typeof value === 'string') return redactConnectionString(value);
    return value;
  };
  return walk(config, []) as T;
}
