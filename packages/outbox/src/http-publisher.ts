import {
  type Clock,
  ConfigError,
  type ConfigIssue,
  type OutgoingMessage,
  type Publisher,
  type PublishOutcome,
  systemClock,
} from '@queuebox/core';
import { parseRetryAfter } from './backoff.ts';
import { mergeHeaders } from './headers.ts';
import type { DestinationOptions } from './options.ts';
import { createSemaphore } from './semaphore.ts';
import { createStandardWebhooksSigner, type StandardWebhooksSigner } from './standard-webhooks.ts';

/** The header that carries the outbox row id on every delivery, so a receiver can drop repeats. */
export const IDEMPOTENCY_HEADER = 'Idempotency-Key';

/** Default time for one request. */
export const DEFAULT_HTTP_TIMEOUT_MS = 10_000;
/** Default cap on requests in flight per destination. */
export const DEFAULT_MAX_CONCURRENCY = 16;
/** Default number of response-body bytes kept in an error text. */
export const DEFAULT_MAX_ERROR_BODY_BYTES = 2048;

/** 4xx statuses that always retry (DESIGN.md §5): request timeout, too early, too many requests. */
const ALWAYS_RETRYABLE = new Set([408, 425, 429]);

// Hop-by-hop and framing headers describe the request a row came in on, not the one we send (we re-serialize the
// payload), and fetch refuses some of them outright.
const DROPPED_ROW_HEADERS = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'host',
  'content-length',
  'content-encoding',
  'expect',
]);

/** What an HTTP status means for the row. */
export type StatusClass = 'sent' | 'retry' | 'dead';

/**
 * DESIGN.md §5: 2xx sent; 408, 425, 429 and 5xx retry; any other status (other 4xx, and 1xx/3xx, since redirects
 * are not followed) dead, unless listed in `retryableStatuses`.
 */
export function classifyStatus(status: number, retryableStatuses: readonly number[] = []): StatusClass {
  if (status >= 200 && status < 300) return 'sent';
  if (status >= 500 || ALWAYS_RETRYABLE.has(status) || retryableStatuses.includes(status)) return 'retry';
  return 'dead';
}

/** Options of `createHttpPublisher`: an `http` destination, plus its name for error paths. */
export interface HttpPublisherOptions extends DestinationOptions {
  /** The destination's name (for error messages). Default `http`. */
  readonly name?: string;
  /** Response-body bytes kept in an error text. Default 2048. */
  readonly maxErrorBodyBytes?: number;
}

/** Injectable collaborators of `createHttpPublisher`. */
export interface HttpPublisherDeps {
  /** Default: the global `fetch` (undici; keeps connections alive and reuses them). */
  readonly fetch?: typeof fetch;
  /** Source of webhook-timestamp. Default: the system clock. */
  readonly clock?: Clock;
}

/** The problems of an http destination's options (empty when usable), with paths under `destinations.<name>`. */
export function checkHttpDestination(name: string, options: DestinationOptions): ConfigIssue[] {
  const base = `destinations.${name}`;
  const issues: ConfigIssue[] = [];
  let url: URL | undefined;
  try {
    url = options.url === undefined ? undefined : new URL(options.url);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    issues.push({ path: `${base}.url`, message: 'an http destination needs an absolute http(s) URL' });
  }
  const method = (options.method ?? 'POST').toUpperCase();
  if (method === 'GET' || method === 'HEAD') {
    issues.push({ path: `${base}.method`, message: `${method} cannot carry the message body` });
  }
  if (options.timeoutMs !== undefined && !(options.timeoutMs > 0)) {
    issues.push({ path: `${base}.timeoutMs`, message: 'must be a positive number of milliseconds' });
  }
  if (options.maxConcurrency !== undefined && !(options.maxConcurrency >= 1)) {
    issues.push({ path: `${base}.maxConcurrency`, message: 'must be at least 1' });
  }
  return issues;
}

