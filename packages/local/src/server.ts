import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { type AdminHandler, bearerMatches, headerOf } from '@queuebox/admin';
import { createLogThrottle, errorFields, errorResponse, HttpError, type LogThrottle } from '@queuebox/core';
import {
  type Ingestion,
  type IngestOutcome,
  type IngestResponse,
  isJsonMediaType,
  normalizeHeaders,
  requestPath,
} from '@queuebox/inbox';
import { type BodyResult, readBody } from './body.ts';
import { DEMO_RECEIVER_PATH, type DemoReceiver } from './demo-receiver.ts';
import type { Logger } from './logger.ts';
import { PROMETHEUS_CONTENT_TYPE, type QueueBoxMetrics } from './metrics.ts';

/** The info line of each successful inbox outcome. */
const INBOX_LOG_LINES: Partial<Record<IngestOutcome, string>> = {
  accepted: 'inbox message stored',
  duplicate: 'inbox message duplicate',
  handshake: 'inbox handshake answered',
};

/** What the request handler serves. */
export interface RequestHandlerDeps {
  readonly ingestion: Ingestion;
  /**
   * Throttles the lines of refused and failed requests (`createLogThrottle` of @queuebox/core: one a minute per
   * kind, then a count). Default a throttle of its own.
   */
  readonly logThrottle?: LogThrottle;
  /** `inbox.basePath`: requests under it go to the ingestion. Default `/inbox`. */
  readonly basePath?: string;
  /** Answers `GET /health`: resolves when the database answers. */
  readonly ping: () => Promise<void>;
  /** Longest wait for the ping before `/health` answers 503. Default 2000 ms. */
  readonly healthTimeoutMs?: number;
  readonly metrics: QueueBoxMetrics;
  readonly logger: Logger;
  /** Called after a push row was stored (202 with `wakeRelay`), to wake the relay at once. */
  readonly onStored?: (stored: NonNullable<IngestResponse['stored']>) => void;
  /** Served at `POST /_demo/receiver` when set. */
  readonly demoReceiver?: DemoReceiver | undefined;
  /** Largest demo-receiver body. Default 1 MiB. */
  readonly demoMaxBodyBytes?: number;
  /**
   * The admin API (`createAdminHandler` of `@queuebox/admin` with `admin.token`), served under its `basePath`
   * (`/admin`). Absent: `/admin` answers 404 `admin_disabled`, because without a token the API never runs open.
   */
  readonly admin?: AdminHandler | undefined;
  /**
   * `admin.token` when `admin.protectMetrics` is set: `GET /metrics` then needs `Authorization: Bearer <token>`
   * (401 otherwise), since its source and topic labels tell an outsider what flows through. Default: open.
   */
  readonly metricsToken?: string | undefined;
  /** Largest admin request body read. Default 65536 bytes (the admin handler's own limit). */
  readonly adminMaxBodyBytes?: number;
  /**
   * Called after an admin POST succeeded (a requeue or replay made rows pending): a requeue is an UPDATE, which no
   * insert notification announces, so the runtime wakes its drains itself.
   */
  readonly onAdminWrite?: () => void;
  /**
   * True once the runtime is stopping. A POST to a source that arrives then (on a keep-alive connection still open)
   * is answered 503 `store_unavailable` with `Retry-After` and `Connection: close` and not stored: the sender
   * retries, to this process's successor or another instance, and the stop does not wait for new work. Default:
   * never stopping.
   */
  readonly isStopping?: () => boolean;
  /**
   * False while the runtime waits for its database at start (and migrates it): a POST to a source is answered 503
   * `store_unavailable` with `Retry-After` and not stored, `/admin` answers 503 `store_unavailable`, and
   * `GET /health` answers 503 `{"status":"starting","error":"store_unavailable"}` without asking the database (the
   * tables may not exist yet). `/metrics` and the demo receiver answer as usual. Default: always ready.
   */
  readonly isReady?: () => boolean;
}

