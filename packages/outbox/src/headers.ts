import type { Headers } from '@queuebox/core';

/**
 * `base` with every header of `extra` added; an `extra` header replaces a `base` header of the same name in any
 * letter case (HTTP header names are case-insensitive).
 */
export function mergeHeaders(base: Headers, extra: Headers | undefined): Headers {
  if (extra === undefined) return base;
  const replaced = new Set(Object.keys(extra).map((name) => name.toLowerCase()));
  if (replaced.size === 0) return base;
  const merged: Headers = {};
  for (const [name, value] of Object.entries(base)) {
    if (!replaced.has(name.toLowerCase())) merged[name] = value;
  }
  return Object.assign(merged, extra);
}

/**
 * The name of the first header of `headers` whose value is not a string, or undefined. A transform function
 * registered in code can return any value (`{ 'x-tenant': 7 }`, `NaN`, `null`); no publisher can carry it as it is,
 * and each failed differently (a Kafka request failed for every row in it).
 */
export function headerWithoutText(headers: object): string | undefined {
  for (const [name, value] of Object.entries(headers)) if (typeof value !== 'string') return name;
  return undefined;
}
