import {
  type AdminListOptions,
  type Clock,
  errorResponse,
  HttpError,
  type JsonValue,
  QueueBoxError,
  type RequeueResult,
  type RequeueSelection,
  type RowId,
  type Store,
  systemClock,
  type Table,
  trimTrailingSlashes,
} from '@queuebox/core';
import { bearerMatches, type HeaderValue, headerOf } from './auth.ts';
import { BulkConflictError, requeueConflictMessage, retryTransientConflicts } from './bulk-retry.ts';
import {
  badRequest,
  DEFAULT_LIST_LIMIT,
  DEFAULT_PURGE_BATCH_SIZE,
  parseAgeMs,
  parseBatchSize,
  parseBody,
  parseCursor,
  parseDryRun,
  parseIds,
  parseLimit,
  parseName,
  parsePurgeState,
  parseRowId,
  parseState,
  parseTable,
  refuseQuery,
  singleQuery,
  stateWord,
} from './input.ts';
import {
  busyView,
  keyBusyMessage,
  keyInFlightMessage,
  type RequeueBusy,
  type RequeueSkipped,
  replayKeyBusyMessage,
  requeueBusy,
  requeueSkipped,
  skippedView,
} from './key-in-flight.ts';
import { purgeCounterOf } from './purge-count.ts';
import { forwardedRowsNote, redactNotFinalMessage } from './redact.ts';
import { inboxRowView, outboxRowView, statsView } from './views.ts';

/** One request to the admin API, as the local server or a Lambda function hands it over. */
export interface AdminRequest {
  readonly method: string;
  /** The request path, e.g. `/admin/outbox/42`; a query string on it (`?state=dead`) is read too. */
  readonly path: string;
  /** Query parameters (merged over those of `path`). */
  readonly query?: Readonly<Record<string, HeaderValue>>;
  /** Headers in any letter case. */
  readonly headers?: Readonly<Record<string, HeaderValue>>;
  /** The raw body (bytes or text); empty or absent is `{}`. */
  readonly body?: Uint8Array | string | null;
}

/** The answer: a status, a JSON body and extra headers (`allow`, `www-authenticate`). */
export interface AdminResponse {
  readonly status: number;
  readonly body: JsonValue;
  readonly headers?: Readonly<Record<string, string>>;
}

/** Options of {@link createAdminHandler}. */
export interface AdminHandlerOptions {
  /** The store whose `admin` port serves the operations (and `outbox`/`inbox.get` the single rows). */
  readonly store: Pick<Store, 'admin' | 'outbox' | 'inbox'>;
  /**
   * The bearer token every request must carry (`Authorization: Bearer <token>`), compared in constant time.
   * Locally this is `admin.token`.
   */
  readonly token?: string;
  /**
   * Decides whether a request may pass. On AWS the route is guarded by IAM, so the function passes
   * `() => true`. With `token` too, both must agree.
   */
  readonly authorize?: (request: AdminRequest) => boolean | Promise<boolean>;
  /** Where the routes live. Default `/admin`. */
  readonly basePath?: string;
  /**
   * How long one bulk request (requeue by filter, purge) keeps running batches before it answers with
   * `more: true`, in milliseconds. Default 10,000 (well inside API Gateway's 29 s).
   */
  readonly bulkBudgetMs?: number;
  /** Largest body accepted. Default 65,536 bytes. */
  readonly maxBodyBytes?: number;
  /** Default the system clock. */
  readonly clock?: Clock;
  /** Called with every unexpected error (answered 500) and every outage (503), for the log. */
  readonly onError?: (error: unknown, request: AdminRequest) => void;
}

/** The admin API. */
export interface AdminHandler {
  /** The routes' prefix (`/admin`). */
  readonly basePath: string;
  /** Answers one request; never throws. */
  handle(request: AdminRequest): Promise<AdminResponse>;
  /**
   * The answer that refuses `request` when it may not pass (`token`, `authorize`: 401 `unauthorized`, or what a
   * failing `authorize` is answered), else undefined; never throws. It needs no body: an HTTP shell that reads
   * bodies itself asks this first, so a request without the token is refused before its body is read (401 whatever
   * the body's size, never 413). `handle` checks again.
   */
  unauthorized(request: Omit<AdminRequest, 'body'>): Promise<AdminResponse | undefined>;
}

/** Most ids a bulk answer lists (the count covers all). */
export const MAX_REPORTED_IDS = 1000;

