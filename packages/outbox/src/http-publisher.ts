import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import {
  type Clock,
  ConfigError,
  type ConfigIssue,
  type OutgoingMessage,
  type Publisher,
  type PublishOutcome,
  systemClock,
} from '@queuebox/core';
import type { Dispatcher, Client as UndiciClient } from 'undici';
import buildConnector from 'undici/lib/core/connect.js';
import undiciErrors from 'undici/lib/core/errors.js';
import Client from 'undici/lib/dispatcher/client.js';
import outboxPackage from '../package.json' with { type: 'json' };
import { parseRetryAfter } from './backoff.ts';
import { mergeHeaders } from './headers.ts';
import { DEFAULT_HTTP_TIMEOUT_MS, type DestinationOptions } from './options.ts';
import { createStandardWebhooksSigner, type StandardWebhooksSigner } from './standard-webhooks.ts';

/** The header that carries the outbox row id on every delivery, so a receiver can drop repeats. */
export const IDEMPOTENCY_HEADER = 'Idempotency-Key';

/**
 * The `User-Agent` of every delivery, `QueueBox/<version>`: a row's own (the original sender's client) is not passed
 * on, and a receiver's logs and firewall rules see who calls. A destination's static `User-Agent` header wins.
 */
export const USER_AGENT = `QueueBox/${outboxPackage.version}`;

export { DEFAULT_HTTP_TIMEOUT_MS } from './options.ts';
/** Default cap on requests in flight per destination. */
export const DEFAULT_MAX_CONCURRENCY = 16;
/**
 * Default number of response-body bytes kept in an error text: a short excerpt. `last_error` is shown to operators
 * and kept for days; a destination that echoes the request would otherwise copy our credentials into it.
 */
export const DEFAULT_MAX_ERROR_BODY_BYTES = 256;

/** Most characters of a response's reason phrase kept in an error (`HTTP 503 Service Unavailable`). */
const MAX_REASON_PHRASE = 64;

/** Most characters of a redirect's `Location` kept in an error: a URL, readable whole unless it is outlandish. */
const MAX_LOCATION = 256;

/**
 * Most bytes of a 2xx answer's body read: 8 KiB. The body is not wanted, but read to its end the connection stays
 * usable; an acknowledgement (`ok`, `{"received":true}`, an id) is far shorter, and 8 KiB comes within the first
 * round trip of an answer (a server's initial congestion window is 10 segments, about 14 KiB), so no such body costs
 * a wait of its own. Past it the row is sent and the connection is closed: a body that never ends (or an echo of a
 * large payload) would otherwise hold the row, and its connection, for the whole `timeoutMs`, and closing costs one
 * handshake for the next request (an outside audit).
 */
const MAX_SENT_BODY_BYTES = 8 * 1024;

/** Longest head of an interim (1xx) answer held back while it is looked at (undici's own header limit, 16 KiB). */
const MAX_INTERIM_HEAD_BYTES = 16 * 1024;

/** Shortest header value (or credential within one) that is taken out of an error excerpt. */
const MIN_REDACTED_LENGTH = 4;

/** Query parameter names that carry credentials (Azure Functions' `code`, `api_key`, `access_token`, `sig`, …). */
const CREDENTIAL_NAME = /(code|key|token|sig|secret|pass|pwd|auth|cred)/i;

/**
 * How long a value of the URL with no telling name must be to be taken for a credential: a Slack webhook's last
 * path segment is 24 characters, a Discord token 68; `version=2024` or `format=json` stay readable in an excerpt.
 */
const LONG_URL_VALUE = 16;

/**
 * The values of our own request that must never reach `last_error`: each static header's value, and its last word
 * too (`Bearer <token>` echoed as just the token), the password of the URL (and its user name when there is no
 * password or it is {@link LONG_URL_VALUE} characters or more), the values of its query whose names
 * carry credentials and any other query value or path segment of {@link LONG_URL_VALUE} characters or more (a
 * credential such as Azure Functions' `?code=` or Slack's `/services/T…/B…/<secret>`, echoed as the request URL),
 * as written in the URL and decoded. The signature is added per request (`signatureValues`).
 */
function ownHeaderValues(staticHeaders: Readonly<Record<string, string>>, url: URL): string[] {
  const values = new Set<string>([url.password, safeDecode(url.password)]);
  // A user name is a credential when it is the only one (Stripe's `https://sk_live_…:@api…`) or as long as a key.
  if (url.password === '' || url.username.length >= LONG_URL_VALUE) {
    values.add(url.username);
    values.add(safeDecode(url.username));
  }
  for (const value of Object.values(staticHeaders)) {
    values.add(value);
    const last = value.trim().split(/\s+/).pop();
    if (last !== undefined) values.add(last);
  }
  const add = (raw: string, credential: boolean) => {
    const decoded = safeDecode(raw.replaceAll('+', ' '));
    if (!credential && raw.length < LONG_URL_VALUE && decoded.length < LONG_URL_VALUE) return;
    values.add(raw);
    values.add(decoded);
  };
  for (const pair of url.search.slice(1).split('&')) {
    const at = pair.indexOf('=');
    if (at < 0) add(pair, false);
    else add(pair.slice(at + 1), CREDENTIAL_NAME.test(safeDecode(pair.slice(0, at))));
  }
  for (const segment of url.pathname.split('/')) add(segment, false);
  return [...values].filter((v) => v.length >= MIN_REDACTED_LENGTH).sort((a, b) => b.length - a.length);
}

/** `text` percent-decoded, or as it is when it is not valid percent-encoding. */
function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * The values of a `webhook-signature` header to take out of an error: the whole header, each `v1,<signature>` of a
 * rotation, and each signature without its version (a verifier may name any of them).
 */