/** An HTTP header name (RFC 9110 token). Row headers with other names are left out of the request. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** What HTTP carries in a value (visible ASCII, space, tab, Latin-1 obs-text): anything else is percent-encoded (UTF-8). */
const PLAIN_HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * A publisher for one `http` destination.
 *
 * Each message is one request: `method` (default POST) to `url`, body the JSON payload, headers the row's headers
 * (hop-by-hop and framing headers dropped), then the destination's static headers (which win), `Content-Type:
 * application/json` unless set, `Idempotency-Key: <outbox id>`, and with signing the Standard Webhooks headers
 * (webhook-id is the outbox id). Redirects are not followed. A response body is read only up to
 * `maxErrorBodyBytes`. At most `maxConcurrency` (default 16) requests are in flight; the rest wait. Connections are
 * kept alive by the global fetch dispatcher. Throws `ConfigError` for unusable options.
 */
export function createHttpPublisher(options: HttpPublisherOptions, deps: HttpPublisherDeps = {}): Publisher {
  const name = options.name ?? 'http';
  const issues = checkHttpDestination(name, options);
  const signer: StandardWebhooksSigner | undefined =
    options.signing === undefined
      ? undefined
      : createStandardWebhooksSigner(options.signing.secrets, `destinations.${name}.signing.secrets`);
  if (issues.length > 0) throw new ConfigError(issues);

  const url = options.url as string;
  const method = (options.method ?? 'POST').toUpperCase();
  const timeoutMs = options.timeoutMs ?? DEFAULT_HTTP_TIMEOUT_MS;
  const retryable = options.retryableStatuses ?? [];
  const maxBody = options.maxErrorBodyBytes ?? DEFAULT_MAX_ERROR_BODY_BYTES;
  const staticHeaders = { ...(options.headers ?? {}) };
  const doFetch = deps.fetch ?? globalThis.fetch;
  const clock = deps.clock ?? systemClock;
  const semaphore = createSemaphore(options.maxConcurrency ?? DEFAULT_MAX_CONCURRENCY);
  const inFlight = new Set<Promise<unknown>>();
  let closed = false;

  const requestHeaders = (message: OutgoingMessage, body: string): Headers | string => {
    const fromRow: Record<string, string> = {};
    for (const [header, value] of Object.entries(message.headers)) {
      if (DROPPED_ROW_HEADERS.has(header.toLowerCase()) || !HEADER_NAME.test(header)) continue;
      // A row header may hold any text (a relayed idempotency key in Chinese, a line break from a broker header);
      // HTTP cannot carry that as is, so such a value travels percent-encoded rather than killing the delivery.
      fromRow[header] = PLAIN_HEADER_VALUE.test(value) ? value : encodeURIComponent(value);
    }
    let merged = mergeHeaders(fromRow, staticHeaders);
    if (!Object.keys(merged).some((h) => h.toLowerCase() === 'content-type')) {
      merged = { ...merged, 'Content-Type': 'application/json' };
    }
    merged = mergeHeaders(merged, { [IDEMPOTENCY_HEADER]: message.id });
    if (signer !== undefined) {
      merged = mergeHeaders(merged, { ...signer.sign(message.id, clock.now() / 1000, body) });
    }
    try {
      return new Headers(merged);
    } catch (error) {
      return `invalid request header: ${error instanceof Error ? error.message : String(error)}`;
    }
  };

  const send = async (message: OutgoingMessage, signal: AbortSignal | undefined): Promise<PublishOutcome> => {
    const body = JSON.stringify(message.payload);
    const headers = requestHeaders(message, body);
    if (typeof headers === 'string') return { kind: 'dead', error: headers };
    const timeout = AbortSignal.timeout(timeoutMs);
    const requestSignal = signal === undefined ? timeout : AbortSignal.any([signal, timeout]);
    try {
      const response = await doFetch(url, {
        method,
        headers,
        body,
        redirect: 'manual',
        signal: requestSignal,
      });
      const text = await readLimited(response, maxBody);
      const verdict = classifyStatus(response.status, retryable);
      if (verdict === 'sent') return { kind: 'sent' };
      const error = `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''}${
        text ? `: ${text}` : ''
      }`;
      if (verdict === 'dead') return { kind: 'dead', error };
      const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'), clock.now());
      return retryAfterMs === undefined ? { kind: 'retry', error } : { kind: 'retry', error, retryAfterMs };
    } catch (error) {
      if (timeout.aborted) return { kind: 'retry', error: `timeout after ${timeoutMs} ms` };
      if (signal?.aborted) return { kind: 'retry', error: 'aborted before the destination answered' };
      return { kind: 'retry', error: `network error: ${networkErrorText(error)}` };
    }
  };

  return {
    async publish(message, signal) {
      if (closed) return { kind: 'retry', error: `publisher for destination ${name} is closed` };
      const work = semaphore.run(() => send(message, signal));
      inFlight.add(work);
      try {
        return await work;
      } finally {
        inFlight.delete(work);
      }
    },
    async close() {
      closed = true;
      await Promise.allSettled([...inFlight]);
    },
  };
}

/** Reads at most `limit` bytes of the body, then lets the rest go (cancelling frees the connection). */
async function readLimited(response: Response, limit: number): Promise<string> {
  if (response.body === null) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let truncated = false;
  try {
    while (size <= limit) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.byteLength;
    }
    if (size > limit) {
      truncated = true;
      await reader.cancel().catch(() => undefined);
    }
  } finally {
    reader.releaseLock();
  }
  const bytes = Buffer.concat(chunks).subarray(0, limit);
  // A cut may split a multi-byte character; the decoder shows it as U+FFFD.
  const text = new TextDecoder().decode(bytes).trim();
  return truncated ? `${text}… (truncated at ${limit} bytes)` : text;
}

function networkErrorText(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  // fetch wraps the socket error: TypeError('fetch failed', { cause: Error { code: 'ECONNREFUSED' } }).
  for (let depth = 0; current instanceof Error && depth < 4; depth++) {
    const code = (current as { code?: unknown }).code;
    const text =
      typeof code === 'string' && !current.message.includes(code)
        ? `${code} ${current.message}`
        : current.message;
    if (text && !parts.includes(text)) parts.push(text);
    if (current instanceof AggregateError && current.errors[0] !== undefined) current = current.errors[0];
    else current = current.cause;
  }
  return parts.length > 0 ? parts.join(': ') : String(error);
}
