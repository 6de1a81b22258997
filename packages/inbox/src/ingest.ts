import type { Clock, ConfigIssue, InboxStore, JsonValue, RowId } from '@queuebox/core';
import {
  CONFIG_DEFAULTS,
  ConfigError,
  errorResponse,
  HttpError,
  systemClock,
  trimTrailingSlashes,
} from '@queuebox/core';
import { authSchemeOf } from './auth/index.ts';
import type { AuthFailureReason, AuthScheme } from './auth/types.ts';
import { parseJsonBody } from './body.ts';
import type { ExtractedFields, ExtractionPlan, MessageFields } from './extract.ts';
import { ExtractionError, extractFields, planSourceExtraction } from './extract.ts';
import type { RawHeaders } from './headers.ts';
import { keptHeaders, normalizeHeaders, storableHeaders } from './headers.ts';
import type { InboxOptions, OutboxOptions, SourceOptions, Sources } from './options.ts';
import { inboxMaxAttempts, sourceMode } from './options.ts';
import { EMPTY_TOPIC, renderSourceTopic } from './relay.ts';
import type { CompiledTransform, JsonataCompiler, TransformFunctions } from './transform.ts';
import { compileSourceTransform, runSourceTransform, TransformTimeoutError } from './transform.ts';

/** One HTTP request as the Lambda handler or the local server hands it over (API Gateway base64 already decoded). */
export interface IngestRequest {
  readonly method: string;
  /** The request path; a query string, if present, is ignored. */
  readonly path: string;
  readonly headers: RawHeaders;
  /** The raw body bytes. */
  readonly body: Uint8Array;
}

/** What a request came to, for metrics and logs. */
export type IngestOutcome =
  | 'accepted'
  | 'duplicate'
  | 'handshake'
  | 'method_not_allowed'
  | 'unknown_source'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'unauthorized'
  | 'invalid_message'
  | 'transform_rejected'
  | 'store_unavailable'
  | 'transform_timeout'
  | 'internal_error';

/** The answer to send, plus what the caller needs to wake the relay, count and log. */
export interface IngestResponse {
  readonly status: number;
  /** The JSON body to send. */
  readonly body: Readonly<Record<string, unknown>>;
  readonly headers: Readonly<Record<string, string>>;
  readonly outcome: IngestOutcome;
  /** The source the path named, when it named one. */
  readonly source?: string;
  /** Set for a newly stored message only (202). */
  readonly stored?: {
    readonly id: RowId;
    readonly source: string;
    readonly mode: 'push' | 'pull';
    /** True when the relay should be woken: a push source and the relay enabled. */
    readonly wakeRelay: boolean;
  };
  /** The error behind a 5xx answer (500, 503), for the caller to log (`errorFields`: name, message, code); never sent. */
  readonly error?: unknown;
  /**
   * Why the source's scheme refused a request (401), for the caller's log line only; never sent: the answer is a
   * plain 401 that tells a prober nothing. `reason` is the stable code, `detail` the text (`The signature timestamp
   * is more than 300 s from now`, `The Stripe-Signature header is missing`); neither holds a secret or a signature.
   */
  readonly refusal?: { readonly reason: AuthFailureReason; readonly detail: string };
}

/** The message of every 401: the same whatever failed, so that it tells a prober nothing. */
export const UNAUTHORIZED_MESSAGE = 'The request is not authenticated';

/** What both ingestion services are built from: the HTTP one (createIngestion) and the broker one. */
export interface SourceIngestionDeps {
  readonly store: InboxStore;
  /** `sources`; the HTTP ingestion serves the `type: http` ones, the broker ingestion the others. */
  readonly sources: Sources;
  /**
   * `inbox`: relay.enabled (default true), relay.maxAttempts (a default of the stored rows' max_attempts),
   * transformTimeoutMs (default 1000 ms) and maxBodyBytes (default 1 MiB: a body's limit for HTTP; for both, the
   * largest payload a transform may answer, or the size of the received message when larger); for HTTP also
   * basePath (default `/inbox`).
   */
  readonly inbox?: InboxOptions;
  /** `outbox`: maxAttempts is the last default of the stored rows' max_attempts. */
  readonly outbox?: OutboxOptions;
  /** Transform functions registered in code, by the name `transform: { function }` uses. Default none. */
  readonly transforms?: TransformFunctions;
  /** JSONata compiler. Default the `jsonata` package, loaded when a source has a JSONata transform. */
  readonly jsonata?: JsonataCompiler;
}