/**
 * How long the inbox should keep a processed (or dead) row: the longest a provider retries a webhook (Stripe retries
 * for up to 3 days). The inbox deduplicates an idempotency key only while its row exists.
 */
export const INBOX_DEDUP_WINDOW_MS = 72 * 3_600_000;

/** `65_000` → `1m 5s`. */
export function formatAge(ms: number): string {
  const s = Math.floor(ms / 1000);
  const parts = [
    [Math.floor(s / 86_400), 'd'],
    [Math.floor((s % 86_400) / 3600), 'h'],
    [Math.floor((s % 3600) / 60), 'm'],
    [s % 60, 's'],
  ] as const;
  const shown = parts.filter(([n]) => n > 0).map(([n, unit]) => `${n}${unit}`);
  return shown.length > 0 ? shown.join(' ') : `${ms}ms`;
}

/** What `POST /admin/purge` tells to do instead, in the words of its body (see {@link purgeDedupWarning}). */
export const HTTP_PURGE_DEDUP_REMEDY = `"olderThanMs": ${INBOX_DEDUP_WINDOW_MS} (72h) or more`;

/**
 * The warning of a purge that deleted `deleted` processed or dead inbox rows with an age under
 * {@link INBOX_DEDUP_WINDOW_MS} (so rows a provider may still retry), else undefined: the one text of the CLI's
 * `queuebox purge` and of `POST /admin/purge` (`dryRun`: of their dry runs, which would delete them). `remedy` says how to keep such rows in the words of the interface
 * that purged (the CLI's flags, {@link HTTP_PURGE_DEDUP_REMEDY}). Only the inbox's rows are its deduplication memory.
 */
export function purgeDedupWarning(
  table: Table,
  state: 'Sent' | 'Dead',
  olderThanMs: number,
  deleted: number,
  remedy: string,
  dryRun = false,
): string | undefined {
  if (table !== 'inbox' || deleted === 0 || olderThanMs >= INBOX_DEDUP_WINDOW_MS) return undefined;
  // A dead inbox row holds its idempotency key as much as a processed one does.
  const rows = `${state === 'Sent' ? 'processed' : 'dead'} inbox row${deleted === 1 ? '' : 's'}`;
  return (
    `${dryRun ? 'would delete' : 'deleted'} ${deleted} ${rows} older than ${formatAge(olderThanMs)}, ` +
    'which can include rows younger than 72h. The inbox deduplicates an idempotency key only while its row ' +
    "exists: a provider's retry of a deleted key (Stripe retries for up to 3 days) is stored and delivered again. " +
    `Keep inbox rows longer than your providers retry: ${remedy}.`
  );
}

const UNAUTHORIZED: AdminResponse = {
  status: 401,
  body: { error: 'unauthorized', message: 'A valid bearer token is required' },
  headers: { 'www-authenticate': 'Bearer' },
};

function notFound(message = 'Nothing is served at this path'): HttpError {
  return new HttpError(404, 'not_found', message);
}

function methodNotAllowed(allowed: string): AdminResponse {
  return {
    status: 405,
    body: { error: 'method_not_allowed', message: `Use ${allowed}` },
    headers: { allow: allowed },
  };
}

/** Splits `path?query` and merges both query sources. */
function requestTarget(request: AdminRequest): { path: string; query: Record<string, HeaderValue> } {
  const mark = request.path.indexOf('?');
  const path = trimTrailingSlashes(mark === -1 ? request.path : request.path.slice(0, mark));
  const query: Record<string, HeaderValue> = {};
  if (mark !== -1) {
    for (const [name, value] of new URLSearchParams(request.path.slice(mark + 1))) {
      const seen = query[name];
      query[name] = seen === undefined ? value : [...(typeof seen === 'string' ? [seen] : seen), value];
    }
  }
  return { path, query: { ...query, ...request.query } };
}