/** Seconds a sender refused during a stop, or before the database answered at start, is asked to wait. */
const STOPPING_RETRY_AFTER_S = 5;

/** A node:http request listener. */
export type RequestHandler = (request: IncomingMessage, response: ServerResponse) => void;

function send(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Readonly<Record<string, string>> = {},
): void {
  if (response.headersSent) return;
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json',
    ...headers,
    'content-length': String(Buffer.byteLength(text)),
  });
  response.end(text);
}

/** How long, and for how many more bytes, the rest of a refused body is read and dropped. */
const LINGER = { ms: 2_000, bytes: 16 * 2 ** 20 } as const;

/**
 * Answers a request whose body was refused part-way. The client may still be sending: closing the connection now
 * would reset it, and the client would see the reset instead of the answer. So the rest of the body is read and
 * dropped — the connection then serves the next request — for at most {@link LINGER}; a body that goes on longer
 * ends with the connection.
 */
function sendRefusingBody(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Readonly<Record<string, string>> = {},
): void {
  const request = response.req;
  let dropped = 0;
  const stop = () => {
    clearTimeout(timer);
    request.destroy();
  };
  const timer = setTimeout(stop, LINGER.ms);
  timer.unref();
  request.on('data', (chunk: Buffer) => {
    dropped += chunk.byteLength;
    if (dropped > LINGER.bytes) stop();
  });
  request.once('end', () => clearTimeout(timer));
  request.resume();
  send(response, status, body, headers);
}

/** The scheme and authority of an absolute-form request target (`POST http://host/inbox/x HTTP/1.1`). */
const ABSOLUTE_FORM = /^https?:\/\/[^/?#]*/i;

/**
 * The request path as the ingestion matches it (`requestPath` of @queuebox/inbox: no query string or trailing
 * slashes, percent-encoded unreserved characters decoded), also of an absolute-form target (`http://host/inbox/x`,
 * which a server must accept: RFC 9112 §3.2.2), whatever its host. Not `new URL(url, base).pathname`: it resolves
 * `..` and `%2e%2e` segments, reads `\` as `/` and an origin-form `//host/inbox/x` as a host: paths no source has
 * would reach one. `/inbox//x` and `/inbox/y/../x` stay unknown paths (404).
 */
export function bareRequestPath(
  url: string | undefined,
  options: { readonly decode?: boolean } = {},
): string {
  const raw = url ?? '/';
  const absolute = ABSOLUTE_FORM.exec(raw);
  return requestPath(absolute === null ? raw : raw.slice(absolute[0].length) || '/', options);
}

/** The query string of a request target, with its `?`, or ''. */
function queryOf(url: string | undefined): string {
  const raw = url ?? '';
  const start = raw.indexOf('?');
  if (start === -1) return '';
  const end = raw.indexOf('#', start);
  return end === -1 ? raw.slice(start) : raw.slice(start, end);
}

/** Requests that await `100 Continue` before sending their body and were not answered 100 yet (see awaitContinue). */
const awaitingContinue = new WeakSet<IncomingMessage>();

/**
 * Marks a request that awaits `100 Continue` before it sends its body (`Expect: 100-continue`): node:http's
 * `checkContinue` listener calls it, then hands the request to the request handler as any other. The handler answers
 * 100 only when it is about to read the body, so a request whose answer its headers already decide (an unknown path
 * 404, another method 405, a declared `Content-Length` over the limit 413, a `Content-Type` that is not JSON 415, an
 * admin request without the token 401) gets that answer at once, and its client sends no body for nothing (RFC 9110
 * §10.1.1). Node closes such a connection after the answer: the body it announced never came.
 */
export function awaitContinue(request: IncomingMessage): void {
  awaitingContinue.add(request);
}

/**
 * Reads a request's body (readBody). A request that awaits `100 Continue` is first checked on its declared
 * `Content-Length` alone (readBody's own check, on no bytes): over the limit it is refused without being asked for
 * the body; otherwise it is answered 100 and read, unless `wanted` is false (its answer needs no body), when nothing
 * is asked for and the body is empty.
 */
async function readRequestBody(
  request: IncomingMessage,
  response: ServerResponse,
  options: Parameters<typeof readBody>[1],
  wanted = true,
): Promise<BodyResult> {
  if (!awaitingContinue.delete(request)) return readBody(request, options);
  const declared = await readBody(Readable.from([]), options);
  if (!declared.ok || !wanted) return declared;
  response.writeContinue();
  return readBody(request, options);
}

/**
 * The local HTTP surface (docs/design.md §7): `POST {basePath}/{source}` through the ingestion pipeline, `GET /health`
 * (200 `{"status":"ok"}` when the database answers, 503 otherwise), `GET /metrics` (Prometheus text), `/admin/...`
 * (the admin API behind its bearer token, checked before a body is read, or 404 `admin_disabled` without one;
 * `HEAD` is answered as `GET`, without a body, on `/health`, `/metrics` and the admin GET routes) and, when the configuration uses
 * it, the demo receiver. Inbox bodies are read as raw bytes up to `inbox.maxBodyBytes`; a longer body gets 413
 * and the rest of it is dropped (see `sendRefusingBody`). Anything else is 404 `not_found` (or 405 for a known
 * path).
 */
/** A body read that failed because the connection ended before the body did. */
function clientWentAway(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'ECONNRESET' || code === 'ERR_STREAM_PREMATURE_CLOSE';
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });
const NON_ASCII = /[\u0080-\u00ff]/;