/** Dependencies of the HTTP ingestion service. */
export interface IngestionDeps extends SourceIngestionDeps {
  /** Default the system clock. */
  readonly clock?: Clock;
}

/** The ingestion service: one `handle` per HTTP request. */
export interface Ingestion {
  /** Answers one request; never throws. */
  handle(request: IngestRequest): Promise<IngestResponse>;
  /** Resolves when every transform compiled; rejects with ConfigError otherwise. Call it at start-up to fail fast. */
  ready(): Promise<void>;
  /** The path each HTTP source answers at. */
  readonly routes: readonly { readonly path: string; readonly source: string }[];
  /** The effective body limit, for servers that stop reading early. */
  readonly maxBodyBytes: number;
  /**
   * Store calls that `handle` started and the store has not answered yet. inbox-http reads it when its invocation
   * runs out of time, to tell a database that went silent (replace the store) from slow work before it (keep it).
   * `createIngestion`'s always counts; a stand-in may leave it out.
   */
  readonly pendingStores?: number;
}

interface Route {
  readonly name: string;
  readonly source: SourceOptions;
  readonly scheme: AuthScheme | undefined;
  readonly plan: ExtractionPlan;
  readonly credentialHeaders: readonly string[];
  /** `keepHeaders`, lower-cased; undefined keeps every storable header. */
  readonly keep: ReadonlySet<string> | undefined;
  readonly transform: Promise<CompiledTransform> | undefined;
  readonly maxAttempts: number;
  /** {@link topicRefusal}'s answers by event type: the reason, or '' when the topic can be routed. */
  readonly topicVerdicts: Map<string | null, string>;
}

const JSON_HEADERS = { 'content-type': 'application/json' } as const;

/**
 * Seconds a 503 answer (`store_unavailable`, `transform_timeout`) asks its sender to wait, in `Retry-After` (RFC 9110
 * §10.2.3), as the local server's own 503s do while it starts or stops. Without it (overload audit: 0 of the 503s
 * carried it) a sender retried at its own pace, often at once, into the same pile; the batcher answers a blocked
 * store within its deadline (25 s by default), so a few seconds let the database recover before the retry.
 */
export const RETRY_AFTER_SECONDS = 5;

/** The headers of a 503 answer: JSON and `Retry-After`. */
export const UNAVAILABLE_HEADERS = {
  ...JSON_HEADERS,
  'retry-after': String(RETRY_AFTER_SECONDS),
} as const;

/** The headers of an error answer of `status`. */
function errorHeaders(status: number): Readonly<Record<string, string>> {
  // RFC 9110 §12.5.3: a 415 says which content codings a request may have.
  if (status === 415) return { ...JSON_HEADERS, 'accept-encoding': 'identity' };
  if (status === 503) return UNAVAILABLE_HEADERS;
  return JSON_HEADERS;
}

/** `inbox.basePath` without a trailing slash ('' for `/`), always starting with `/` otherwise. */
function normalizeBasePath(basePath: string): string {
  const trimmed = basePath.replace(/\/+$/, '');
  if (trimmed === '') return '';
  return trimmed.startsWith('/') ? trimmed : `/${trimmed}`;
}

/** The path `source` answers at: `{basePath}/{path ?? name}`. */
export function sourcePath(name: string, source: SourceOptions, inbox?: InboxOptions): string {
  const base = normalizeBasePath(inbox?.basePath ?? CONFIG_DEFAULTS.inbox.basePath);
  return `${base}/${(source.path ?? name).replace(/^\/+|\/+$/g, '')}`;
}

/** A percent-encoded octet. */
const PERCENT_ENCODED = /%([0-9A-Fa-f]{2})/g;

/** RFC 3986 §2.3's unreserved characters. */
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

function decodedIfUnreserved(encoded: string, hex: string): string {
  const character = String.fromCharCode(Number.parseInt(hex, 16));
  return UNRESERVED.test(character) ? character : encoded;
}

/**
 * A request path as the sources are matched against it, in both shells: without query string, fragment and trailing
 * slashes, and an unreserved character sent percent-encoded (`/inbox/%73w`) counts as itself (RFC 3986 §6.2.2.2; it
 * was a 404); `decode: false` leaves every `%` as it is (the local server routes its other paths so, below).
 * Nothing else is decoded or resolved: `/inbox//x`, `/inbox/y/../x` and `%2e%2e` segments stay paths no source has.
 */