function signatureValues(header: string): string[] {
  const values = new Set<string>([header]);
  for (const entry of header.split(' ')) {
    values.add(entry);
    values.add(entry.slice(entry.indexOf(',') + 1));
  }
  return [...values];
}

/**
 * A run of digit groups, single spaces or dashes between them, of at least 13 digits (a payment card number's
 * shortest), however long: a card number may follow other digits (a date, a reference) in one run.
 */
const DIGIT_RUN = /(?<!\d)\d(?:[ -]?\d){12,}(?!\d)/g;

/**
 * `text` with every digit run that is a valid payment card number (13–19 digits passing the Luhn check) replaced by
 * `***`: a destination that answers an error by echoing the request would otherwise put the card numbers of a
 * payload into `last_error` and the WARN lines about it (an outside audit).
 */
export function maskCardNumbers(text: string): string {
  return text.replace(DIGIT_RUN, maskDigitRun);
}

/**
 * A run of digit groups with any card number in it masked: the whole run when it has 13–19 digits and passes the
 * Luhn check, else each longest span of whole groups of 13–19 digits that does, from the left. A card number beside other digits (`4111 1111 1111 1111
 * 12/25`, `ref 12 4111-1111-1111-1111`) is one run that fails the check as a whole (an outside review).
 */
function maskDigitRun(run: string): string {
  const all = run.replace(/[ -]/g, '');
  if (all.length <= 19 && luhnValid(all)) return '***';
  // Groups at even indexes, their separators at odd ones.
  const parts = run.split(/([ -])/);
  const groups = parts.filter((_, i) => i % 2 === 0);
  const masked = groups.map(() => false);
  for (let i = 0; i < groups.length; i++) {
    let last = -1;
    let digits = '';
    for (let j = i; j < groups.length && digits.length <= 19; j++) {
      digits += groups[j];
      if (digits.length >= 13 && digits.length <= 19 && luhnValid(digits)) last = j;
    }
    if (last < 0) continue;
    for (let k = i; k <= last; k++) masked[k] = true;
    i = last;
  }
  if (!masked.includes(true)) return run;
  let out = '';
  for (let g = 0; g < groups.length; g++) {
    if (masked[g]) {
      if (g === 0 || !masked[g - 1]) out += '***';
    } else out += groups[g];
    const separator = parts[2 * g + 1];
    if (separator !== undefined && !(masked[g] && masked[g + 1])) out += separator;
  }
  return out;
}

function luhnValid(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let digit = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) {
      digit *= 2;
      if (digit > 9) digit -= 9;
    }
    sum += digit;
  }
  return sum % 10 === 0;
}

/** `text` with every occurrence of `values` replaced by `***`. */
function redactValues(text: string, values: readonly string[]): string {
  let out = text;
  for (const value of values) out = out.split(value).join('***');
  return out;
}

// Hop-by-hop and framing headers describe the request a row came in on, not the one we send (we re-serialize the
// payload), and node:http would send a second, contradicting value for some of them. The body is always JSON we
// wrote, so a row's Content-Type (a sender's `text/html; charset=iso-8859-1`) never describes it.
// `Proxy` and every `Proxy-*` header go too (`Proxy` is httpoxy's vector; the inbox no longer stores any of them,
// and a row stored before it did must not carry them on).
const DROPPED_ROW_HEADERS = new Set([
  'content-type',
  'connection',
  'keep-alive',
  'proxy',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'host',
  'content-length',
  'content-encoding',
  'expect',
  // Request-bound headers: they describe the original request's bytes, conditions or route, not ours (an outside
  // audit: a receiver checking `Content-Digest` refused every relayed delivery, since we re-serialize the body).
  // `If-*` and `Want-*Digest` go by prefix (`isRequestBoundHeader`). The row's `User-Agent` names the original
  // sender's client; ours is QueueBox's.
  'content-digest',
  'repr-digest',
  'digest',
  'content-md5',
  'content-range',
  'range',
  'date',
  'max-forwards',
  'user-agent',
]);

/**
 * Whether a row header (its lower-case name) is a conditional (`If-Match`, `If-None-Match`, `If-Modified-Since`,
 * `If-Range`, …) or a digest preference (`Want-Digest`, `Want-Content-Digest`, `Want-Repr-Digest`) of the request it
 * came in on: a condition on the original resource, or a digest asked of an answer we read no further than its
 * status.
 */
function isRequestBoundHeader(name: string): boolean {
  return name.startsWith('if-') || (name.startsWith('want-') && name.endsWith('digest'));
}

// A row's own signature headers go too, signing or not: they are QueueBox's to set. A row relayed from a Standard
// Webhooks or Svix source carries the inbound id, time and signature; without signing they would reach the
// destination as a signature we never made (and over a body we re-serialized), and with signing Svix's own verifier
// reads svix-* before webhook-*, pairing that id and time with our signature.
const SIGNATURE_HEADERS = new Set([
  'webhook-id',
  'webhook-timestamp',
  'webhook-signature',
  'svix-id',
  'svix-timestamp',
  'svix-signature',
]);

/** What an HTTP status means for the row. */
export type StatusClass = 'sent' | 'retry';

/**
 * docs/design.md §5: 2xx sent; any other final status retried (3xx too: redirects are not followed), with its
 * `Retry-After`, until the row's attempts run out. The specification's state table lets a row go dead only when no
 * attempt remains, no route matches or a transform dead-letters it, so a 4xx is no exception: a receiver that answers
 * 401 during a key rotation, 404 during a deploy or 409 for a message it already has would otherwise dead-letter a
 * payment event with its attempts unused. The publisher never classifies a 1xx: it is an informational answer
 * before the final one, which it waits for.
 */
export function classifyStatus(status: number): StatusClass {
  return status >= 200 && status < 300 ? 'sent' : 'retry';
}

