import { errorResponse, type Table } from '@queuebox/core';
import {
  type AdminHandler,
  type AdminHandlerOptions,
  type AdminRequest,
  createAdminHandler,
} from './handler.ts';

/** An answer of {@link AdminRoutes}: a status, a body sent as JSON, extra headers. */
export interface AdminHttpAnswer {
  readonly status: number;
  readonly body: unknown;
  readonly headers?: Readonly<Record<string, string>>;
}

/** What {@link createAdminRoutes} works with: the shell's store and its hooks. */
export interface AdminRoutesDeps<S extends AdminHandlerOptions['store']> {
  /**
   * The store of this request, opened on demand: `GET /health` never calls it (an uptime monitor must not keep a
   * pausable database awake). Rejects when QueueBox cannot start (configuration, database).
   */
  readonly store: () => Promise<S>;
  /** The database check of `GET /admin/health` (200 when the database answers, else 503). */
  readonly checkHealth: () => Promise<AdminHttpAnswer>;
  /** Decides whether an `/admin` request may pass (on AWS IAM guards the route: `() => true`). */
  readonly authorize: NonNullable<AdminHandlerOptions['authorize']>;
  /**
   * Wakes the drain of `table`: called after a successful POST under `/admin/outbox` or `/admin/inbox` (requeue,
   * replay, purge), so requeued rows go out now instead of at the next tick. Must not reject.
   */
  readonly wake: (table: Table) => Promise<unknown>;
  /** After the wake: e.g. publishes the gauges of `table`, so an alarm hears the change now. */
  readonly afterWrite?: (store: S, table: Table) => Promise<unknown>;
  /** Told when `afterWrite` rejected; the answer stays the admin's. */
  readonly onAfterWriteError?: (error: unknown) => void;
  /** The answer when `store()` rejected. Default {@link errorResponse}. */
  readonly storeFailed?: (error: unknown) => AdminHttpAnswer;
  /** Told about every unexpected error (answered 500) and outage (503) of an admin request. */
  readonly onError?: (error: unknown) => void;
  /** Told about every answered `/admin` request that reached the admin API. */
  readonly onAnswered?: (request: AdminRequest, answer: AdminHttpAnswer) => void;
}

/** The HTTP surface of a deployed QueueBox besides the inbox: `/health`, `/admin/health` and `/admin/*`. */
export interface AdminRoutes {
  /** Answers one request (the path without any stage prefix); never throws. */
  route(request: AdminRequest): Promise<AdminHttpAnswer>;
}

const METHOD_NOT_ALLOWED: AdminHttpAnswer = {
  status: 405,
  body: { error: 'method_not_allowed', message: 'Use GET' },
  headers: { allow: 'GET' },
};

const NOT_FOUND: AdminHttpAnswer = {
  status: 404,
  body: { error: 'not_found', message: 'Nothing is served at this path' },
};

/** The table a successful POST under `/admin/<table>/…` changed, if any. */
function changedTable(request: AdminRequest, answer: AdminHttpAnswer): Table | undefined {
  if (request.method.toUpperCase() !== 'POST' || answer.status >= 300) return undefined;
  const table = request.path.split('/')[2];
  return table === 'outbox' || table === 'inbox' ? table : undefined;
}

/**
 * The routes of admin-http: `GET /health` is liveness only (200 `{"status":"ok"}`, no store opened);
 * `GET /admin/health` is the database check; other methods on either are 405. The rest of `/admin/*` is the admin
 * API ({@link createAdminHandler}, one per store); a successful POST that changed a table wakes that table's
 * drain, then runs `afterWrite`. Anything else is 404.
 */
export function createAdminRoutes<S extends AdminHandlerOptions['store']>(
  deps: AdminRoutesDeps<S>,
): AdminRoutes {
  const handlers = new WeakMap<S, AdminHandler>();
  const handlerOf = (store: S): AdminHandler => {
    let handler = handlers.get(store);
    if (!handler) {
      handler = createAdminHandler({
        store,
        authorize: deps.authorize,
        ...(deps.onError ? { onError: deps.onError } : {}),
      });
      handlers.set(store, handler);
    }
    return handler;
  };

  async function admin(request: AdminRequest): Promise<AdminHttpAnswer> {
    let store: S;
    try {
      store = await deps.store();
    } catch (error) {
      return (deps.storeFailed ?? errorResponse)(error);
    }
    const answer = await handlerOf(store).handle(request);
    const table = changedTable(request, answer);
    if (table !== undefined) {
      await deps.wake(table);
      if (deps.afterWrite) {
        await deps.afterWrite(store, table).catch((error: unknown) => deps.onAfterWriteError?.(error));
      }
    }
    deps.onAnswered?.(request, answer);
    return answer;
  }

  return {
    async route(request) {
      const { path } = request;
      if (path === '/health' || path === '/admin/health') {
        const method = request.method.toUpperCase();
        if (method !== 'GET' && method !== 'HEAD') return METHOD_NOT_ALLOWED;
        return path === '/health' ? { status: 200, body: { status: 'ok' } } : deps.checkHealth();
      }
      if (path === '/admin' || path.startsWith('/admin/')) return admin(request);
      return NOT_FOUND;
    },
  };
}