export function requestPath(path: string, options: { readonly decode?: boolean } = {}): string {
  const end = path.search(/[?#]/);
  let bare = end === -1 ? path : path.slice(0, end);
  if (options.decode !== false && bare.includes('%'))
    bare = bare.replace(PERCENT_ENCODED, decodedIfUnreserved);
  return bare.length > 1 ? trimTrailingSlashes(bare) : bare;
}

function compileRoutes(deps: IngestionDeps): { routes: Map<string, Route>; issues: ConfigIssue[] } {
  const routes = new Map<string, Route>();
  const issues: ConfigIssue[] = [];
  for (const [name, source] of Object.entries(deps.sources)) {
    if (source.type !== 'http') continue;
    const at = `sources.${name}`;
    let scheme: AuthScheme | undefined;
    if (source.auth) {
      scheme = authSchemeOf(source.auth);
      if (scheme === undefined) {
        issues.push({
          path: `${at}.auth.scheme`,
          message: `unknown scheme ${JSON.stringify(source.auth.scheme)}`,
        });
      } else {
        for (const message of scheme.check(source.auth)) issues.push({ path: `${at}.auth`, message });
      }
    }
    const plan = planSourceExtraction(source, scheme?.defaults, at, issues);
    if (plan === undefined) continue;
    const transform = compileSourceTransform(source, deps, at, issues);
    const path = sourcePath(name, source, deps.inbox);
    const taken = routes.get(path);
    if (taken) {
      issues.push({ path: `${at}.path`, message: `${path} is already the path of source ${taken.name}` });
      continue;
    }
    routes.set(path, {
      name,
      source,
      scheme,
      plan,
      credentialHeaders: scheme && source.auth ? scheme.credentialHeaders(source.auth) : [],
      keep: keptHeaders(source),
      transform,
      maxAttempts: inboxMaxAttempts(source, deps.inbox, deps.outbox),
      topicVerdicts: new Map(),
    });
  }
  return { routes, issues };
}

/** A `charset` parameter of a Content-Type, lower-cased (quotes taken off), or undefined. */
function charsetOf(contentType: string | undefined): string | undefined {
  const match = /;\s*charset\s*=\s*"?([^";\s]*)"?/i.exec(contentType ?? '');
  return match?.[1] === undefined || match[1] === '' ? undefined : match[1].toLowerCase();
}

/**
 * The charset a JSON body declares when it would be read as other text than the sender meant, or undefined. JSON
 * is UTF-8 (RFC 8259 defines no charset parameter, and the body is read as UTF-8 whatever one says), which reads
 * ASCII as every ASCII-based charset does: a `charset=iso-8859-1` body of ASCII bytes is the same text either way.
 * Beyond ASCII it is not (the bytes `C3 A9` are `é` in UTF-8 and `Ã©` in Latin-1: an outside audit found them stored
 * as `é` although the sender declared Latin-1), and UTF-16 or UTF-32 text is never UTF-8. Such a body is refused
 * (415) rather than stored as text its sender did not send.
 */
export function foreignCharset(contentType: string | undefined, body: Uint8Array): string | undefined {
  const charset = charsetOf(contentType);
  if (charset === undefined || UTF8_LABELS.test(charset)) return undefined;
  // A charset known to read ASCII as UTF-8 does (us-ascii, Latin-1, the Windows code pages, the CJK multi-byte
  // ones) takes an ASCII body; any other is refused, whatever the bytes: UTF-7 reads the ASCII `caf+AOk-` as `café`
  // (an outside audit found it stored as the ASCII), EBCDIC and ISO-2022 read ASCII bytes otherwise too, and a
  // label nobody knows promises nothing.
  if (!ASCII_COMPATIBLE_LABELS.test(charset)) return charset;
  return body.some((byte) => byte >= 0x80) ? charset : undefined;
}

/** Labels of UTF-8 (the WHATWG Encoding Standard's, and `utf_8`, Python's name). */
const UTF8_LABELS = /^(utf-?8|utf_8|unicode-1-1-utf-8|unicode11utf8|unicode20utf8|x-unicode20utf8)$/;