/**
 * Header values as text, read as UTF-8. Node hands each byte of a header value over as one character (latin1),
 * while API Gateway gives a Lambda the value decoded as UTF-8: without this, `Idempotency-Key: café` sent as UTF-8
 * was stored as `cafÃ©` locally and as `café` on AWS, a Standard Webhooks id with such characters could not verify,
 * and the key counted twice its characters against its column. A value whose bytes are not UTF-8 stays as Node read
 * it, Latin-1 (each byte one character, HTTP's historical charset): either way the text is what the sender meant,
 * so `café` sent in UTF-8 and `café` sent in Latin-1 are the same key. ASCII-only headers, nearly all, are
 * returned as they came.
 */
export function utf8HeaderValues(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  let decoded: IncomingHttpHeaders | undefined;
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const values = typeof value === 'string' ? [value] : value;
    if (!values.some((v) => NON_ASCII.test(v))) continue;
    decoded ??= { ...headers };
    const utf8 = values.map(asUtf8);
    decoded[name] = typeof value === 'string' ? utf8[0] : utf8;
  }
  return decoded ?? headers;
}

function asUtf8(latin1: string): string {
  try {
    return UTF8.decode(Buffer.from(latin1, 'latin1'));
  } catch {
    return latin1;
  }
}

/** Longest request path a log line quotes: an outsider chooses it, up to the header limit (16 KB). */
const LOGGED_PATH_CHARS = 128;

/** The `path` field of a line: cut to {@link LOGGED_PATH_CHARS}, with its length when cut. */
function loggedPath(path: string): { path: string; pathLength?: number } {
  return path.length <= LOGGED_PATH_CHARS
    ? { path }
    : { path: `${path.slice(0, LOGGED_PATH_CHARS)}…`, pathLength: path.length };
}

