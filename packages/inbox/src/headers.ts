import type { Headers } from '@queuebox/core';

/** Request headers as HTTP servers and API Gateway hand them over. */
export type RawHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

/**
 * Lower-cases header names and joins repeated values with `, ` (RFC 9110 field combination). Names that differ only
 * in letter case are combined the same way.
 */
export function normalizeHeaders(raw: RawHeaders): Record<string, string> {
  const headers: Record<string, string> = Object.create(null);
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    const text = typeof value === 'string' ? value : value.join(', ');
    const key = name.toLowerCase();
    const previous = headers[key];
    headers[key] = previous === undefined ? text : `${previous}, ${text}`;
  }
  return headers;
}

/**
 * Headers never stored: hop-by-hop headers (RFC 9110 §7.6.1 and the usual proxy ones), headers that describe the
 * transfer rather than the message, and credentials. A source's scheme adds its signature headers.
 */
export const UNSTORED_HEADERS: ReadonlySet<string> = new Set([
  // hop-by-hop
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  // the transfer, not the message
  'content-length',
  'host',
  'expect',
  // credentials
  'authorization',
  'cookie',
  'set-cookie',
  'x-api-key',
]);

/**
 * The headers to store with a message: every received header except UNSTORED_HEADERS, the headers that the
 * `Connection` header names, and `credentialHeaders` (the source scheme's signature headers). Names stay
 * lower-cased.
 */
export function storableHeaders(
  headers: Readonly<Record<string, string>>,
  credentialHeaders: readonly string[],
): Headers {
  const dropped = new Set(credentialHeaders.map((h) => h.toLowerCase()));
  for (const name of (headers.connection ?? '').split(',')) dropped.add(name.trim().toLowerCase());
  const kept: Headers = {};
  for (const [name, value] of Object.entries(headers)) {
    // `__proto__` would set the prototype of a plain object instead of a key; no real header has that name.
    if (UNSTORED_HEADERS.has(name) || dropped.has(name) || name === '__proto__') continue;
    kept[name] = value;
  }
  return kept;
}
