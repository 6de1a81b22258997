import http from 'node:http';
import https from 'node:https';
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

/** Default time for one request: within the 15–30 s Standard Webhooks recommends to senders. */
export const DEFAULT_HTTP_TIMEOUT_MS = 15_000;
/** Default cap on requests in flight per destination. */
export const DEFAULT_MAX_CONCURRENCY = 16;
/**
 * Default number of response-body bytes kept in an error text: a short excerpt. `last_error` is shown to operators
 * and kept for days; a destination that echoes the request would otherwise copy our credentials into it.
 */
export const DEFAULT_MAX_ERROR_BODY_BYTES = 256;

/** Shortest header value (or credential within one) that is taken out of an error excerpt. */
const MIN_REDACTED_LENGTH = 4;

/**
 * The values of our own request headers that must never reach `last_error`: each static header's value, and its
 * last word too (`Bearer <token>` echoed as just the token), and the signature.
 */
function ownHeaderValues(staticHeaders: Readonly<Record<string, string>>): string[] {
  const values = new Set<string>();
  for (const value of Object.values(staticHeaders)) {
    values.add(value);
    const last = value.trim().split(/\s+/).pop();
    if (last !== undefined) values.add(last);
  }
  return [...values].filter((v) => v.length >= MIN_REDACTED_LENGTH).sort((a, b) => b.length - a.length);
}

/** `text` with every occurrence of `values` replaced by `***`. */
function redactValues(text: string, values: readonly string[]): string {
  let out = text;
  for (const value of values) out = out.split(value).join('***');
  return out;
}

/** 4xx statuses that always retry (DESIGN.md §5): request timeout, too early, too many requests. */
const ALWAYS_RETRYABLE = new Set([408, 425, 429]);

