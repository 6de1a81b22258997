/**
 * admin-http's routes without a database: liveness never opens the store, the database check and the admin API
 * are routed by path, and a successful write wakes the drain of its table before `afterWrite` runs.
 */
import { type RequeueSelection, type Store, StoreUnavailableError, type Table } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import type { AdminRequest } from '../src/handler.ts';
import { type AdminRoutesDeps, createAdminRoutes } from '../src/http-routes.ts';

type AdminView = Pick<Store, 'admin' | 'outbox' | 'inbox'>;

/** A store whose requeue takes every named id (each is dead); anything else fails the test that reaches it. */
function aDeadRowsStore(): AdminView & { readonly requeued: [Table, RequeueSelection][] } {
  const requeued: [Table, RequeueSelection][] = [];
  const fail = (what: string) => () => {
    throw new Error(`the store was reached (${what})`);
  };
  return {
    requeued,
    admin: {
      stats: fail('stats'),
      gauges: fail('gauges'),
      list: fail('list') as never,
      async requeue(table, selection, options) {
        if (!options?.dryRun) requeued.push([table, selection]);
        const ids = selection.ids ?? [];
        return { dryRun: options?.dryRun ?? false, count: ids.length, ids, more: false };
      },
      replay: fail('replay'),
      redact: fail('redact'),
      purge: fail('purge'),
      oldestPendingAgeMs: fail('oldestPendingAgeMs'),
      deadRows: fail('deadRows'),
      nextDue: fail('nextDue'),
    },
    outbox: { get: fail('outbox.get') } as never,
    inbox: { get: fail('inbox.get') } as never,
  };
}

/** Routes over `store` that record every hook call, in order. */
function routesOver(store: AdminView, overrides: Partial<AdminRoutesDeps<AdminView>> = {}) {
  const calls: string[] = [];
  const routes = createAdminRoutes<AdminView>({
    store: async () => {
      calls.push('store');
      return store;
    },
    checkHealth: async () => {
      calls.push('checkHealth');
      return { status: 503, body: { status: 'unavailable', error: 'store_unavailable' } };
    },
    authorize: () => true,
    wake: async (table) => {
      calls.push(`wake ${table}`);
      return true;
    },
    afterWrite: async (seen, table) => {
      calls.push(`afterWrite ${table}${seen === store ? '' : ' (another store)'}`);
    },
    ...overrides,
  });
  return { routes, calls };
}

const request = (method: string, path: string, body?: unknown): AdminRequest => ({
  method,
  path,
  ...(body === undefined ? {} : { body: JSON.stringify(body) }),
});