/** Labels of charsets that read the bytes 00–7F as ASCII does (the WHATWG Encoding Standard's, and common aliases). */
const ASCII_COMPATIBLE_LABELS =
  /^(us-ascii|ascii|ansi_x3\.4-1968|iso-?8859-\d{1,2}|iso_8859-\d{1,2}(:\d+)?|latin-?\d{1,2}|l\d{1,2}|windows-125\d|cp125\d|x-cp125\d|koi8-?[ru]|koi8|macintosh|x-mac-roman|ibm866|cp866|gbk|x-gbk|gb2312|gb18030|big5|big5-hkscs|euc-jp|euc-kr|shift_jis|shift-jis|sjis|x-sjis|windows-31j|ms_kanji|tis-620|windows-874)$/;

/**
 * Whether a Content-Type names JSON: `application/json` or a `+json` type, any parameters. Every scheme's provider
 * sends JSON, and a browser can post cross-site without a preflight only as `text/plain`, a form or with no type at
 * all, so anything else (a missing type included) is refused with 415.
 */
export function isJsonMediaType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const type = (contentType.split(';')[0] ?? '').trim().toLowerCase();
  return type === 'application/json' || /^application\/[a-z0-9!#$&^_.-]+\+json$/.test(type);
}

/**
 * Whether a `Transfer-Encoding` value names a coding other than `chunked` (RFC 9112 §6.1: `gzip, chunked` is a
 * gzip-compressed body sent in chunks). Only chunked framing is undone before the ingestion sees the body.
 */
export function hasTransferCoding(transferEncoding: string | undefined): boolean {
  if (transferEncoding === undefined) return false;
  return transferEncoding.split(',').some((coding) => {
    const name = (coding.split(';')[0] ?? '').trim().toLowerCase();
    return name !== '' && name !== 'chunked';
  });
}

/** Most event types whose topic verdict one route keeps (see {@link topicRefusal}). */
const TOPIC_MEMO_SIZE = 256;

/**
 * Why no destination could take the topic of a message of `route` with `eventType` (too long), or undefined when
 * it can be routed (an empty topic included: it goes dead at the relay). The topic depends only on the event type,
 * and a source sends a handful of them, so the verdict is kept per route for up to TOPIC_MEMO_SIZE event types
 * (rendering the template was about 1% of the runtime's CPU per webhook); past that, new ones are rendered each time.
 */
function topicRefusal(route: Route, eventType: string | null): string | undefined {
  const known = route.topicVerdicts.get(eventType);
  if (known !== undefined) return known || undefined;
  const topic = renderSourceTopic(route.name, route.source, eventType);
  const refusal = !topic.ok && topic.reason !== EMPTY_TOPIC ? topic.reason : '';
  if (route.topicVerdicts.size < TOPIC_MEMO_SIZE) route.topicVerdicts.set(eventType, refusal);
  return refusal || undefined;
}

function parseJson(body: Uint8Array): JsonValue {
  const parsed = parseJsonBody(body);
  if (parsed.ok) return parsed.payload;
  throw new HttpError(400, 'invalid_json', parsed.reason);
}

function extract(route: Route, message: MessageFields): ExtractedFields {
  try {
    return extractFields(route.plan, message);
  } catch (error) {
    if (!(error instanceof ExtractionError)) throw error;
    let code = 'invalid_field';
    if (error.field === 'idempotencyKey') {
      code = error.problem === 'missing' ? 'missing_idempotency_key' : 'invalid_idempotency_key';
    }
    throw new HttpError(400, code, error.message, { cause: error, context: { source: route.name } });
  }
}

/**
 * Creates the ingestion pipeline shared by the Lambda handler and the local server. Steps and answers, in order
 * (docs/design.md §5, the seed's "path of an inbox message"):
 * 405 `method_not_allowed` (not POST) → 404 `unknown_source` → 415 `unsupported_media_type` (no JSON
 * Content-Type, a Content-Encoding other than identity or a Transfer-Encoding other than chunked: nothing is
 * decoded) → 413 `payload_too_large` → 401 `unauthorized`
 * (checked on the raw bytes, before parsing; the answer is the same whatever failed, the reason is in `refusal`) → 400 `invalid_json` → 200 with the scheme's answer to a provider's
 * handshake (Slack's `url_verification`; nothing stored) → 400 `missing_idempotency_key` /
 * `invalid_idempotency_key` / `invalid_field` → 422 `transform_rejected` (the transform runs before the duplicate
 * check, so a rejected message is never stored; a transform whose result JSON cannot hold exactly or is larger
 * than `inbox.maxBodyBytes` is rejected too) → store: 202 `{"status":"accepted","id"}` or 200
 * `{"status":"duplicate"}`; 503 `transform_timeout` when the transform ran past its time limit (nothing stored);
 * 503 `store_unavailable` when the database is unavailable (or the store did not answer within its deadline, or too
 * many stores wait: the PostgreSQL store's `inboxMaxWaitMs` and `inboxMaxQueued`); 500 `internal_error` for anything
 * unexpected (details only in `error`). Every 503 carries `Retry-After: 5` ({@link RETRY_AFTER_SECONDS}).
 *
 * Stored headers: everything received except hop-by-hop and transfer headers, credentials (Authorization, Cookie,
 * X-Api-Key) and the scheme's signature headers; see UNSTORED_HEADERS.
 *
 * Throws ConfigError when a source's auth, JSON paths, transform function name or path is unusable.
 */
