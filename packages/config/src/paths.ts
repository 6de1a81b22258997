/** A path into the configuration: object keys and array indexes. */
export type ConfigPath = readonly (string | number)[];

/**
 * Where configuration values came from, by formatted path (see {@link formatPath}): a file with its line
 * (`queuebox.yaml:12`) or an environment variable name (`QUEUEBOX_OUTBOX__MAXATTEMPTS`).
 */
export type ConfigOrigins = ReadonlyMap<string, string>;

/** `['sources', 'stripe', 'auth', 'secrets', 0]` → `sources.stripe.auth.secrets[0]`; the root is `''`. */
export function formatPath(path: ConfigPath): string {
  let text = '';
  for (const segment of path) {
    if (typeof segment === 'number') text += `[${segment}]`;
    else text += text === '' ? segment : `.${segment}`;
  }
  return text;
}

/**
 * The origin of the value at `path`, else of its nearest ancestor that has one, else of a sibling key set
 * beside it (a missing key of an entry built only from environment variables points at one of them).
 */
export function originOf(origins: ConfigOrigins | undefined, path: ConfigPath): string | undefined {
  if (!origins) return undefined;
  for (let n = path.length; n >= 0; n--) {
    const origin = origins.get(formatPath(path.slice(0, n)));
    if (origin !== undefined) return origin;
  }
  for (let n = path.length; n >= 1; n--) {
    const prefix = formatPath(path.slice(0, n));
    for (const [key, origin] of origins) {
      if (key.startsWith(`${prefix}.`) || key.startsWith(`${prefix}[`)) return origin;
    }
  }
  return undefined;
}

/** Removes the origins of `path`'s descendants (the value there was replaced as a whole). */
export function forgetDescendants(origins: Map<string, string>, path: ConfigPath): void {
  const prefix = formatPath(path);
  for (const key of [...origins.keys()]) {
    if (key === prefix) continue;
    if (prefix === '' || key.startsWith(`${prefix}.`) || key.startsWith(`${prefix}[`)) origins.delete(key);
  }
}

/** Whether a value is a plain object (a YAML mapping), not an array or null. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