describe('createAdminRoutes', () => {
  it('answers GET /health 200 without opening the store, and HEAD too', async () => {
    // Prepare
    const { routes, calls } = routesOver(aDeadRowsStore());

    // Act
    const answers = [
      await routes.route(request('GET', '/health')),
      await routes.route(request('HEAD', '/health')),
    ];

    // Assess
    expect(answers.map((a) => [a.status, a.body])).toEqual([
      [200, { status: 'ok' }],
      [200, { status: 'ok' }],
    ]);
    expect(calls).toEqual([]);
  });

  it('answers GET /admin/health with the database check', async () => {
    // Prepare
    const { routes, calls } = routesOver(aDeadRowsStore());

    // Act
    const answer = await routes.route(request('GET', '/admin/health'));

    // Assess
    expect(answer).toEqual({ status: 503, body: { status: 'unavailable', error: 'store_unavailable' } });
    expect(calls).toEqual(['checkHealth']);
  });

  it.each([['/health'], ['/admin/health']])(
    'answers 405 with Allow: GET for a POST to %s, checking nothing',
    async (path) => {
      // Prepare
      const { routes, calls } = routesOver(aDeadRowsStore());

      // Act
      const answer = await routes.route(request('POST', path));

      // Assess
      expect(answer.status).toBe(405);
      expect(answer.headers).toEqual({ allow: 'GET' });
      expect(calls).toEqual([]);
    },
  );

  it.each([['/'], ['/inbox/stripe'], ['/administrator']])('answers 404 for %s', async (path) => {
    // Prepare
    const { routes, calls } = routesOver(aDeadRowsStore());

    // Act
    const answer = await routes.route(request('GET', path));

    // Assess
    expect(answer).toEqual({
      status: 404,
      body: { error: 'not_found', message: 'Nothing is served at this path' },
    });
    expect(calls).toEqual([]);
  });

  it.each([
    ['outbox', '/admin/outbox/7/requeue'],
    ['inbox', '/admin/inbox/9/requeue'],
  ] as const)('wakes the %s drain after a successful requeue, then runs afterWrite', async (table, path) => {
    // Prepare
    const store = aDeadRowsStore();
    const { routes, calls } = routesOver(store);

    // Act
    const answer = await routes.route(request('POST', path));

    // Assess
    expect(answer.status).toBe(200);
    expect(store.requeued.map(([t]) => t)).toEqual([table]);
    expect(calls).toEqual(['store', `wake ${table}`, `afterWrite ${table}`]);
  });

  it('wakes nothing for a refused body or a read', async () => {
    // Prepare
    const store = aDeadRowsStore();
    const { routes, calls } = routesOver(store);

    // Act
    const refused = await routes.route(request('POST', '/admin/outbox/requeue', {}));
    const read = await routes.route(request('GET', '/admin/outbox/7/requeue'));

    // Assess
    expect([refused.status, read.status]).toEqual([400, 405]);
    expect(calls).toEqual(['store', 'store']);
    expect(store.requeued).toEqual([]);
  });

  it('keeps the answer when afterWrite fails, and says so', async () => {
    // Prepare
    const failures: unknown[] = [];
    const { routes } = routesOver(aDeadRowsStore(), {
      afterWrite: async () => {
        throw new Error('PutMetricData refused');
      },
      onAfterWriteError: (error) => failures.push(error),
    });

    // Act
    const answer = await routes.route(request('POST', '/admin/outbox/7/requeue'));

    // Assess
    expect(answer).toEqual({ status: 200, body: { dryRun: false, count: 1, ids: ['7'] } });
    expect(failures).toEqual([new Error('PutMetricData refused')]);
  });

  it('answers a store that cannot open with storeFailed, else 503 for an outage, and wakes nothing', async () => {
    // Prepare
    const outage = new StoreUnavailableError('connection refused');
    const woken: Table[] = [];
    const deps = {
      store: () => Promise.reject(outage),
      wake: async (table: Table) => woken.push(table),
    };
    const own = routesOver(aDeadRowsStore(), {
      ...deps,
      storeFailed: (error) => ({ status: 599, body: { seen: error === outage } }),
    });
    const byDefault = routesOver(aDeadRowsStore(), deps);

    // Act
    const answers = [
      await own.routes.route(request('POST', '/admin/outbox/7/requeue')),
      await byDefault.routes.route(request('POST', '/admin/outbox/7/requeue')),
    ];

    // Assess
    expect(answers.map((a) => [a.status, a.body])).toEqual([
      [599, { seen: true }],
      [503, { error: 'store_unavailable', message: 'The database is unavailable; retry later' }],
    ]);
    expect(woken).toEqual([]);
  });

  it('tells onAnswered about every admin answer, after the wake', async () => {
    // Prepare
    const seen: string[] = [];
    const { routes, calls } = routesOver(aDeadRowsStore(), {
      onAnswered: ({ method, path }, { status }) =>
        seen.push(`${method} ${path} ${status} after ${calls.length}`),
    });

    // Act
    await routes.route(request('POST', '/admin/outbox/7/requeue'));
    await routes.route(request('GET', '/health'));

    // Assess
    expect(seen).toEqual(['POST /admin/outbox/7/requeue 200 after 3']);
  });
});
