/**
 * What a value is, for the "got …" of an error message about an argument or a field: one wording shared by the
 * client's checks, the pull worker's and the stores', so a caller reads the same words for the same mistake.
 */

/** Longest string quoted back in full; a longer one is described by its length (it may be text pasted by mistake). */
const MAX_QUOTED = 40;

/** `a Map`, `an Error`: the article that goes with `name` as it is read aloud. */
function withArticle(name: string): string {
  return `${/^[AEIOaeio]/.test(name) ? 'an' : 'a'} ${name}`;
}

/** The name of the class that made `value` (`Map`, `Headers`), or undefined for a plain object, an array or a proxy. */
function className(value: object): string | undefined {
  try {
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto === null || proto === Object.prototype) return undefined;
    const name = (proto as { constructor?: { name?: unknown } }).constructor?.name;
    return typeof name === 'string' && name !== '' ? name : 'object of an anonymous class';
  } catch {
    // A revoked proxy, or a trap that throws.
    return undefined;
  }
}

/**
 * `value` described for an error message: `undefined`, `null`, `true`, a number as written (`5`, `-1`, `NaN`),
 * `the BigInt 5n`, `an empty string`, `the string "5"` (quoted up to 40 characters, else `a string of N
 * characters`), `a function`, `a symbol`, `an array of N items`, `an object` (plain), and an instance by its class
 * (`a Map`, `a Headers`, `an Error`). Never more of a value's content than a short string or a number.
 */
export function describeValue(value: unknown): string {
  switch (typeof value) {
    case 'undefined':
      return 'undefined';
    case 'boolean':
      return String(value);
    case 'number':
      return String(value);
    case 'bigint':
      return `the BigInt ${value}n`;
    case 'string':
      if (value.length === 0) return 'an empty string';
      return value.length <= MAX_QUOTED
        ? `the string ${JSON.stringify(value)}`
        : `a string of ${value.length} characters`;
    case 'symbol':
      return 'a symbol';
    case 'function':
      return 'a function';
  }
  if (value === null) return 'null';
  try {
    if (Array.isArray(value)) return `an array of ${value.length} item${value.length === 1 ? '' : 's'}`;
  } catch {
    // A revoked proxy: Array.isArray throws on it.
    return 'an object';
  }
  const name = className(value as object);
  return name === undefined ? 'an object' : withArticle(name);
}
