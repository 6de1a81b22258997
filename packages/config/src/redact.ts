import { formatPath, isPlainObject } from './paths.ts';
import { provenanceOf } from './provenance.ts';

/** The text that replaces a redacted value. */
export const REDACTED = '***';

/** Key names whose values are always redacted, wherever they appear (`token`, `secrets`, `Authorization`, …). */
export const SENSITIVE_KEY = /token|secret|passw(or)?d|authorization|api[-_]?key|credential/i;

const URL_PARTS = /^([A-Za-z][A-Za-z0-9+.-]*:\/\/)([^/?#\s]*@)?([^?#\s]*)(\?[^#\s]*)?(#\S*)?$/;

/**
 * Hides the credentials a URL or connection string may carry: the whole userinfo (`nats://token@h`,
 * `postgres://u:p@h` → `…://***@h`), every query value (`?token=abc&x=1` → `?token=***&x=***`) and
 * `Password=`/`Pwd=` of an ADO.NET string.
 */
export function redactConnectionString(value: string): string {
  const url = URL_PARTS.exec(value);
  const redacted = url
    ? `${url[1]}${url[2] === undefined ? '' : `${REDACTED}@`}${url[3]}${
        url[4] === undefined
          ? ''
          : `?${url[4]
              .slice(1)
              .split('&')
              .map((pair) => (pair === '' ? pair : `${pair.split('=')[0]}=${REDACTED}`))
              .join('&')}`
      }${url[5] ?? ''}`
    : value;
  return redacted.replace(/\b(password|pwd)=[^;&]*/gi, `$1=${REDACTED}`);
}

/** Whether `path` is the value of a destination's static header: `destinations.<name>.headers.<header>`. */
function isDestinationHeader(path: readonly (string | number)[]): boolean {
  return path.length === 4 && path[0] === 'destinations' && path[2] === 'headers';
}

function hideAll(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(hideAll);
  if (isPlainObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, hideAll(v)]));
  return value === undefined ? undefined : REDACTED;
}

/**
 * A deep copy of `config` that is safe to print (for `queuebox config check` and logs): every value that came
 * from a `secret://` or `env://` reference, every value under a key that names a credential ({@link SENSITIVE_KEY};
 * each item of a list such as `secrets`), every destination header value, and the userinfo and query values of any
 * URL or connection string (see {@link redactConnectionString}) become `'***'`.
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
    // Any header can carry a credential (`Cookie`, `X-Tenant-Key`, a custom auth scheme): none is shown.
    if (isDestinationHeader(path)) return hideAll(value);
    if (Array.isArray(value)) return value.map((item, i) => walk(item, [...path, i]));
    if (isPlainObject(value)) {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, walk(v, [...path, k])]));
    }
    if (typeof value === 'string') return redactConnectionString(value);
    return value;
  };
  return walk(config, []) as T;
}