export function createIngestion(deps: IngestionDeps): Ingestion {
  const { routes, issues } = compileRoutes(deps);
  if (issues.length > 0) throw new ConfigError(issues);
  const clock = deps.clock ?? systemClock;
  const maxBodyBytes = deps.inbox?.maxBodyBytes ?? CONFIG_DEFAULTS.inbox.maxBodyBytes;
  const relayEnabled = deps.inbox?.relay?.enabled ?? true;
  let pendingStores = 0;

  async function run(request: IngestRequest, route: Route): Promise<IngestResponse> {
    const headers = normalizeHeaders(request.headers);
    if (!isJsonMediaType(headers['content-type'])) {
      throw new HttpError(
        415,
        'unsupported_media_type',
        'The body must be sent with Content-Type: application/json',
        { context: { source: route.name } },
      );
    }
    const charset = foreignCharset(headers['content-type'], request.body);
    if (charset !== undefined) {
      throw new HttpError(
        415,
        'unsupported_media_type',
        `The body declares charset=${charset}; JSON is read as UTF-8 (RFC 8259), and this body would be read as other text than the one sent. Send it as UTF-8`,
        { context: { source: route.name } },
      );
    }
    const coding = headers['content-encoding']?.trim().toLowerCase();
    if (coding !== undefined && coding !== '' && coding !== 'identity') {
      // Nothing is decoded: a signature covers the bytes as sent. (What is stored is the JSON value, not the bytes.)
      throw new HttpError(
        415,
        'unsupported_media_type',
        'The body must be sent without a Content-Encoding (gzip, br, …): it is checked and stored as sent',
        { context: { source: route.name } },
      );
    }
    if (hasTransferCoding(headers['transfer-encoding'])) {
      // Node's HTTP server takes the chunked framing off and hands the bytes of any other transfer coding over as
      // they came: a `Transfer-Encoding: gzip, chunked` body reached the signature check and the JSON parser still
      // compressed and was answered 401 or 400 `invalid_json`, which tells the sender nothing it can act on.
      throw new HttpError(
        415,
        'unsupported_media_type',
        'The body must be sent without a transfer coding other than chunked (gzip, deflate, …): it is checked and stored as sent',
        { context: { source: route.name } },
      );
    }
    if (request.body.byteLength > maxBodyBytes) {
      throw new HttpError(413, 'payload_too_large', `The body is larger than ${maxBodyBytes} bytes`);
    }
    let signedId: string | undefined;
    if (route.scheme && route.source.auth) {
      const verdict = route.scheme.verify(request.body, headers, route.source.auth, clock.now());
      if (!verdict.ok) {
        // The reason goes to the log (`refusal`), not into the answer.
        return {
          status: 401,
          body: { error: 'unauthorized', message: UNAUTHORIZED_MESSAGE },
          headers: JSON_HEADERS,
          outcome: 'unauthorized',
          source: route.name,
          refusal: { reason: verdict.reason, detail: verdict.message },
        };
      }
      signedId = verdict.signedId;
    }
    let payload = parseJson(request.body);
    const reply = route.scheme?.handshake?.(payload);
    if (reply !== undefined) {
      return { status: 200, body: reply, headers: JSON_HEADERS, outcome: 'handshake', source: route.name };
    }
    let fields = extract(route, { payload, headers, body: request.body });
    // The natural key of a scheme that signs an id is that id, whatever other headers claim.
    if (signedId !== undefined && route.source.idempotencyKey === undefined) {
      fields = { ...fields, idempotencyKey: signedId };
    }
    if (sourceMode(route.source) === 'push') {
      // Never 202 what the relay could only send dead: a topic too long for any destination is refused now.
      // (An empty topic still goes dead at the relay, as the seed's inbox state table says.)
      const refusal = topicRefusal(route, fields.eventType);
      if (refusal !== undefined) {
        throw new HttpError(400, 'invalid_topic', `The message cannot be routed: ${refusal}`, {
          context: { source: route.name },
        });
      }
    }
    let stored = storableHeaders(headers, route.credentialHeaders, route.keep);
    if (route.transform) {
      const transform = await route.transform;
      const outcome = await runSourceTransform(
        transform,
        {
          source: route.name,
          payload,
          headers: stored,
          eventType: fields.eventType,
          idempotencyKey: fields.idempotencyKey,
        },
        { maxPayloadBytes: maxBodyBytes },
      ).catch((error: unknown) => {
        // Out of time, perhaps only for the load beside it: the sender tries again (see transform.ts).
        if (!(error instanceof TransformTimeoutError)) throw error;
        throw new HttpError(
          503,
          'transform_timeout',
          `The transform ran out of time (${error.context.timeoutMs} ms); retry later`,
          { cause: error, context: { source: route.name } },
        );
      });
      if ('reject' in outcome) {
        throw new HttpError(
          422,
          'transform_rejected',
          `The transform rejected the message: ${outcome.reject}`,
          {
            context: { source: route.name },
          },
        );
      }
      ({ payload, headers: stored } = outcome);
    }
    pendingStores++;
    const result = await deps.store
      .store({
        source: route.name,
        idempotencyKey: fields.idempotencyKey,
        eventType: fields.eventType,
        aggregateId: fields.aggregateId,
        correlationId: fields.correlationId,
        payload,
        headers: stored,
        maxAttempts: route.maxAttempts,
      })
      .finally(() => pendingStores--);
    if (result.status === 'duplicate') {
      return {
        status: 200,
        body: { status: 'duplicate' },
        headers: JSON_HEADERS,
        outcome: 'duplicate',
        source: route.name,
      };
    }
    const mode = sourceMode(route.source);
    return {
      status: 202,
      body: { status: 'accepted', id: result.id },
      headers: JSON_HEADERS,
      outcome: 'accepted',
      source: route.name,
      stored: { id: result.id, source: route.name, mode, wakeRelay: mode === 'push' && relayEnabled },
    };
  }

  async function handle(request: IngestRequest): Promise<IngestResponse> {
    let route: Route | undefined;
    try {
      // The route first: a 405 says that the path exists and names its methods (`Allow`), which a path no source
      // answers at does not (RFC 9110 §15.5.6); it was answered 405 `Allow: POST` for any path.
      route = routes.get(requestPath(request.path));
      if (route === undefined) throw new HttpError(404, 'unknown_source', 'No source answers at this path');
      if (request.method.toUpperCase() !== 'POST') {
        const { status, body } = errorResponse(
          new HttpError(405, 'method_not_allowed', 'Only POST is accepted here'),
        );
        return { status, body, headers: { ...JSON_HEADERS, allow: 'POST' }, outcome: 'method_not_allowed' };
      }
      return await run(request, route);
    } catch (error) {
      const { status, body } = errorResponse(error);
      const outcome = outcomeOf(status, body.error);
      return {
        status,
        body,
        headers: errorHeaders(status),
        outcome,
        ...(route ? { source: route.name } : {}),
        // The cause of every 5xx (a bug's 500, the unavailable database's 503) for the caller's log line.
        ...(status >= 500 ? { error } : {}),
      };
    }
  }

  return {
    handle,
    async ready() {
      await Promise.all([...routes.values()].map((r) => r.transform));
    },
    routes: [...routes.entries()].map(([path, r]) => ({ path, source: r.name })),
    maxBodyBytes,
    get pendingStores() {
      return pendingStores;
    },
  };
}

function outcomeOf(status: number, code: string): IngestOutcome {
  switch (status) {
    case 404:
      return 'unknown_source';
    case 413:
      return 'payload_too_large';
    case 415:
      return 'unsupported_media_type';
    case 401:
      return 'unauthorized';
    case 400:
      return 'invalid_message';
    case 422:
      return 'transform_rejected';
    case 503:
      return code === 'transform_timeout' ? 'transform_timeout' : 'store_unavailable';
    default:
      return code === 'method_not_allowed' ? 'method_not_allowed' : 'internal_error';
  }
}