/**
 * The admin API over core's `AdminStore` (docs/design.md §6, §7). Routes under `basePath` (default `/admin`):
 *
 * | route | answers |
 * |---|---|
 * | `GET /admin/stats` | counts per state, oldest pending age, dead rows per topic / source |
 * | `GET /admin/outbox?state=&topic=&cursor=&limit=` | a page of rows and `nextCursor` (limit default 50, at most 500) |
 * | `GET /admin/outbox/:id` | one row |
 * | `POST /admin/outbox/:id/requeue` | dead → pending (`{"dryRun":true}` only checks); 409 `not_dead` otherwise, 409 `key_in_flight` while a row of its key is processing, 409 `key_busy` while another transaction holds its key's insert lock (try again) |
 * | `POST /admin/outbox/requeue` | `{ids?, topic?, all?, dryRun?, batchSize?}`: bulk, in batches, within the budget; rows whose key has a row processing stay dead, counted in `skipped`; rows whose key's insert lock or head another transaction held stay dead, counted in `keyBusy`; a batch the database ends for a transient conflict is tried again (`retryTransientConflicts`), and one that keeps conflicting ends the run with 409 `requeue_conflict` and the `count` and `ids` requeued before |
 * | `POST /admin/outbox/:id/replay` | 201 with the id of a new pending copy of a sent row; 409 `not_sent` otherwise, 409 `key_busy` while another transaction holds its key's insert lock (try again) |
 * | `GET /admin/inbox…`, `POST /admin/inbox/…/requeue` | the same with `source` (no replay) |
 * | `POST /admin/outbox/:id/redact`, `POST /admin/inbox/:id/redact` | `{status: "redacted", id}` (the inbox's with a `note` on the outbox rows forwarded from it, which it leaves): the payload of a final row (sent/processed or dead) becomes `null`, its headers `{}`, its last_error NULL (and the inbox's aggregate and correlation id NULL); 409 `not_final` for a row in any other state |
 * | `POST /admin/purge` | `{table, state: sent|processed|dead, olderThanMs (1 hour to 100 years), batchSize?, dryRun?}`: batches within the budget; `warnings` when the inbox rows it deleted may include ones younger than 72h (see `purgeDedupWarning`); `dryRun: true` deletes nothing and answers `wouldDelete`, the count (409 `dry_run_unavailable` on a store that cannot count: SQL Server) |
 *
 * `HEAD` on a GET route is answered as GET, as `/health` is (node:http sends no body with it). A POST reads its
 * input from its JSON body only: any query parameter is refused (400 `unknown_parameter`; `?dryRun=true` says dryRun
 * belongs in the body), so a parameter is never silently ignored.
 *
 * Every request is authorized first (`token` and/or `authorize`; 401 `unauthorized`; `unauthorized(request)` checks
 * that alone, before a shell reads the body). Errors are
 * `{"error": code, "message"}`: 400 with a stable code for bad input (`invalid_state`, `invalid_limit`,
 * `invalid_cursor`, `invalid_id`, `invalid_ids`, `invalid_topic`, `invalid_source`, `invalid_batch_size`,
 * `invalid_age`, `invalid_table`, `invalid_dry_run`, `invalid_json`, `invalid_body`, `unknown_parameter`,
 * `invalid_parameter`, `selection_required`), 404 `not_found` (route) / `row_not_found`, 405
 * `method_not_allowed`, 409 `not_dead` / `key_in_flight` / `key_busy` / `not_sent` / `not_final` / `requeue_conflict`, 413 `payload_too_large`, 503 `store_unavailable`, 500
 * `internal_error` (details only to `onError`). Throws `QueueBoxError` at creation when neither `token` nor
 * `authorize` is given: the API never runs open.
 */