/** Options of `createHttpPublisher`: an `http` destination, plus its name for error paths. */
export interface HttpPublisherOptions extends DestinationOptions {
  /** The destination's name (for error messages). Default `http`. */
  readonly name?: string;
  /**
   * Response-body bytes kept in an error text; 0 keeps none (the status, reason phrase and a 3xx's `Location` only).
   * Default 256.
   */
  readonly maxErrorBodyBytes?: number;
  /**
   * Longest wait of a message for one of the `maxConcurrency` connections; then it is answered `retry`, `unstarted`
   * (the outbox gives the row back untried, behind the rows due before it). Default
   * {@link DEFAULT_LANE_WAIT_MS}.
   */
  readonly laneWaitMs?: number;
}

/**
 * Default longest wait for a connection: 1 s. A destination that answers keeps its connections turning over in
 * milliseconds (a batch of 400 rows on 16 connections waits tens of ms at most, even at thousands of rows a second);
 * all 16 busy for a whole second means a destination that hangs or crawls, and the rows queued behind it would hold
 * the batches they came in with, and every other destination's rows in them.
 */
export const DEFAULT_LANE_WAIT_MS = 1000;

/** Longest pause before a row given back for busy connections is due again: 30 s. */
export const MAX_LANE_RELEASE_DELAY_MS = 30_000;

/**
 * Longest pause of a destination that answered with `Retry-After`: 10 minutes, the default backoff's ceiling. The
 * pause is this process's; a value beyond it (`Retry-After: 86400` by mistake) pauses this long, and the rows' own
 * retries honour it within their backoff's `maxMs`.
 */
export const MAX_RETRY_AFTER_PAUSE_MS = 600_000;

/** Injectable collaborators of `createHttpPublisher`. */
export interface HttpPublisherDeps {
  /** Source of webhook-timestamp. Default: the system clock. */
  readonly clock?: Clock;
  /**
   * Milliseconds of a monotonic clock, for durations: the `Retry-After` pause and the connections' pace. Not the wall
   * clock, which a step (an NTP correction, a resumed VM) moves: a 5 s pause lasted 125 s after a step back of 120 s.
   * Default `performance.now`.
   */
  readonly monotonic?: () => number;
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
  // Header names are case-insensitive: `Host` and `host` would both go out, and undici refuses every such request
  // (an outside audit: each row went dead at once), so a second spelling of a name is refused here, before the start.
  const spelled = new Map<string, string>();
  for (const [header, value] of Object.entries(options.headers ?? {})) {
    const earlier = spelled.get(header.toLowerCase());
    const problem =
      earlier === undefined
        ? staticHeaderProblem(header, value)
        : `is the same header as ${earlier} (names differ only in letter case); keep one of them`;
    spelled.set(header.toLowerCase(), earlier ?? header);
    if (problem !== undefined) issues.push({ path: `${base}.headers.${header}`, message: problem });
  }
  return issues;
}

/**
 * Headers the HTTP client sets for each request (framing, the connection): a static value would contradict it, and
 * undici refuses most of them before sending.
 */
const CLIENT_SET_HEADERS = new Set([
  'content-length',
  'transfer-encoding',
  'keep-alive',
  'upgrade',
  'expect',
  'te',
  'trailer',
  'proxy-connection',
]);

/**
 * Why a static header of a destination cannot go out, or undefined. Checked on the resolved value (a `secret://`
 * reference is read before the publisher is made), so that a destination no request of which could be sent stops
 * the start, instead of dead-lettering every row without one request going out.
 */
