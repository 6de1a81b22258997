import { formatPath, isPlainObject } from './paths.ts';
import { provenanceOf } from './provenance.ts';

/** The text that replaces a redacted value. */
export const REDACTED = '***';

/** Key names whose values are always redacted, wherever they appear (`token`, `secrets`, `Authorization`, …). */
export const SENSITIVE_KEY = /token|secret|passw(or)?d|authorization|api[-_]?key|credential/i;

/** A URL's scheme (after any leading whitespace). */
const URL_SCHEME = /^(\s*[A-Za-z][A-Za-z0-9+.-]*:\/\/)/;

/**
 * Where the userinfo of `rest` (a URL after its scheme) ends: the last `@` before the query, so a password holding
 * spaces, tabs, `/`, `#` or `@` unencoded is hidden whole; -1 without userinfo; `undefined` when the text cannot be
 * split safely (an `@` only after a `?`: a query value holding `@`, or a password holding `?`).
 */
function userinfoEnd(rest: string): number | undefined {
  const question = rest.indexOf('?');
  if (question < 0) return rest.lastIndexOf('@');
  const before = rest.lastIndexOf('@', question);
  if (before >= 0) return before;
  return rest.indexOf('@', question) < 0 ? -1 : undefined;
}

/**
 * Hides the credentials a URL or connection string may carry: the whole userinfo (`nats://token@h`,
 * `postgres://u:p@h` → `…://***@h`, whatever characters the password holds), every query value
 * (`?token=abc&x=1` → `?token=***&x=***`) and `Password=`/`Pwd=` of an ADO.NET string; with `webhookUrl` (a
 * destination's URL, where the path itself may be the secret), also each path segment of an http(s) URL of 16
 * characters or more (Slack's `/services/T…/B…/<secret>`, Discord's `/api/webhooks/<id>/<token>`) and its fragment. A URL that cannot be split
 * safely (an `@` only after a `?`) is hidden after its scheme.
 */
export function redactConnectionString(
  value: string,
  options: { readonly webhookUrl?: boolean } = {},
): string {
  const scheme = URL_SCHEME.exec(value)?.[1];
  let redacted = value;
  if (scheme !== undefined) {
    let rest = value.slice(scheme.length);
    const at = userinfoEnd(rest);
    if (at === undefined) return `${scheme}${REDACTED}`;
    const userinfo = at < 0 ? '' : `${REDACTED}@`;
    if (at >= 0) rest = rest.slice(at + 1);
    const hash = rest.indexOf('#');
    const fragment = hash < 0 ? '' : rest.slice(hash);
    if (hash >= 0) rest = rest.slice(0, hash);
    const webhook = options.webhookUrl === true && /^\s*https?:\/\/$/i.test(scheme);
    const question = rest.indexOf('?');
    const query =
      question < 0
        ? ''
        : `?${rest
            .slice(question + 1)
            .split('&')
            .map((pair) => (pair === '' ? pair : `${pair.split('=')[0]}=${REDACTED}`))
            .join('&')}`;
    if (question >= 0) rest = rest.slice(0, question);
    if (webhook) rest = redactLongPathSegments(rest);
    redacted = `${scheme}${userinfo}${rest}${query}${webhook && fragment !== '' ? `#${REDACTED}` : fragment}`;
  }
  return redacted.replace(/\b(password|pwd)=[^;&]*/gi, `$1=${REDACTED}`);
}

/**
 * How long a path segment of an http(s) URL must be to be taken for a credential: a Slack webhook's secret is 24
 * characters, a Discord token 68 (the HTTP publisher takes the same segments out of `last_error`).
 */
const LONG_PATH_SEGMENT = 16;

/** `hostAndPath` (`host/seg/…`) with each path segment of {@link LONG_PATH_SEGMENT} characters or more hidden. */
function redactLongPathSegments(hostAndPath: string): string {
  const slash = hostAndPath.indexOf('/');
  if (slash < 0) return hostAndPath;
  const path = hostAndPath
    .slice(slash)
    .split('/')
    .map((segment) => (segment.length >= LONG_PATH_SEGMENT ? REDACTED : segment))
    .join('/');
  return `${hostAndPath.slice(0, slash)}${path}`;
}

/** Whether `path` is the value of a destination's static header: `destinations.<name>.headers.<header>`. */
function isDestinationHeader(path: readonly (string | number)[]): boolean {
  return path.length === 4 && path[0] === 'destinations' && path[2] === 'headers';
}

/** Whether `path` is a destination's URL: `destinations.<name>.url`. */
function isDestinationUrl(path: readonly (string | number)[]): boolean {
  return path.length === 3 && path[0] === 'destinations' && path[2] === 'url';
}

function hideAll(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(hideAll);
  if (isPlainObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, hideAll(v)]));
  return value === undefined ? undefined : REDACTED;
}

/**
 * A deep copy of `config` that is safe to print (for `queuebox config check` and logs): every value that came
 * from a `secret://` or `env://` reference, every value under a key that names a credential ({@link SENSITIVE_KEY};
 * each item of a list such as `secrets`), a TLS private key (`ssl.key`), every destination header value, the userinfo and query values of any
 * URL or connection string, and the long path segments and fragment of a destination's URL (see
 * {@link redactConnectionString}) become `'***'`.
 * Reference provenance is known for configurations returned by `loadConfig`/`parseConfig`; for other objects the
 * key-name and connection-string rules still apply. Redacted values are strings whatever the key's type.
 */
function isTlsBlock(name: string | number | undefined): boolean {
  return name === 'ssl' || name === 'tls';
}

export function redactConfig<T>(config: T): T {
  const references =
    (typeof config === 'object' && config !== null && provenanceOf(config)?.references) || new Set();
  const walk = (value: unknown, path: (string | number)[]): unknown => {
    if (references.has(formatPath(path))) return hideAll(value);
    const last = path[path.length - 1];
    if (typeof last === 'string' && SENSITIVE_KEY.test(last)) return hideAll(value);
    // A TLS private key (a Kafka `ssl.key`), whether written in the file or read from a reference.
    if (last === 'key' && isTlsBlock(path[path.length - 2])) return hideAll(value);
    // Any header can carry a credential (`Cookie`, `X-Tenant-Key`, a custom auth scheme): none is shown.
    if (isDestinationHeader(path)) return hideAll(value);
    if (Array.isArray(value)) return value.map((item, i) => walk(item, [...path, i]));
    if (isPlainObject(value)) {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, walk(v, [...path, k])]));
    }
    if (typeof value === 'string') {
      return redactConnectionString(value, { webhookUrl: isDestinationUrl(path) });
    }
    return value;
  };
  return walk(config, []) as T;
}