export function createAdminHandler(options: AdminHandlerOptions): AdminHandler {
  const { store } = options;
  const token = options.token === '' ? undefined : options.token;
  if (token === undefined && options.authorize === undefined) {
    throw new QueueBoxError('The admin API needs a token or an authorize function; it never runs open');
  }
  const basePath = (options.basePath ?? '/admin').replace(/\/+$/, '');
  const bulkBudgetMs = options.bulkBudgetMs ?? 10_000;
  const maxBodyBytes = options.maxBodyBytes ?? 65_536;
  const clock = options.clock ?? systemClock;

  async function authorized(request: AdminRequest): Promise<boolean> {
    if (token !== undefined && !bearerMatches(headerOf(request.headers ?? {}, 'authorization'), token)) {
      return false;
    }
    return options.authorize === undefined || (await options.authorize(request)) === true;
  }

  /**
   * The JSON body of a POST, whose fields may only be `allowed`. A POST reads nothing from its query string, so any
   * query parameter is refused first (`?dryRun=true` would otherwise run the request for real).
   */
  function bodyOf(
    request: AdminRequest,
    query: Record<string, HeaderValue>,
    allowed: readonly string[],
  ): Record<string, unknown> {
    refuseQuery(query, allowed);
    const size =
      typeof request.body === 'string' ? Buffer.byteLength(request.body) : (request.body?.byteLength ?? 0);
    if (size > maxBodyBytes) {
      throw new HttpError(413, 'payload_too_large', `The body is larger than ${maxBodyBytes} bytes`);
    }
    return parseBody(request.body, allowed);
  }

  async function list(table: Table, query: Record<string, HeaderValue>): Promise<AdminResponse> {
    const filterName = table === 'outbox' ? 'topic' : 'source';
    const q = singleQuery(query, ['state', filterName, 'cursor', 'limit']);
    const filter = q[filterName] === undefined ? undefined : parseName(filterName, q[filterName]);
    const options: AdminListOptions = {
      limit: q.limit === undefined ? DEFAULT_LIST_LIMIT : parseLimit(q.limit),
      ...(q.state === undefined ? {} : { state: parseState(table, q.state) }),
      ...(q.cursor === undefined ? {} : { cursor: parseCursor(q.cursor) }),
      ...(filter === undefined ? {} : table === 'outbox' ? { topic: filter } : { source: filter }),
    };
    if (table === 'outbox') {
      const page = await store.admin.list('outbox', options);
      return { status: 200, body: { rows: page.rows.map(outboxRowView), nextCursor: page.nextCursor } };
    }
    const page = await store.admin.list('inbox', options);
    return { status: 200, body: { rows: page.rows.map(inboxRowView), nextCursor: page.nextCursor } };
  }

  async function show(table: Table, id: RowId): Promise<AdminResponse> {
    const row = table === 'outbox' ? await store.outbox.get(id) : await store.inbox.get(id);
    if (row === undefined) throw new HttpError(404, 'row_not_found', `No ${table} row ${id}`);
    return { status: 200, body: 'topic' in row ? outboxRowView(row) : inboxRowView(row) };
  }

  async function requeueOne(
    table: Table,
    id: RowId,
    request: AdminRequest,
    query: Record<string, HeaderValue>,
  ): Promise<AdminResponse> {
    const body = bodyOf(request, query, ['dryRun']);
    const dryRun = parseDryRun(body.dryRun);
    const result = await store.admin.requeue(table, { ids: [id] }, { dryRun, batchSize: 1 });
    if (result.count === 1) return { status: 200, body: { dryRun, count: 1, ids: [id] } };
    const inFlight = requeueSkipped(result)?.rows.find((row) => row.id === id);
    if (inFlight !== undefined) {
      return {
        status: 409,
        body: {
          error: 'key_in_flight',
          message: keyInFlightMessage(inFlight, table),
          key: inFlight.key,
          processingId: inFlight.processingId,
        },
      };
    }
    const busy = requeueBusy(result)?.rows.find((row) => row.id === id);
    if (busy !== undefined) {
      return {
        status: 409,
        body: { error: 'key_busy', message: keyBusyMessage(busy), key: busy.key },
      };
    }
    const row = table === 'outbox' ? await store.outbox.get(id) : await store.inbox.get(id);
    if (row === undefined) throw new HttpError(404, 'row_not_found', `No ${table} row ${id}`);
    return {
      status: 409,
      body: {
        error: 'not_dead',
        message: `Only dead rows are requeued; ${table} row ${id} is ${stateWord(table, row.state)}`,
        state: stateWord(table, row.state),
      },
    };
  }

  async function requeueMany(
    table: Table,
    request: AdminRequest,
    query: Record<string, HeaderValue>,
  ): Promise<AdminResponse> {
    const filterName = table === 'outbox' ? 'topic' : 'source';
    const body = bodyOf(request, query, ['ids', filterName, 'all', 'dryRun', 'batchSize']);
    if (body.all !== undefined && body.all !== true) throw badRequest('invalid_body', 'all may only be true');
    if (body.ids === undefined && body[filterName] === undefined && body.all !== true) {
      throw badRequest(
        'selection_required',
        `Name the rows: ids, ${filterName}, or "all": true for every dead ${table} row`,
      );
    }
    const filter = body[filterName] === undefined ? undefined : parseName(filterName, body[filterName]);
    const selection: RequeueSelection = {
      ...(body.ids === undefined ? {} : { ids: parseIds(body.ids) }),
      ...(filter === undefined ? {} : table === 'outbox' ? { topic: filter } : { source: filter }),
    };
    const dryRun = parseDryRun(body.dryRun);
    const batchSize = body.batchSize === undefined ? undefined : parseBatchSize(body.batchSize);
    const batch = batchSize === undefined ? {} : { batchSize };
    if (dryRun) {
      const preview = await retryTransientConflicts(() =>
        store.admin.requeue(table, selection, { ...batch, dryRun: true }),
      );
      return { status: 200, body: resultView(table, preview, requeueSkipped(preview), requeueBusy(preview)) };
    }
    const deadline = clock.now() + bulkBudgetMs;
    let count = 0;
    let ids: RowId[] = [];
    for (;;) {
      let next: RequeueResult;
      try {
        // A batch the database ended for a conflict rolled back whole: it is tried again, a few times.
        next = await retryTransientConflicts(() => store.admin.requeue(table, selection, batch));
      } catch (error) {
        if (!(error instanceof BulkConflictError)) throw error;
        // Not an outage (503): the database answers; a batch kept meeting other transactions. What the run
        // requeued before stays requeued, and the answer says so.
        return {
          status: 409,
          body: {
            error: 'requeue_conflict',
            message: requeueConflictMessage(table, error.tries, count),
            count,
            ids,
            more: true,
          },
        };
      }
      count += next.count;
      ids = [...ids, ...next.ids].slice(0, MAX_REPORTED_IDS);
      // The run stops after the last batch, at the budget, and after a batch that requeued nothing (the next would
      // choose the same rows: their keys busy, or in flight since it chose them). The answer is that batch's: what
      // it left dead (a later batch chooses those rows again, so earlier reports are stale) and whether rows remain.
      if (!next.more || next.count === 0 || clock.now() >= deadline) {
        const total = { dryRun: false, count, ids, more: next.more };
        return { status: 200, body: resultView(table, total, requeueSkipped(next), requeueBusy(next)) };
      }
    }
  }

  async function replay(
    id: RowId,
    request: AdminRequest,
    query: Record<string, HeaderValue>,
  ): Promise<AdminResponse> {
    bodyOf(request, query, []);
    const result = await store.admin.replay(id);
    if (result.status === 'replayed') return { status: 201, body: { id: result.id, replayOf: id } };
    if (result.status === 'not_found') throw new HttpError(404, 'row_not_found', `No outbox row ${id}`);
    if (result.status === 'key_busy') {
      return {
        status: 409,
        body: { error: 'key_busy', message: replayKeyBusyMessage(id, result.key), key: result.key },
      };
    }
    return {
      status: 409,
      body: {
        error: 'not_sent',
        message: `Only sent rows are replayed; outbox row ${id} is ${stateWord('outbox', result.state)}`,
        state: stateWord('outbox', result.state),
      },
    };
  }

  async function redact(
    table: Table,
    id: RowId,
    request: AdminRequest,
    query: Record<string, HeaderValue>,
  ): Promise<AdminResponse> {
    bodyOf(request, query, []);
    const result = await store.admin.redact(table, id);
    if (result.status === 'redacted') {
      // The outbox rows forwarded from an inbox row are not looked for (no index finds them): the answer says so.
      return {
        status: 200,
        body: { status: 'redacted', id, ...(table === 'inbox' ? { note: forwardedRowsNote(id) } : {}) },
      };
    }
    if (result.status === 'not_found') throw new HttpError(404, 'row_not_found', `No ${table} row ${id}`);
    return {
      status: 409,
      body: {
        error: 'not_final',
        message: redactNotFinalMessage(table, id, result.state),
        state: stateWord(table, result.state),
      },
    };
  }

  async function purge(request: AdminRequest, query: Record<string, HeaderValue>): Promise<AdminResponse> {
    const body = bodyOf(request, query, ['table', 'state', 'olderThanMs', 'batchSize', 'dryRun']);
    const table = parseTable(body.table);
    const state = parsePurgeState(body.state);
    const olderThanMs = parseAgeMs(body.olderThanMs);
    const batchSize =
      body.batchSize === undefined ? DEFAULT_PURGE_BATCH_SIZE : parseBatchSize(body.batchSize);
    if (parseDryRun(body.dryRun)) {
      // What the purge would delete, counted, as `queuebox purge --dry-run` does: dead rows are the only copy of
      // messages never delivered, and on AWS this API is the operator's only way to look before deleting.
      const counter = purgeCounterOf(store.admin);
      if (counter === undefined) {
        return {
          status: 409,
          body: {
            error: 'dry_run_unavailable',
            message:
              'This store cannot count what a purge would delete (PostgreSQL and PGlite can); nothing was deleted.',
          },
        };
      }
      const wouldDelete = await counter.countPurge({ table, state, olderThanMs });
      const warning = purgeDedupWarning(
        table,
        state,
        olderThanMs,
        wouldDelete,
        HTTP_PURGE_DEDUP_REMEDY,
        true,
      );
      return {
        status: 200,
        body: {
          dryRun: true,
          table,
          state: stateWord(table, state),
          olderThanMs,
          wouldDelete,
          ...(warning === undefined ? {} : { warnings: [warning] }),
        },
      };
    }
    const deadline = clock.now() + bulkBudgetMs;
    let deleted = 0;
    let more = true;
    while (more) {
      const n = await store.admin.purge({ table, state, olderThanMs, batchSize });
      deleted += n;
      more = n === batchSize;
      if (clock.now() >= deadline) break;
    }
    // Processed and dead inbox rows are the inbox's deduplication memory: deleting young ones reopens provider retries.
    const warning = purgeDedupWarning(table, state, olderThanMs, deleted, HTTP_PURGE_DEDUP_REMEDY);
    return {
      status: 200,
      body: {
        table,
        state: stateWord(table, state),
        olderThanMs,
        deleted,
        more,
        ...(warning === undefined ? {} : { warnings: [warning] }),
      },
    };
  }

  async function route(request: AdminRequest): Promise<AdminResponse> {
    const { path, query } = requestTarget(request);
    const method = request.method.toUpperCase();
    const rest = path.slice(basePath.length).split('/').filter(Boolean);
    const [first, second, third, ...extra] = rest;
    // HEAD is answered as GET, as `/health` is; node:http sends no body with an answer to HEAD.
    const only = (allowed: 'GET' | 'POST', answer: () => Promise<AdminResponse>) =>
      method === allowed || (allowed === 'GET' && method === 'HEAD')
        ? answer()
        : Promise.resolve(methodNotAllowed(allowed));

    if (extra.length > 0 || first === undefined) throw notFound();
    if (first === 'stats' && second === undefined) {
      return only('GET', async () => {
        singleQuery(query, []);
        return { status: 200, body: statsView(await store.admin.stats()) };
      });
    }
    if (first === 'purge' && second === undefined) return only('POST', () => purge(request, query));
    if (first !== 'outbox' && first !== 'inbox') throw notFound();
    const table: Table = first;
    if (second === undefined) return only('GET', () => list(table, query));
    if (second === 'requeue' && third === undefined)
      return only('POST', () => requeueMany(table, request, query));
    if (third === undefined) return only('GET', () => show(table, parseRowId(second)));
    if (third === 'requeue') return only('POST', () => requeueOne(table, parseRowId(second), request, query));
    if (third === 'replay' && table === 'outbox')
      return only('POST', () => replay(parseRowId(second), request, query));
    if (third === 'redact') return only('POST', () => redact(table, parseRowId(second), request, query));
    throw notFound();
  }

  return {
    basePath,
    async unauthorized(request) {
      try {
        return (await authorized(request)) ? undefined : UNAUTHORIZED;
      } catch (error) {
        if (!(error instanceof HttpError)) options.onError?.(error, request);
        return errorResponse(error);
      }
    },
    async handle(request) {
      const { path } = requestTarget(request);
      if (path !== basePath && !path.startsWith(`${basePath}/`)) return errorResponse(notFound());
      try {
        if (!(await authorized(request))) return UNAUTHORIZED;
        return await route(request);
      } catch (error) {
        if (!(error instanceof HttpError)) options.onError?.(error, request);
        return errorResponse(error);
      }
    },
  };
}

/**
 * A requeue's answer; `skipped` only when rows were left dead for `key_in_flight`, `keyBusy` only when rows were
 * left dead for `key_busy`.
 */
function resultView(
  table: Table,
  result: RequeueResult,
  skipped: RequeueSkipped | undefined,
  busy: RequeueBusy | undefined,
): JsonValue {
  return {
    dryRun: result.dryRun,
    count: result.count,
    ids: [...result.ids],
    more: result.more,
    ...(skipped === undefined ? {} : { skipped: skippedView(skipped, table) }),
    ...(busy === undefined ? {} : { keyBusy: busyView(busy) }),
  };
}