function staticHeaderProblem(header: string, value: unknown): string | undefined {
  if (!HEADER_NAME.test(header)) return 'is not an HTTP header name (RFC 9110 token characters only)';
  if (CLIENT_SET_HEADERS.has(header.toLowerCase())) {
    return 'is set by the HTTP client for each request; remove it';
  }
  if (typeof value !== 'string') return 'must be text';
  // Named by code point only: a position would tell a secret's length.
  const bad = /[^\t\x20-\x7e\x80-\xff]/u.exec(value);
  if (bad !== null) {
    const code = `U+${(bad[0].codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
    const hint = bad[0] === '\n' || bad[0] === '\r' ? ' (a secret stored with a trailing line break?)' : '';
    return `its value holds ${code}, which an HTTP header cannot carry${hint}`;
  }
  return undefined;
}

/** An HTTP header name (RFC 9110 token). Row headers with other names are left out of the request. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** What HTTP carries in a value (visible ASCII, space, tab, Latin-1 obs-text): anything else is percent-encoded (UTF-8). */
const PLAIN_HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * A publisher for one `http` destination.
 *
 * Each message is one request: `method` (default POST) to `url`, body the JSON payload, headers the row's headers
 * (hop-by-hop and framing headers, `Content-Type` and the row's own `webhook-*`/`svix-*` signature headers dropped;
 * of names differing only in letter case the last), then the destination's static headers (which win),
 * `Content-Type: application/json` unless a static header sets one, {@link USER_AGENT} unless a static header sets
 * one, `Idempotency-Key: <message id>` (`message.id`:
 * `<install id>-<row id>` for an outbox row), and with signing the Standard Webhooks headers (webhook-id is the message
 * id), signed as the request goes out, after any wait for a connection. A row's request-bound headers (digests,
 * ranges, `If-*` conditions, `Date`, `Max-Forwards`, `User-Agent`) are dropped with the hop-by-hop ones. Redirects are
 * not followed (a 3xx's `Location`, redacted, goes into the error); informational 1xx answers, an unsolicited
 * `100 Continue` too, are read past. The final status decides, also when the body is still arriving at the timeout
 * (or the caller's abort), or a 2xx body goes on past {@link MAX_SENT_BODY_BYTES}; that connection is then closed.
 * An error response body is read only up to
 * `maxErrorBodyBytes` (default 256): the error keeps the status and that excerpt, with the values of our own static
 * headers, of the URL's password, of its credential-named or long query values and long path segments, and the
 * signatures taken out (a destination that echoes the request must
 * not copy them into `last_error`). At most `maxConcurrency` (default 16) requests are in flight; the rest wait, at
 * most `laneWaitMs` (1 s), then they are answered `retry`, `unstarted` (given back untried). A 429 or 503 that
 * carries a `Retry-After` pauses the destination (at most `MAX_RETRY_AFTER_PAUSE_MS`): until then every message is
 * answered `retry`, `unstarted`, with the pause's rest as `retryAfterMs`, and nothing is sent.
 *
 * The transport is undici: at most `maxConcurrency` `Client`s for the destination's origin, each one kept-alive
 * connection carrying one request at a time (the most recently freed is used first, so sequential requests share
 * one connection), driven through `dispatch` with a small handler per request (no streams), which
 * costs a fraction of node:http's client per request. An idle connection is let go before the `Keep-Alive:
 * timeout` the server announced. Header values go out as Latin-1 bytes. A request whose kept-alive connection
 * (one that had already served answers) was closed or reset (FIN, `ECONNRESET`, `EPIPE`) before a byte of its
 * answer — the server closed an idle connection just as we sent — is sent once more; undici then opens a fresh
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
  const maxBody = options.maxErrorBodyBytes ?? DEFAULT_MAX_ERROR_BODY_BYTES;
  const maxConcurrency = options.maxConcurrency ?? DEFAULT_MAX_CONCURRENCY;
  const laneWaitMs = options.laneWaitMs ?? DEFAULT_LANE_WAIT_MS;
  // A static header replaces the URL's credentials' in any letter case (a spread sent `Authorization: Basic …` and
  // `authorization: Bearer …` both, and a receiver read the first: a review).
  const staticHeaders: Record<string, string> = mergeHeaders(credentialsOf(url), options.headers);
  const ownValues = ownHeaderValues(staticHeaders, url);
  // Ours under the static headers, which may name another User-Agent; not among the values redacted from an excerpt.
  const fixedHeaders = mergeHeaders({ 'User-Agent': USER_AGENT }, staticHeaders);
  // Read a little past the excerpt, so a value cut at its end is still recognised and removed. A signature header
  // holds one `v1,<44 base64 characters>` per secret.
  const signatureLength = signer === undefined ? 0 : (options.signing?.secrets.length ?? 0) * 48;
  const readLimit = maxBody + Math.max(128, signatureLength, ...ownValues.map((v) => Buffer.byteLength(v)));
  const clock = deps.clock ?? systemClock;
  const monotonic = deps.monotonic ?? (() => performance.now());
  const path = `${url.pathname}${url.search}`;
  const connections = createConnections(url.origin, maxConcurrency, timeoutMs, monotonic);
  const inFlight = new Set<Promise<unknown>>();
  let closed = false;
  // Row headers are usually empty and there are no static ones: then every request carries the same names.
  const hasContentType = Object.keys(staticHeaders).some((h) => h.toLowerCase() === 'content-type');

  /** The headers of a request for `message`, without the signature (`signed` adds it as the request goes out). */
  const requestHeaders = (message: OutgoingMessage): Record<string, string> => {
    let merged: Record<string, string> = fixedHeaders;
    if (hasAny(message.headers)) {
      const fromRow: Record<string, string> = {};
      // Row header names that differ only in letter case are one header: the last of them is sent (under its own
      // spelling), as `mergeHeaders` merges a transform's headers into the row's.
      let seen: Map<string, string> | undefined;
      for (const [header, value] of Object.entries(message.headers)) {
        const name = header.toLowerCase();
        if (
          DROPPED_ROW_HEADERS.has(name) ||
          SIGNATURE_HEADERS.has(name) ||
          name.startsWith('proxy-') ||
          isRequestBoundHeader(name) ||
          !HEADER_NAME.test(header)
        )
          continue;
        seen ??= new Map();
        const earlier = seen.get(name);
        if (earlier !== undefined) delete fromRow[earlier];
        seen.set(name, header);
        // A row header may hold any text (a relayed idempotency key in Chinese, a line break from a broker header);
        // HTTP cannot carry that as is, so such a value travels percent-encoded rather than killing the delivery.
        fromRow[header] = PLAIN_HEADER_VALUE.test(value) ? value : encodeURIComponent(value);
      }
      merged = mergeHeaders(fromRow, fixedHeaders);
      if (!Object.keys(merged).some((h) => h.toLowerCase() === 'content-type')) {
        merged = { ...merged, 'Content-Type': 'application/json' };
      }
    } else if (!hasContentType) {
      merged = { ...merged, 'Content-Type': 'application/json' };
    }
    return mergeHeaders(merged, { [IDEMPOTENCY_HEADER]: message.id });
  };

  /**
   * `headers` with the Standard Webhooks headers, signed now: called as the request goes out, after any wait for a
   * connection, so that `webhook-timestamp` is the time of sending. A request queued behind `maxConcurrency` slow
   * ones would otherwise arrive with an old timestamp, which a verifier refuses past its tolerance (5 minutes).
   */
  const signed = (headers: Record<string, string>, id: string, body: string): Record<string, string> =>
    signer === undefined ? headers : mergeHeaders(headers, { ...signer.sign(id, clock.now() / 1000, body) });

  // Until when the destination asked to be left alone (`Retry-After` on a 429 or a 503), by `monotonic`.
  let pausedUntil = Number.NEGATIVE_INFINITY;
  /**
   * A 429 (too many requests) or 503 (unavailable) with a `Retry-After` speaks for the whole destination; another
   * status with one (a 413 for one large row, a 3xx) speaks for its request alone, whose row honours it in its own
   * retry (an outside review: a 413 with `Retry-After` paused every key of the destination for each of its attempts).
   */
  const pauseFor = (status: number, retryAfterMs: number) => {
    if ((status !== 429 && status !== 503) || !(retryAfterMs > 0)) return;
    pausedUntil = Math.max(pausedUntil, monotonic() + Math.min(retryAfterMs, MAX_RETRY_AFTER_PAUSE_MS));
  };
  const context = { path, method, timeoutMs, maxBody, readLimit, ownValues, clock, pauseFor };
  /** When the last row given back for want of a connection is due again (see `send`). */
  let releaseHorizon = 0;

  /**
   * A destination that answered 429 or 503 with `Retry-After` has said when it takes requests again. The messages
   * that come before then are given back untried (no attempt counted), due when the pause ends, instead of each
   * being sent once, answered the same and spending an attempt (an outside audit: with `Retry-After: 3600` every
   * new row still went out once). Checked before the wait for a connection and again after it.
   */
  const paused = (): PublishOutcome | undefined => {
    const leftMs = pausedUntil - monotonic();
    if (!(leftMs > 0)) return undefined;
    // Shown as wall time.
    const until = new Date(clock.now() + leftMs).toISOString();
    return {
      kind: 'retry',
      error: `destination "${name}" asked for a pause (Retry-After) until ${until}`,
      unstarted: true,
      retryAfterMs: leftMs,
    };
  };

  const send = async (
    message: OutgoingMessage,
    signal: AbortSignal | undefined,
    startBy: number | undefined,
  ): Promise<PublishOutcome> => {
    const pausedBefore = paused();
    if (pausedBefore !== undefined) return pausedBefore;
    const headers = requestHeaders(message);
    // All busy and none moved for laneWaitMs already: not queued at all (see below).
    const stuckForMs = connections.stuckForMs(monotonic());
    const lane =
      connections.take() ?? (stuckForMs >= laneWaitMs ? undefined : await connections.wait(laneWaitMs));
    if (lane === undefined) {
      // Every connection has been busy for laneWaitMs: a destination that hangs, or answers slowly. Waiting on
      // would keep this row, and the batch it came in with, from settling: the rows of every other destination
      // claimed beside it waited too (an outside audit: one hanging destination held a healthy one's rows for
      // minutes). Given back untried, it is claimed again behind the rows due before it; while no connection
      // moves, the next rows are given back at once, without waiting.
      // Due again after a pause as long as the connections have been stuck (at least laneWaitMs, at most
      // MAX_LANE_RELEASE_DELAY_MS): a hanging destination's backlog is not claimed and given back in a loop. And
      // spaced by the destination's pace: each row given back is due one answer's interval after the one before
      // it, so a slow destination's backlog comes back at about the rate it is served. Before (an outside overload
      // audit), a destination answering in 2 s, whose connections still moved every 125 ms, had its whole backlog
      // of 3,000 rows claimed and given back about once a second: 2,300-2,970 row updates a second, and the rows
      // of fast destinations waited 3-5 s for a place in the claims.
      // By `monotonic`, as the horizon: a row's delay is a duration.
      const now = monotonic();
      const due = Math.max(now + Math.max(laneWaitMs, stuckForMs), releaseHorizon);
      // Never further than the longest delay: rows past it are all due then, and the horizon never runs ahead of it.
      releaseHorizon = Math.min(due + connections.answerIntervalMs(), now + MAX_LANE_RELEASE_DELAY_MS);
      return {
        kind: 'retry',
        error: `no connection to destination "${name}" came free within ${laneWaitMs} ms (all ${maxConcurrency} busy)`,
        unstarted: true,
        retryAfterMs: Math.min(MAX_LANE_RELEASE_DELAY_MS, due - now),
      };
    }
    try {
      if (signal?.aborted) return { kind: 'retry', error: 'aborted before it was sent', unstarted: true };
      const pausedWhileWaiting = paused();
      if (pausedWhileWaiting !== undefined) return pausedWhileWaiting;
      if (startBy !== undefined && clock.now() > startBy) {
        // It waited for a connection past the last moment its whole timeout fitted the caller's deadline.
        return {
          kind: 'retry',
          error: 'not started: too late for the drain to wait out its timeout',
          unstarted: true,
        };
      }
      // Serialized once a connection is ours, not before the wait for one: rows queued behind `maxConcurrency`
      // requests (a batch of 200, two batches in flight) held a body each, all of a backlog of large payloads.
      const body = JSON.stringify(message.payload) ?? 'null';
      // Signed per request, as it goes out (`signed`).
      const exchange = () =>
        new Exchange(context, lane, signed(headers, message.id, body), body, signal).done;
      let outcome = await exchange();
      if (outcome === 'again') outcome = await exchange();
      if (outcome === 'again')
        return { kind: 'retry', error: 'network error: connection reset on a fresh connection' };
      return outcome;
    } finally {
      connections.give(lane);
    }
  };
  return {
    async publish(message, signal, options) {
      if (closed) return { kind: 'retry', error: `publisher for destination ${name} is closed` };
      const work = send(message, signal, options?.startBy);
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
      await connections.close();
    },
  };
}

function hasAny(record: Readonly<Record<string, unknown>>): boolean {
  for (const _ in record) return true;
  return false;
}

/** `Authorization: Basic` from credentials in the URL, as node:http sent them. */
function credentialsOf(url: URL): Record<string, string> {
  if (url.username === '' && url.password === '') return {};
  const credentials = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
  return { Authorization: `Basic ${Buffer.from(credentials).toString('base64')}` };
}

/**
 * One undici client (one connection at a time, one request at a time) and what its connection had read when its
 * last answer ended: a reset with nothing read since is a kept-alive connection closed as we sent (send again);
 * anything read since is the start of this request's answer (the server has the request: never send again).
 */
interface Lane {
  readonly client: UndiciClient;
  /** The client's current connection, as its connector opened it. */
  socket: Socket | undefined;
  /** `socket.bytesRead` when the last answer on it ended; 0 on a connection that has served none. */
  readAtLastAnswer: number;
  /** The next bytes of the connection begin an answer: a `100 Continue` there is left out (`skipContinues`). */
  answerStart: boolean;
  /** When it was last handed out (the monotonic clock's ms), for the destination's pace. */
  takenAt: number;
}

/** At most `limit` lanes of one origin, handed out one request at a time. */
interface Connections {
  /** A free lane, or undefined when all `limit` are busy. */
  take(): Lane | undefined;
  /** The next lane given back, in the order of the calls; undefined when none came within `patienceMs`. */
  wait(patienceMs: number): Promise<Lane | undefined>;
  /** Milliseconds since a lane was last taken or given back (0 while one is free). */
  stuckForMs(now: number): number;
  /**
   * The destination's pace with every connection busy: how long a lane is held (a moving average of its recent
   * answers, the time from its take to its give) ÷ the connections; 0 before one was given back.
   */
  answerIntervalMs(): number;
  give(lane: Lane): void;
  close(): Promise<void>;
}

function createConnections(origin: string, limit: number, timeoutMs: number, now: () => number): Connections {
  const all: Lane[] = [];
  const free: Lane[] = [];
  const waiters: ((lane: Lane) => void)[] = [];
  /** When a lane was last taken or given back. */
  let movedAt = now();
  /** The moving average of how long a lane is held (see answerIntervalMs). */
  let held = 0;
  // undici's own connector, as a Client builds it without options; wrapped so each lane knows its socket.
  const connector = buildConnector({});
  return {
    take() {
      const lane = free.pop();
      if (lane !== undefined) {
        movedAt = now();
        lane.takenAt = movedAt;
      }
      if (lane !== undefined || all.length >= limit) return lane;
      movedAt = now();
      const fresh: {
        client?: UndiciClient;
        socket: Socket | undefined;
        readAtLastAnswer: number;
        answerStart: boolean;
        takenAt: number;
      } = {
        socket: undefined,
        readAtLastAnswer: 0,
        answerStart: false,
        takenAt: movedAt,
      };
      // The timeouts of undici's own only matter for a body that trickles in: ours covers the whole request.
      const client = new Client(origin, {
        pipelining: 1,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        connect: (options, callback) =>
          connector(options, (...result) => {
            // A failed connect leaves no socket: an error then is no reset of a kept-alive connection.
            const socket = result[0] ? undefined : (result[1] ?? undefined);
            fresh.socket = socket;
            fresh.readAtLastAnswer = 0;
            if (socket !== undefined) skipContinues(socket, fresh);
            callback(...result);
          }),
      });
      const made: Lane = Object.assign(fresh, { client });
      all.push(made);
      return made;
    },
    wait(patienceMs) {
      return new Promise((resolve) => {
        const waiter = (lane: Lane) => {
          clearTimeout(timer);
          resolve(lane);
        };
        const timer = setTimeout(() => {
          const at = waiters.indexOf(waiter);
          if (at >= 0) waiters.splice(at, 1);
          resolve(undefined);
        }, patienceMs);
        waiters.push(waiter);
      });
    },
    stuckForMs(at) {
      return free.length > 0 || all.length < limit ? 0 : at - movedAt;
    },
    answerIntervalMs() {
      return held / limit;
    },
    give(lane) {
      movedAt = now();
      const since = lane.takenAt;
      held = held === 0 ? movedAt - since : held * 0.8 + (movedAt - since) * 0.2;
      const waiter = waiters.shift();
      if (waiter !== undefined) {
        lane.takenAt = movedAt;
        waiter(lane);
      } else free.push(lane);
    },
    async close() {
      await Promise.allSettled(all.map((lane) => lane.client.destroy()));
    },
  };
}

/**
 * Makes `socket.read()`, through which undici's HTTP/1.1 parser takes every byte of a connection, leave out each
 * `100 Continue` at the start of an answer. RFC 9110 §15.2 has a client read past an unexpected 1xx (and lets it
 * discard a 100), but undici (to 8.14.1, the latest at the time) closes the connection on a 100 it did not ask for
 * ("bad response"): the server had the request, often processed it, yet each attempt was a network error and sent
 * it again, until the row went dead (an outside audit). Taking the 100 out lets undici read the final answer, which
 * decides as always. Only the start of an answer is looked at (`Lane.answerStart`, set as a request goes out): bytes
 * are held back only while they may still be the head of a 1xx; other 1xx heads pass (undici reads past them), and
 * once a final status line begins, everything passes untouched. Sized reads (the stream's own `read(0)`) pass too.
 * Should undici stop reading this way, the 100 is refused again as before: a test sees it.
 */
function skipContinues(socket: Socket, lane: { answerStart: boolean }) {
  const read = socket.read.bind(socket);
  /** The start of an answer read so far that may still be a 1xx head. */
  let held: Buffer | undefined;
  socket.read = (size?: number) => {
    if (size !== undefined) return read(size);
    for (;;) {
      const chunk: Buffer | null = read();
      if (!lane.answerStart || chunk === null) return chunk;
      let data = held === undefined ? chunk : Buffer.concat([held, chunk]);
      held = undefined;
      const passed: Buffer[] = [];
      for (;;) {
        const end = interimHeadEnd(data);
        if (end === undefined) {
          lane.answerStart = false;
          passed.push(data);
          break;
        }
        if (end === 0) {
          if (data.byteLength > 0) held = data;
          break;
        }
        // `HTTP/1.1 100` ends at byte 12.
        if (data.toString('latin1', 9, 12) !== '100') passed.push(data.subarray(0, end));
        data = data.subarray(end);
      }
      if (passed.length > 0) return passed.length === 1 ? passed[0] : Buffer.concat(passed);
    }
  };
}

/**
 * Where the 1xx head (other than 101 Switching Protocols) that `data` begins with ends; 0 when `data` may yet be
 * one (too short to tell, or its head not ended within {@link MAX_INTERIM_HEAD_BYTES}); undefined when it is not.
 */
function interimHeadEnd(data: Buffer): number | undefined {
  // `HTTP/1.x 1dd` and a space (or the line's end when the reason phrase is empty).
  const known = Math.min(data.byteLength, 13);
  for (let i = 0; i < known; i++) {
    const c = data[i] as number;
    const fits =
      i < 7
        ? c === INTERIM_PREFIX.charCodeAt(i)
        : i === 7
          ? c === 0x30 || c === 0x31
          : i === 8
            ? c === 0x20
            : i === 9
              ? c === 0x31
              : i < 12
                ? c >= 0x30 && c <= 0x39
                : c === 0x20 || c === 0x0d;
    if (!fits) return undefined;
  }
  if (known >= 12 && data[10] === 0x30 && data[11] === 0x31) return undefined;
  const end = data.indexOf('\r\n\r\n');
  // A line ended by a bare LF: no head this reads (a parser that took bare LF would end the 1xx at its first blank
  // line, not at a later CRLF one, which can be the final answer's: a 500 whose body holds a 200 head read as sent,
  // an outside security review). Passed on as it is, and undici refuses it, as it refuses any bare LF.
  const scanned = end >= 0 ? end : data.byteLength;
  for (let i = data.indexOf(0x0a); i !== -1 && i < scanned; i = data.indexOf(0x0a, i + 1)) {
    if (i === 0 || data[i - 1] !== 0x0d) return undefined;
  }
  if (end >= 0) return end + 4;
  return data.byteLength > MAX_INTERIM_HEAD_BYTES ? undefined : 0;
}

const INTERIM_PREFIX = 'HTTP/1.';

/** What every request of one publisher shares. */
interface ExchangeContext {
  readonly path: string;
  readonly method: string;
  readonly timeoutMs: number;
  readonly maxBody: number;
  /** Bytes of an error body read: `maxBody` and a margin, so a value cut at the excerpt's end is still removed. */
  readonly readLimit: number;
  /** Our own header values, longest first, taken out of an error excerpt. */
  readonly ownValues: readonly string[];
  readonly clock: Clock;
  /** Told the status and `Retry-After` of an answer that is not a 2xx (the destination's pause). */
  readonly pauseFor: (status: number, retryAfterMs: number) => void;
}

/**
 * One request on one client, as undici's dispatch handler: a class rather than closures, because this runs once
 * per row and undici calls the handler's methods directly (no streams, no promise per chunk). `done` resolves with
 * the outcome, or `again` when a kept-alive connection that had already served answers was reset before a byte
 * of the answer to this request (the server closed it as we sent): `send` tries once more.
 */
class Exchange {
  readonly done: Promise<PublishOutcome | 'again'>;
  private resolve!: (outcome: PublishOutcome | 'again') => void;
  private finished = false;
  private answered = false;
  /** An informational 1xx came: the server has the request, so a reset now is no stale kept-alive connection. */
  private informational = false;
  private controller: Dispatcher.DispatchController | null = null;
  private readonly timer: NodeJS.Timeout;
  private status = 0;
  private statusText = '';
  private retryAfter: string | undefined;
  /** The `Location` of a 3xx. */
  private location: string | undefined;
  private verdict: StatusClass = 'sent';
  private chunks: Buffer[] | undefined;
  private size = 0;
  private readonly onAbort: (() => void) | undefined;
  private readonly context: ExchangeContext;
  private readonly signal: AbortSignal | undefined;
  private readonly signature: string | undefined;
  private readonly lane: Lane;

  constructor(
    context: ExchangeContext,
    lane: Lane,
    headers: Record<string, string>,
    body: string,
    signal: AbortSignal | undefined,
  ) {
    this.context = context;
    this.lane = lane;
    this.signal = signal;
    this.signature = headers['webhook-signature'];
    this.done = new Promise((resolve) => {
      this.resolve = resolve;
    });
    this.timer = setTimeout(this.onTimeout, context.timeoutMs);
    if (signal?.aborted) {
      this.onAbort = undefined;
      this.finish({ kind: 'retry', error: 'aborted before the destination answered' });
      return;
    }
    if (signal !== undefined) {
      this.onAbort = () => this.stop('aborted before the destination answered');
      signal.addEventListener('abort', this.onAbort, { once: true });
    }
    lane.answerStart = true;
    lane.client.dispatch({ path: context.path, method: context.method, headers, body }, this);
  }

  private readonly onTimeout = () => {
    this.stop(`timeout after ${this.context.timeoutMs} ms`);
  };

  /**
   * Ends the exchange and closes its connection (a body not read to its end leaves it unusable). Before the final
   * status, the row is retried for `reason`; once it came, the status decides as always (a 2xx is sent, whatever
   * of its body is missing; an error status keeps what arrived of its body), since the destination has answered.
   */
  private stop(reason: string) {
    if (!this.answered) this.finish({ kind: 'retry', error: reason });
    else if (this.verdict === 'sent') this.finish({ kind: 'sent' });
    else this.conclude(false);
    this.controller?.abort(new Error(reason));
  }

  private finish(outcome: PublishOutcome | 'again') {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.timer);
    if (this.onAbort !== undefined) this.signal?.removeEventListener('abort', this.onAbort);
    this.resolve(outcome);
  }

  onRequestStart(controller: Dispatcher.DispatchController) {
    this.controller = controller;
    if (this.finished) controller.abort(new Error('stopped'));
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
    statusMessage?: string,
  ) {
    // An informational answer (102 Processing, 103 Early Hints) comes before the final one (RFC 9110 §15.2): it is
    // not the answer. undici passes them here and the final response follows on the same exchange. (An unsolicited
    // 100 Continue, which undici would refuse, never reaches it: `skipContinues`.)
    if (statusCode < 200) {
      this.informational = true;
      return;
    }
    if (this.finished) return;
    this.answered = true;
    this.status = statusCode;
    this.verdict = classifyStatus(statusCode);
    // The body of a 2xx is not wanted: undici reads it off the connection, and the row counts as sent once the
    // connection is free for the next request (onResponseEnd), so requests in flight never outnumber connections.
    if (this.verdict === 'sent') return;
    this.statusText = statusMessage ?? '';
    // Redirects are not followed, but where one points tells an operator what to change in the configuration.
    const location = statusCode >= 300 && statusCode < 400 ? headers.location : undefined;
    this.location = Array.isArray(location) ? location[0] : location;
    const retryAfter = headers['retry-after'];
    this.retryAfter = Array.isArray(retryAfter) ? retryAfter[0] : retryAfter;
    this.chunks = [];
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer) {
    if (this.finished) return;
    if (this.chunks === undefined) {
      // A 2xx: its body is read to its end only while short (see MAX_SENT_BODY_BYTES).
      this.size += chunk.byteLength;
      if (this.size > MAX_SENT_BODY_BYTES) {
        this.finish({ kind: 'sent' });
        controller.abort(new Error('2xx body too long'));
      }
      return;
    }
    this.chunks.push(chunk);
    this.size += chunk.byteLength;
    if (this.size > this.context.readLimit) {
      this.conclude(true);
      // The rest is not wanted: closing the connection is cheaper than reading it.
      controller.abort(new Error('error body too long'));
    }
  }

  onResponseEnd() {
    this.lane.readAtLastAnswer = this.lane.socket?.bytesRead ?? 0;
    if (this.chunks !== undefined) this.conclude(false);
    else this.finish({ kind: 'sent' });
  }

  onResponseError(_controller: Dispatcher.DispatchController | null, error: Error) {
    if (this.finished) return;
    // Cut off mid-body: the status is what counts, with what arrived of the body.
    if (this.answered) return this.verdict === 'sent' ? this.finish({ kind: 'sent' }) : this.conclude(false);
    if (error instanceof undiciErrors.InvalidArgumentError) {
      // undici checks names and values before sending: a static header from the configuration may fail here.
      return this.finish({ kind: 'dead', error: `invalid request header: ${error.message}` });
    }
    // Sent again only on a connection that had served answers and read nothing since (see Lane): a fresh
    // connection's reset, or one after the first bytes of this answer (a partial status line, an unsolicited 1xx),
    // means the server may have the request. undici reports a close (FIN) as a SocketError with the socket's counts,
    // but hands a reset (RST, how nginx or a load balancer closing an idle connection usually looks: `ECONNRESET`,
    // or `EPIPE` while writing) over as the raw error, without them: then the lane's socket, the one the request
    // went out on (a connect replaces it), tells (an outside audit: 3-6 of 80 rows spent an attempt on it).
    const read =
      (error as { socket?: { bytesRead?: number } }).socket?.bytesRead ?? this.lane.socket?.bytesRead ?? 0;
    if (isConnectionClosed(error) && !this.informational && read > 0 && read === this.lane.readAtLastAnswer)
      return this.finish('again');
    this.finish({ kind: 'retry', error: `network error: ${networkErrorText(error)}` });
  }

  private conclude(truncated: boolean) {
    const { maxBody, readLimit, ownValues, clock } = this.context;
    // Our own header values are taken out before the cut, so that no prefix of one is left at the excerpt's end;
    // longest first, so that a value containing another (the whole signature header, one of its signatures) goes whole.
    const own =
      this.signature === undefined
        ? ownValues
        : [...ownValues, ...signatureValues(this.signature)]
            .filter((v) => v.length >= MIN_REDACTED_LENGTH)
            .sort((a, b) => b.length - a.length);
    const read = maskCardNumbers(
      redactValues(new TextDecoder().decode(Buffer.concat(this.chunks ?? []).subarray(0, readLimit)), own),
    );
    const bytes = Buffer.from(read);
    // A cut may split a multi-byte character; the decoder shows it as U+FFFD.
    const text = new TextDecoder().decode(bytes.subarray(0, maxBody)).trim();
    const shown =
      maxBody === 0
        ? ''
        : truncated || bytes.byteLength > maxBody
          ? `${text}… (truncated at ${maxBody} bytes)`
          : text;
    // The reason phrase is the destination's text too: redacted and cut like the body.
    const phrase = maskCardNumbers(redactValues(this.statusText, own)).trim();
    const cut = phrase.length > MAX_REASON_PHRASE ? `${phrase.slice(0, MAX_REASON_PHRASE)}…` : phrase;
    const reason = cut ? ` ${cut}` : '';
    // A redirect's target may carry our credentials back (the URL's `?code=`, a token in its path): redacted too.
    const target =
      this.location === undefined ? '' : maskCardNumbers(redactValues(this.location, own)).trim();
    const where = target
      ? ` (Location: ${target.length > MAX_LOCATION ? `${target.slice(0, MAX_LOCATION)}…` : target})`
      : '';
    const error = `HTTP ${this.status}${reason}${where}${shown ? `: ${shown}` : ''}`;
    const retryAfterMs = parseRetryAfter(this.retryAfter, clock.now());
    if (retryAfterMs !== undefined) this.context.pauseFor(this.status, retryAfterMs);
    this.finish(
      retryAfterMs === undefined ? { kind: 'retry', error } : { kind: 'retry', error, retryAfterMs },
    );
  }
}

/** Whether `error` is the connection closed or reset under a request (not a refused connect, nor a parse error). */
function isConnectionClosed(error: Error): boolean {
  if (error instanceof undiciErrors.SocketError) return true;
  const code = (error as { code?: unknown }).code;
  return code === 'ECONNRESET' || code === 'EPIPE';
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