export function createRequestHandler(deps: RequestHandlerDeps): RequestHandler {
  const { ingestion, metrics, logger } = deps;
  const basePath = (deps.basePath ?? '/inbox').replace(/\/+$/, '');
  const sourcePaths = new Set(ingestion.routes.map((r) => r.path));
  const healthTimeoutMs = deps.healthTimeoutMs ?? 2000;
  const log = logger.child({ component: 'http' });
  // Refusals and failures that anyone able to connect (or an outage) can repeat at any rate: one line per kind a
  // minute, and a count of the rest (metrics count each one).
  const throttle = deps.logThrottle ?? createLogThrottle();

  async function inbox(request: IncomingMessage, response: ServerResponse, path: string): Promise<void> {
    const method = request.method ?? 'GET';
    const toSource = method.toUpperCase() === 'POST' && sourcePaths.has(path);
    // Decided as the request arrives: one that was in progress when the stop began is finished.
    const refuse = !toSource
      ? undefined
      : deps.isStopping?.() === true
        ? stoppingAnswer
        : deps.isReady?.() === false
          ? notReadyAnswer
          : undefined;
    const headers = utf8HeaderValues(request.headers);
    let body: Uint8Array = new Uint8Array(0);
    // Only a POST to a source's path carries a body worth reading; the ingestion answers the rest (405, 404).
    // A refused request's body is read too, so that the client gets the answer rather than a reset. A client that
    // awaits `100 Continue` is not asked for a body the ingestion refuses by its Content-Type alone (415): the
    // ingestion checks the type before it looks at the body, and answers the empty body the same; nor for one the
    // runtime refuses whatever it holds (503: stopping, or not ready yet; a review).
    if (toSource) {
      const read = await readRequestBody(
        request,
        response,
        { maxBytes: ingestion.maxBodyBytes, contentLength: request.headers['content-length'] },
        refuse === undefined && isJsonMediaType(headers['content-type']),
      );
      if (!read.ok) {
        const source = ingestion.routes.find((r) => r.path === path)?.source;
        metrics.recordIngestion({ outcome: 'payload_too_large', source });
        throttle.line(`refused:${source}:413`, (extra) =>
          log.warn('inbox request refused', { source, status: 413, outcome: 'payload_too_large', ...extra }),
        );
        const refused = errorResponse(
          new HttpError(413, 'payload_too_large', `The body is larger than ${ingestion.maxBodyBytes} bytes`),
        );
        sendRefusingBody(response, refused.status, refused.body);
        return;
      }
      body = read.body;
    }
    const answer = refuse ? refuse(path) : await ingestion.handle({ method, path, headers, body });
    metrics.recordIngestion(answer);
    const fields = {
      source: answer.source,
      status: answer.status,
      outcome: answer.outcome,
      id: answer.stored?.id ?? (answer.body.id as string | undefined),
    };
    if (answer.outcome === 'internal_error') {
      throttle.line(`failed:${answer.source}`, (extra) =>
        log.error('inbox request failed', { ...fields, error: errorFields(answer.error), ...extra }),
      );
    } else if (answer.status >= 400) {
      // A 401's reason (`refusal`: a timestamp outside the tolerance, no signature matching, a missing header) is
      // logged, never answered.
      const code = String(answer.body.error ?? '');
      throttle.line(
        `refused:${answer.source}:${answer.status}:${code}:${answer.refusal?.reason ?? ''}`,
        (extra) =>
          log.warn('inbox request refused', {
            ...fields,
            // A transform's rejection quotes what it met (JSONata: `Unable to cast value to a number: "4111-…"`, or a
            // `$reject` reason built from the payload): the sender is answered that text, the log keeps the code only,
            // as inbox-http on AWS does (an outside audit: card numbers in the log).
            error:
              answer.body.error === 'transform_rejected'
                ? { code: answer.body.error }
                : { code: answer.body.error, message: answer.body.message },
            ...answer.refusal,
            ...extra,
          }),
      );
    } else {
      log.info(INBOX_LOG_LINES[answer.outcome] ?? 'inbox request answered', fields);
    }
    send(response, answer.status, answer.body, answer.headers);
    if (answer.stored?.wakeRelay) deps.onStored?.(answer.stored);
  }

  /** The answer to a POST to a source that arrived after the stop began: nothing is stored, the sender retries. */
  function stoppingAnswer(path: string): IngestResponse {
    return {
      status: 503,
      body: { error: 'store_unavailable', message: 'QueueBox is shutting down; retry later' },
      headers: { 'retry-after': String(STOPPING_RETRY_AFTER_S), connection: 'close' },
      outcome: 'store_unavailable',
      source: ingestion.routes.find((r) => r.path === path)?.source,
    };
  }

  /** The answer to a POST to a source before the database answered at start: nothing is stored, the sender retries. */
  function notReadyAnswer(path: string): IngestResponse {
    return {
      status: 503,
      body: { error: 'store_unavailable', message: 'QueueBox is waiting for its database; retry later' },
      headers: { 'retry-after': String(STOPPING_RETRY_AFTER_S) },
      outcome: 'store_unavailable',
      source: ingestion.routes.find((r) => r.path === path)?.source,
    };
  }

  async function health(response: ServerResponse): Promise<void> {
    // Not asked: before the runtime is ready the database may answer while its tables are still being migrated.
    if (deps.isReady?.() === false)
      return send(response, 503, { status: 'starting', error: 'store_unavailable' });
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        deps.ping(),
        new Promise((_resolve, reject) => {
          timer = setTimeout(() => reject(new Error('the database did not answer in time')), healthTimeoutMs);
        }),
      ]);
      send(response, 200, { status: 'ok' });
    } catch (error) {
      throttle.line('health', (extra) =>
        log.warn('health check failed', { error: errorFields(error), ...extra }),
      );
      send(response, 503, { status: 'unavailable', error: 'store_unavailable' });
    } finally {
      clearTimeout(timer);
    }
  }

  async function demo(request: IncomingMessage, response: ServerResponse, receiver: DemoReceiver) {
    const read = await readRequestBody(request, response, {
      maxBytes: deps.demoMaxBodyBytes ?? 1_048_576,
      contentLength: request.headers['content-length'],
    });
    if (!read.ok) {
      sendRefusingBody(response, 413, { error: 'payload_too_large', message: 'The body is too large' });
      return;
    }
    const status = receiver.receive(read.body, normalizeHeaders(request.headers));
    if (status === 204) {
      response.writeHead(204);
      response.end();
    } else send(response, status, { error: 'unauthorized', message: 'Bad signature' });
  }

  async function admin(
    request: IncomingMessage,
    response: ServerResponse,
    handler: AdminHandler,
    path: string,
  ) {
    const method = (request.method ?? 'GET').toUpperCase();
    // The path as routed (absolute form and percent-encoded unreserved characters undone), and the query string,
    // which the handler reads from it.
    const target = `${path}${queryOf(request.url)}`;
    let body: Uint8Array = new Uint8Array(0);
    if (method !== 'GET' && method !== 'HEAD') {
      // Who asks is checked before a byte of the body is read: without the token the answer is 401, whatever the
      // body's size (a 413 first would tell an outsider the limit, and reading its body costs the server).
      const refused = await handler.unauthorized({
        method,
        path: target,
        headers: request.headers,
      });
      if (refused !== undefined) {
        const fields = { method, ...loggedPath(path), status: refused.status };
        throttle.line(`admin:${refused.status}`, (extra) => {
          if (refused.status >= 500) log.error('admin request failed', { ...fields, ...extra });
          else log.warn('admin request refused', { ...fields, ...extra });
        });
        sendRefusingBody(response, refused.status, refused.body, refused.headers);
        return;
      }
      const read = await readRequestBody(request, response, {
        maxBytes: deps.adminMaxBodyBytes ?? 65_536,
        contentLength: request.headers['content-length'],
      });
      if (!read.ok) {
        sendRefusingBody(response, 413, { error: 'payload_too_large', message: 'The body is too large' });
        return;
      }
      body = read.body;
    }
    const answer = await handler.handle({ method, path: target, headers: request.headers, body });
    const fields = { method, ...loggedPath(path), status: answer.status };
    if (answer.status >= 500) {
      throttle.line(`admin:${answer.status}`, (extra) =>
        log.error('admin request failed', { ...fields, ...extra }),
      );
    } else if (answer.status === 401) {
      throttle.line('admin:401', (extra) => log.warn('admin request refused', { ...fields, ...extra }));
    } else log.info('admin request', fields);
    send(response, answer.status, answer.body, answer.headers);
    if (method === 'POST' && answer.status < 300) deps.onAdminWrite?.();
  }

  async function route(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const method = (request.method ?? 'GET').toUpperCase();
    const inboxPath = bareRequestPath(request.url);
    if (inboxPath === basePath || inboxPath.startsWith(`${basePath}/`))
      return inbox(request, response, inboxPath);
    // The other paths are routed as sent, nothing decoded: `/%61dmin` or `/%6detrics` is no admin or metrics path,
    // so a proxy rule that denies `/admin` or `/metrics` on the raw path is not walked past (an outside security
    // review: both were served).
    const path = bareRequestPath(request.url, { decode: false });
    if (path === '/health') {
      if (method === 'GET' || method === 'HEAD') return health(response);
      return send(response, 405, { error: 'method_not_allowed', message: 'Use GET' }, { allow: 'GET' });
    }
    if (path === '/metrics') {
      if (method !== 'GET' && method !== 'HEAD') {
        return send(response, 405, { error: 'method_not_allowed', message: 'Use GET' }, { allow: 'GET' });
      }
      if (
        deps.metricsToken !== undefined &&
        !bearerMatches(headerOf(request.headers, 'authorization'), deps.metricsToken)
      ) {
        return send(
          response,
          401,
          { error: 'unauthorized', message: 'GET /metrics needs Authorization: Bearer <admin.token>' },
          { 'www-authenticate': 'Bearer' },
        );
      }
      return send(response, 200, await metrics.registry.metrics(), {
        'content-type': PROMETHEUS_CONTENT_TYPE,
      });
    }
    if (path === '/admin' || path.startsWith('/admin/')) {
      if (deps.admin && deps.isReady?.() === false) {
        return sendRefusingBody(
          response,
          503,
          { error: 'store_unavailable', message: 'QueueBox is waiting for its database; retry later' },
          { 'retry-after': String(STOPPING_RETRY_AFTER_S) },
        );
      }
      if (deps.admin) return admin(request, response, deps.admin, path);
      return send(response, 404, {
        error: 'admin_disabled',
        message: 'The admin API is off: set admin.token (e.g. QUEUEBOX_ADMIN__TOKEN) to turn it on',
      });
    }
    if (path === DEMO_RECEIVER_PATH && deps.demoReceiver) {
      if (method === 'POST') return demo(request, response, deps.demoReceiver);
      return send(response, 405, { error: 'method_not_allowed', message: 'Use POST' }, { allow: 'POST' });
    }
    send(response, 404, { error: 'not_found', message: 'Nothing is served at this path' });
  }

  return (request, response) => {
    route(request, response).catch((error: unknown) => {
      // The ingestion never throws; this is a failed body read (client gone) or a bug in this file. A client that
      // hangs up mid-body (or is cut off by http.requestTimeoutMs) is the client's doing: a warning, so that anyone
      // able to open a connection cannot fill the error log.
      const fields = { ...loggedPath(bareRequestPath(request.url)), error: errorFields(error) };
      if (clientWentAway(error)) {
        throttle.line('aborted', (extra) =>
          log.warn('request aborted by the client', { ...fields, ...extra }),
        );
      } else throttle.line('failed', (extra) => log.error('request failed', { ...fields, ...extra }));
      if (!response.headersSent) {
        const { status, body } = errorResponse(error);
        send(response, status, body);
      } else response.destroy();
    });
  };
}