// Hop-by-hop and framing headers describe the request a row came in on, not the one we send (we re-serialize the
// payload), and node:http would send a second, contradicting value for some of them. The body is always JSON we
// wrote, so a row's Content-Type (a sender's `text/html; charset=iso-8859-1`) never describes it.
const DROPPED_ROW_HEADERS = new Set([
  'content-type',
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
  /** Response-body bytes kept in an error text. Default 256. */
  readonly maxErrorBodyBytes?: number;
}

/** Injectable collaborators of `createHttpPublisher`. */
export interface HttpPublisherDeps {
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

/** A character HTTP carries but UTF-8 would write as two bytes. */
const LATIN1_ONLY = /[\x80-\xff]/;

/**
 * A publisher for one `http` destination.
 *
 * Each message is one request: `method` (default POST) to `url`, body the JSON payload, headers the row's headers
 * (hop-by-hop and framing headers and `Content-Type` dropped), then the destination's static headers (which win),
 * `Content-Type: application/json` unless a static header sets one, `Idempotency-Key: <outbox id>`, and with signing the Standard Webhooks headers
 * (webhook-id is the outbox id). Redirects are not followed. A response body is read only up to
 * `maxErrorBodyBytes` (default 256): the error keeps the status and that excerpt, with the values of our own static
 * headers and signature taken out (a destination that echoes the request must not copy them into `last_error`). At most `maxConcurrency` (default 16) requests are in flight; the rest wait.
 *
 * The transport is node:http(s) with one keep-alive agent per destination (at most `maxConcurrency` sockets; an
 * idle socket is let go before the `Keep-Alive: timeout` the server announced). A request whose reused socket was
 * reset before any answer — the server closed an idle connection just as we sent — is sent once more on a fresh
 * connection. Throws `ConfigError` for unusable options.
 */
export function createHttpPublisher(options: HttpPublisherOptions, deps: HttpPublisherDeps = {}): Publisher {
  const name = options.name ?? 'http';
  const issues = checkHttpDestination(name, options);
  const signer: StandardWebhooksSigner | undefined =
    options.signing === undefined
      ? undefined
      : createStandardWebhooksSigner(options.signing.secrets, `destinations.${name}.signing.secrets`);
  if (issues.length > 0) throw new ConfigError(issues);

  const url = new URL(options.url as string);
  const method = (options.method ?? 'POST').toUpperCase();
  const timeoutMs = options.timeoutMs ?? DEFAULT_HTTP_TIMEOUT_MS;
  const retryable = options.retryableStatuses ?? [];
  const maxBody = options.maxErrorBodyBytes ?? DEFAULT_MAX_ERROR_BODY_BYTES;
  const maxConcurrency = options.maxConcurrency ?? DEFAULT_MAX_CONCURRENCY;
  const staticHeaders = { ...(options.headers ?? {}) };
  const ownValues = ownHeaderValues(staticHeaders);
  // Read a little past the excerpt, so a value cut at its end is still recognised and removed.
  const readLimit = maxBody + Math.max(0, ...ownValues.map((v) => Buffer.byteLength(v)), 128);
  const clock = deps.clock ?? systemClock;
  const transport = url.protocol === 'https:' ? https : http;
  const agent = new transport.Agent({ keepAlive: true, maxSockets: maxConcurrency });
  const semaphore = createSemaphore(maxConcurrency);
  const inFlight = new Set<Promise<unknown>>();
  let closed = false;

  const requestHeaders = (message: OutgoingMessage, body: string): Record<string, string> => {
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
    return merged;
  };

  /** One request; `again` when a reused socket was reset before any answer (sent once more by `send`). */
  const attempt = (
    headers: Record<string, string>,
    body: string | Buffer,
    signal: AbortSignal | undefined,
  ): Promise<PublishOutcome | 'again'> =>
    new Promise((resolve) => {
      let request: http.ClientRequest | undefined;
      let answered = false;
      let done = false;
      const finish = (outcome: PublishOutcome | 'again') => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(outcome);
      };
      const onAbort = () => {
        finish({ kind: 'retry', error: 'aborted before the destination answered' });
        request?.destroy();
      };
      const timer = setTimeout(() => {
        finish({ kind: 'retry', error: `timeout after ${timeoutMs} ms` });
        request?.destroy();
      }, timeoutMs);
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      try {
        request = transport.request(url, { method, headers, agent });
      } catch (error) {
        // node:http checks names and values as it takes them: a static header from the configuration may fail here.
        return finish({
          kind: 'dead',
          error: `invalid request header: ${error instanceof Error ? error.message : String(error)}`,
        });
      }
      request.on('error', (error: NodeJS.ErrnoException) => {
        if (!answered && request?.reusedSocket && error.code === 'ECONNRESET') return finish('again');
        finish({ kind: 'retry', error: `network error: ${networkErrorText(error)}` });
      });
      request.on('response', (response) => {
        answered = true;
        const status = response.statusCode ?? 0;
        const verdict = classifyStatus(status, retryable);
        if (verdict === 'sent') {
          // Drain the body so the socket goes back to the agent for the next request.
          response.resume();
          return finish({ kind: 'sent' });
        }
        const chunks: Buffer[] = [];
        let size = 0;
        const conclude = (truncated: boolean) => {
          // A cut may split a multi-byte character; the decoder shows it as U+FFFD.
          const secrets = [...ownValues, headers['webhook-signature'] ?? ''].filter(
            (v) => v.length >= MIN_REDACTED_LENGTH,
          );
          const read = redactValues(
            new TextDecoder().decode(Buffer.concat(chunks).subarray(0, readLimit)),
            secrets,
          );
          const bytes = Buffer.from(read);
          const cut = truncated || bytes.byteLength > maxBody;
          const text = new TextDecoder().decode(bytes.subarray(0, maxBody)).trim();
          const shown = cut ? `${text}… (truncated at ${maxBody} bytes)` : text;
          const reason = response.statusMessage ? ` ${response.statusMessage}` : '';
          const error = `HTTP ${status}${reason}${shown ? `: ${shown}` : ''}`;
          if (verdict === 'dead') return finish({ kind: 'dead', error });
          const retryAfterMs = parseRetryAfter(response.headers['retry-after'], clock.now());
          finish(
            retryAfterMs === undefined ? { kind: 'retry', error } : { kind: 'retry', error, retryAfterMs },
          );
        };
        response.on('data', (chunk: Buffer) => {
          chunks.push(chunk);
          size += chunk.byteLength;
          if (size > readLimit) {
            conclude(true);
            // The rest is not wanted: closing the connection is cheaper than reading it.
            response.destroy();
          }
        });
        response.on('end', () => conclude(false));
        // Cut off mid-body: the status is what counts, with what arrived of the body.
        response.on('close', () => conclude(false));
      });
      request.end(body);
    });

  const send = async (message: OutgoingMessage, signal: AbortSignal | undefined): Promise<PublishOutcome> => {
    const text = JSON.stringify(message.payload) ?? 'null';
    const signed = requestHeaders(message, text);
    // node:http writes the header block together with a string body, in the body's encoding (UTF-8): one system
    // call, but a Latin-1 header value would go out as other bytes. With a Buffer body it writes the headers as
    // Latin-1, in a second call; so only requests with such a value pay for it.
    const body = Object.values(signed).some((v) => LATIN1_ONLY.test(v)) ? Buffer.from(text) : text;
    const headers = mergeHeaders(signed, { 'Content-Length': String(Buffer.byteLength(body)) });
    const outcome = await attempt(headers, body, signal);
    if (outcome !== 'again') return outcome;
    const second = await attempt(headers, body, signal);
    return second === 'again'
      ? { kind: 'retry', error: 'network error: ECONNRESET on a fresh connection' }
      : second;
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
      agent.destroy();
    },
  };
}

function networkErrorText(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  // A connection that tried several addresses fails with an AggregateError of them; some errors carry a cause.
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
