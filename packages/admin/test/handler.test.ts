/**
 * Routing, authorization and input checks of the admin handler, without a database: every request here is
 * answered before the store is reached, which the store proves by failing the test if it is called.
 */
import {
  errorResponse,
  HttpError,
  QueueBoxError,
  type Store,
  StoreError,
  StoreUnavailableError,
} from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { bearerMatches } from '../src/auth.ts';
import { type AdminHandlerOptions, type AdminRequest, createAdminHandler } from '../src/handler.ts';
import { MAX_REQUEUE_IDS, parseIds, parsePurgeState, parseState, stateWord } from '../src/input.ts';

const TOKEN = 'admin-token-0123456789';

/** A store that must never be reached: any call fails the test that made it. */
function unreachableStore(): Pick<Store, 'admin' | 'outbox' | 'inbox'> {
  const fail = (what: string) => () => {
    throw new Error(`the store was reached (${what}) although the request should have been answered first`);
  };
  return {
    admin: {
      stats: fail('stats'),
      gauges: fail('gauges'),
      list: fail('list') as never,
      requeue: fail('requeue'),
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

function aHandler(overrides: Partial<AdminHandlerOptions> = {}) {
  return createAdminHandler({ store: unreachableStore(), token: TOKEN, ...overrides });
}

function aRequest(overrides: Partial<AdminRequest> = {}): AdminRequest {
  return { method: 'GET', path: '/admin/stats', headers: { authorization: `Bearer ${TOKEN}` }, ...overrides };
}

const post = (path: string, body?: unknown): AdminRequest =>
  aRequest({ method: 'POST', path, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

describe('createAdminHandler', () => {
  it('refuses to run open: it needs a token or an authorize function', () => {
    expect(() => createAdminHandler({ store: unreachableStore() })).toThrow(QueueBoxError);
    expect(() => createAdminHandler({ store: unreachableStore(), token: '' })).toThrow(/never runs open/);
  });
});

describe('authorization', () => {
  it.each([
    ['no Authorization header', {}],
    ['a wrong token', { authorization: 'Bearer admin-token-0123456780' }],
    ['a longer token', { authorization: `Bearer ${TOKEN}x` }],
    ['a prefix of the token', { authorization: `Bearer ${TOKEN.slice(0, 5)}` }],
    ['another scheme', { authorization: `Basic ${TOKEN}` }],
    ['the bare scheme', { authorization: 'Bearer' }],
  ])('answers 401 unauthorized for %s', async (_what, headers) => {
    const handler = aHandler();

    const response = await handler.handle(aRequest({ headers }));

    expect(response).toEqual({
      status: 401,
      body: { error: 'unauthorized', message: 'A valid bearer token is required' },
      headers: { 'www-authenticate': 'Bearer' },
    });
  });

  it('checks the token before routing, so unknown admin paths answer 401 too', async () => {
    const response = await aHandler().handle(aRequest({ path: '/admin/nothing', headers: {} }));

    expect(response.status).toBe(401);
  });

  it('lets the right token through in any header case and scheme case', async () => {
    const handler = aHandler();

    const response = await handler.handle(
      aRequest({ path: '/admin/outbox?limit=0', headers: { Authorization: `bearer ${TOKEN}` } }),
    );

    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ error: 'invalid_limit' });
  });

  it('asks authorize with the request when there is no token (IAM on AWS)', async () => {
    const seen: AdminRequest[] = [];
    const open = aHandler({
      token: undefined,
      authorize: (r) => {
        seen.push(r);
        return true;
      },
    });
    const closed = aHandler({ token: undefined, authorize: async () => false });
    const request = aRequest({ path: '/admin/outbox?limit=x', headers: {} });

    const allowed = await open.handle(request);
    const refused = await closed.handle(request);

    expect(seen).toEqual([request]);
    expect(allowed.body).toMatchObject({ error: 'invalid_limit' });
    expect(refused.status).toBe(401);
  });

  it('needs both when a token and authorize are given', async () => {
    const handler = aHandler({ authorize: () => false });

    expect((await handler.handle(aRequest())).status).toBe(401);
  });
});

describe('bearerMatches', () => {
  it('accepts exactly the token, with any whitespace after the scheme', () => {
    expect(bearerMatches(`Bearer ${TOKEN}`, TOKEN)).toBe(true);
    expect(bearerMatches(`Bearer \t${TOKEN} `, TOKEN)).toBe(true);
    expect(bearerMatches(`Bearer ${TOKEN} extra`, TOKEN)).toBe(false);
    expect(bearerMatches(undefined, TOKEN)).toBe(false);
    expect(bearerMatches('Bearer ', '')).toBe(false);
  });
});

describe('routing', () => {
  it.each([
    ['/admin'],
    ['/admin/'],
    ['/admin/nope'],
    ['/admin/stats/more'],
    ['/admin/outbox/1/requeue/now'],
    ['/admin/outbox/1/retry'],
    ['/admin/inbox/1/redact/now'],
    ['/admin/inbox/1/replay'],
    ['/elsewhere'],
    ['/administrator/stats'],
  ])('answers 404 not_found for %s', async (path) => {
    const response = await aHandler().handle(aRequest({ method: 'POST', path }));

    expect(response.status).toBe(404);
    expect(response.body).toMatchObject({ error: 'not_found' });
  });

  it.each([
    ['POST', '/admin/stats', 'GET'],
    ['GET', '/admin/purge', 'POST'],
    ['DELETE', '/admin/outbox', 'GET'],
    ['DELETE', '/admin/outbox/1', 'GET'],
    ['GET', '/admin/outbox/requeue', 'POST'],
    ['GET', '/admin/inbox/7/requeue', 'POST'],
    ['GET', '/admin/outbox/7/replay', 'POST'],
    ['GET', '/admin/outbox/7/redact', 'POST'],
    ['PUT', '/admin/inbox/7/redact', 'POST'],
  ])('answers 405 for %s %s, allowing %s', async (method, path, allowed) => {
    const response = await aHandler().handle(aRequest({ method, path }));

    expect(response).toEqual({
      status: 405,
      body: { error: 'method_not_allowed', message: `Use ${allowed}` },
      headers: { allow: allowed },
    });
  });

  it('serves under another base path when asked', async () => {
    const handler = aHandler({ basePath: '/ops/' });

    expect(handler.basePath).toBe('/ops');
    expect((await handler.handle(aRequest({ path: '/ops/outbox?limit=0' }))).body).toMatchObject({
      error: 'invalid_limit',
    });
    expect((await handler.handle(aRequest({ path: '/admin/stats' }))).status).toBe(404);
  });
});

describe('input checks', () => {
  it.each([
    ['/admin/outbox?state=archived', 'invalid_state'],
    ['/admin/inbox?state=sent', 'invalid_state'],
    ['/admin/outbox?state=processed', 'invalid_state'],
    ['/admin/outbox?limit=0', 'invalid_limit'],
    ['/admin/outbox?limit=501', 'invalid_limit'],
    ['/admin/outbox?limit=1.5', 'invalid_limit'],
    ['/admin/outbox?cursor=abc', 'invalid_cursor'],
    ['/admin/outbox?cursor=0', 'invalid_cursor'],
    ['/admin/outbox?source=stripe', 'unknown_parameter'],
    ['/admin/inbox?topic=orders', 'unknown_parameter'],
    ['/admin/stats?verbose=1', 'unknown_parameter'],
    ['/admin/outbox?state=dead&state=sent', 'invalid_parameter'],
    ['/admin/outbox/abc', 'invalid_id'],
    ['/admin/outbox/0', 'invalid_id'],
    ['/admin/inbox/99999999999999999999', 'invalid_id'],
    ['/admin/inbox?source=demo%00', 'invalid_source'],
  ])('GET %s answers 400 %s', async (path, code) => {
    const response = await aHandler().handle(aRequest({ path }));

    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ error: code, message: expect.any(String) });
  });

  it('reads query parameters given apart from the path, over those of the path', async () => {
    const response = await aHandler().handle(
      aRequest({ path: '/admin/outbox?limit=5', query: { limit: '0', state: undefined } }),
    );

    expect(response.body).toMatchObject({ error: 'invalid_limit' });
  });

  it.each([
    ['/admin/outbox/requeue', 'not json', 'invalid_json'],
    ['/admin/outbox/requeue', [1], 'invalid_body'],
    ['/admin/outbox/requeue', { topic: 'a', source: 'b' }, 'invalid_body'],
    ['/admin/outbox/requeue', {}, 'selection_required'],
    ['/admin/outbox/requeue', { dryRun: true }, 'selection_required'],
    ['/admin/outbox/requeue', { all: false }, 'invalid_body'],
    ['/admin/outbox/requeue', { ids: [] }, 'invalid_ids'],
    ['/admin/outbox/requeue', { ids: ['1', 'x'] }, 'invalid_ids'],
    ['/admin/outbox/requeue', { ids: '1' }, 'invalid_ids'],
    ['/admin/outbox/requeue', { topic: '' }, 'invalid_topic'],
    ['/admin/inbox/requeue', { source: 42 }, 'invalid_source'],
    ['/admin/outbox/requeue', { topic: 'orders\u0000' }, 'invalid_topic'],
    ['/admin/inbox/requeue', { source: '\uD800' }, 'invalid_source'],
    ['/admin/outbox/requeue', { all: true, dryRun: 'yes' }, 'invalid_dry_run'],
    ['/admin/outbox/requeue', { all: true, batchSize: 0 }, 'invalid_batch_size'],
    ['/admin/outbox/requeue', { all: true, batchSize: 10_001 }, 'invalid_batch_size'],
    ['/admin/outbox/requeue', { all: true, batchSize: 2.5 }, 'invalid_batch_size'],
    ['/admin/outbox/5/requeue', { dryRun: 1 }, 'invalid_dry_run'],
    ['/admin/outbox/5/requeue', { force: true }, 'invalid_body'],
    ['/admin/outbox/5/replay', { dryRun: true }, 'invalid_body'],
    ['/admin/outbox/x/replay', undefined, 'invalid_id'],
    ['/admin/outbox/x/redact', undefined, 'invalid_id'],
    ['/admin/inbox/0/redact', undefined, 'invalid_id'],
    ['/admin/inbox/5/redact', { force: true }, 'invalid_body'],
    ['/admin/purge', {}, 'invalid_table'],
    ['/admin/purge', { table: 'both', state: 'sent', olderThanMs: 1 }, 'invalid_table'],
    ['/admin/purge', { table: 'outbox', state: 'pending', olderThanMs: 1 }, 'invalid_state'],
    ['/admin/purge', { table: 'outbox', state: 'dead' }, 'invalid_age'],
    ['/admin/purge', { table: 'outbox', state: 'dead', olderThanMs: -1 }, 'invalid_age'],
    ['/admin/purge', { table: 'outbox', state: 'dead', olderThanMs: '3600000' }, 'invalid_age'],
    ['/admin/purge', { table: 'outbox', state: 'dead', olderThanMs: 0 }, 'invalid_age'],
    ['/admin/purge', { table: 'inbox', state: 'sent', olderThanMs: 3_599_999 }, 'invalid_age'],
    // Past 100 years: once a 500 (the database's `timestamp out of range`), now refused before the store.
    ['/admin/purge', { table: 'outbox', state: 'dead', olderThanMs: 1e15 }, 'invalid_age'],
    ['/admin/purge', { table: 'outbox', state: 'dead', olderThanMs: 36_500 * 86_400_000 + 1 }, 'invalid_age'],
    ['/admin/purge', { table: 'outbox', state: 'dead', olderThanMs: 1e300 }, 'invalid_age'],
    [
      '/admin/purge',
      { table: 'inbox', state: 'processed', olderThanMs: 3_600_000, batchSize: 0 },
      'invalid_batch_size',
    ],
  ])('POST %s %j answers 400 %s', async (path, body, code) => {
    const request = typeof body === 'string' ? aRequest({ method: 'POST', path, body }) : post(path, body);

    const response = await aHandler().handle(request);

    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ error: code });
  });

  it('takes up to 1000 ids in a requeue, and refuses 1001 before reaching the store', async () => {
    // Prepare
    const ids = (n: number) => Array.from({ length: n }, (_, i) => String(i + 1));

    // Act
    const response = await aHandler().handle(post('/admin/outbox/requeue', { ids: ids(1001) }));

    // Assess
    expect(MAX_REQUEUE_IDS).toBe(1000);
    expect(parseIds(ids(1000))).toHaveLength(1000);
    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({
      error: 'invalid_ids',
      message: expect.stringContaining('1 to 1000'),
    });
  });

  it('reads a body given as bytes, and refuses one over maxBodyBytes with 413', async () => {
    const handler = aHandler({ maxBodyBytes: 64 });
    const bytes = new TextEncoder().encode(JSON.stringify({ topic: '' }));

    const small = await handler.handle(
      aRequest({ method: 'POST', path: '/admin/outbox/requeue', body: bytes }),
    );
    const large = await handler.handle(post('/admin/outbox/requeue', { topic: 'x'.repeat(100) }));

    expect(small.body).toMatchObject({ error: 'invalid_topic' });
    expect(large.status).toBe(413);
    expect(large.body).toMatchObject({ error: 'payload_too_large' });
  });
});

describe('query parameters of a POST', () => {
  // A POST reads its input from the JSON body only: `?dryRun=true` once ran a real requeue, replay or purge.
  it.each([
    ['/admin/outbox/requeue?dryRun=true', { all: true }, 'dryRun'],
    ['/admin/inbox/requeue?dryRun=true', { source: 'stripe' }, 'dryRun'],
    ['/admin/outbox/5/requeue?dryRun=true', undefined, 'dryRun'],
    ['/admin/inbox/5/requeue?dryRun=1', {}, 'dryRun'],
    ['/admin/outbox/5/replay?dryRun=true', undefined, 'dryRun'],
    ['/admin/inbox/5/redact?dryRun=true', undefined, 'dryRun'],
    ['/admin/purge?dryRun=true', { table: 'outbox', state: 'dead', olderThanMs: 3_600_000 }, 'dryRun'],
    ['/admin/purge?table=outbox', { table: 'outbox', state: 'dead', olderThanMs: 3_600_000 }, 'table'],
    ['/admin/outbox/requeue?topic=orders', { all: true }, 'topic'],
    ['/admin/outbox/requeue?dryRun=', { all: true }, 'dryRun'],
    ['/admin/outbox/requeue?verbose=1', { all: true }, 'verbose'],
  ])('POST %s %j answers 400 unknown_parameter naming %s, before the store', async (path, body, name) => {
    const response = await aHandler().handle(post(path, body));

    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({
      error: 'unknown_parameter',
      message: expect.stringContaining(`"${name}"`),
    });
  });

  it('says that dryRun belongs in the JSON body where the route takes it', async () => {
    const requeue = await aHandler().handle(post('/admin/outbox/requeue?dryRun=true', { all: true }));
    const replay = await aHandler().handle(post('/admin/outbox/5/replay?dryRun=true'));

    expect(requeue.body).toMatchObject({
      message: 'Query parameter "dryRun" is not read: dryRun belongs in the JSON body, e.g. {"dryRun":true}',
    });
    expect(replay.body).toMatchObject({
      message: expect.stringContaining('a POST takes no query parameters, its input is the JSON body'),
    });
  });

  it('refuses parameters given apart from the path too (an HTTP shell that parsed them)', async () => {
    const response = await aHandler().handle({
      ...post('/admin/outbox/requeue', { all: true }),
      query: { dryRun: 'true' },
    });

    expect(response.body).toMatchObject({ error: 'unknown_parameter' });
  });
});

describe('HEAD', () => {
  const stats = {
    outbox: { counts: {}, oldestPendingAgeMs: null, deadByTopic: {} },
    inbox: { counts: {}, oldestPendingAgeMs: null, deadBySource: {} },
  };

  it('is answered as GET on the GET routes (it was 405), and is 405 where GET is', async () => {
    const store = unreachableStore();
    const handler = aHandler({
      store: { ...store, admin: { ...store.admin, stats: async () => stats as never } },
    });

    const head = await handler.handle(aRequest({ method: 'HEAD' }));
    const get = await handler.handle(aRequest({ method: 'GET' }));
    const badLimit = await handler.handle(aRequest({ method: 'HEAD', path: '/admin/outbox?limit=0' }));
    const onPost = await handler.handle(aRequest({ method: 'HEAD', path: '/admin/outbox/requeue' }));

    expect(head).toEqual(get);
    expect(head.status).toBe(200);
    expect(badLimit.body).toMatchObject({ error: 'invalid_limit' });
    expect(onPost).toMatchObject({ status: 405, headers: { allow: 'POST' } });
  });
});

describe('unauthorized', () => {
  it('answers the 401 without a body to read, and nothing for a request that may pass', async () => {
    const handler = aHandler();
    const { body: _none, ...target } = post('/admin/outbox/requeue', { all: true });

    expect(await handler.unauthorized(target)).toBeUndefined();
    expect(await handler.unauthorized({ ...target, headers: {} })).toEqual({
      status: 401,
      body: { error: 'unauthorized', message: 'A valid bearer token is required' },
      headers: { 'www-authenticate': 'Bearer' },
    });
  });

  it('answers a failing authorize as handle does, and tells onError', async () => {
    const seen: unknown[] = [];
    const failure = new Error('IAM lookup failed');
    const handler = aHandler({
      authorize: () => Promise.reject(failure),
      onError: (error) => seen.push(error),
    });

    expect(await handler.unauthorized(aRequest())).toMatchObject({ status: 500 });
    expect(seen).toEqual([failure]);
  });
});

describe('errors of the store', () => {
  function failingStats(error: unknown) {
    const store = unreachableStore();
    return { ...store, admin: { ...store.admin, stats: () => Promise.reject(error) } };
  }

  it('answers 503 store_unavailable for an outage, also when it is the cause of another error', async () => {
    const seen: unknown[] = [];
    const outage = new StoreUnavailableError('connection refused');
    const wrapped = new Error('stats failed', { cause: outage });

    for (const error of [outage, wrapped]) {
      const handler = aHandler({ store: failingStats(error), onError: (e) => seen.push(e) });
      const response = await handler.handle(aRequest());
      expect(response).toEqual({
        status: 503,
        body: { error: 'store_unavailable', message: 'The database is unavailable; retry later' },
      });
    }
    expect(seen).toEqual([outage, wrapped]);
  });

  it('answers a bare 500 for anything else and hands the error to onError only', async () => {
    const seen: unknown[] = [];
    const failure = new StoreError('relation "outbox" does not exist at password=hunter2');
    const handler = aHandler({ store: failingStats(failure), onError: (e) => seen.push(e) });

    const response = await handler.handle(aRequest());

    expect(response).toEqual({
      status: 500,
      body: { error: 'internal_error', message: 'Internal error' },
    });
    expect(seen).toEqual([failure]);
  });

  it('errorResponse keeps the status and code of an HttpError', () => {
    expect(errorResponse(new HttpError(409, 'not_dead', 'no'))).toEqual({
      status: 409,
      body: { error: 'not_dead', message: 'no' },
    });
  });
});

describe('state words', () => {
  it('reads the literals of each table and failed, in any case', () => {
    expect(parseState('outbox', 'DEAD')).toBe('Dead');
    expect(parseState('outbox', 'sent')).toBe('Sent');
    expect(parseState('inbox', 'processed')).toBe('Sent');
    expect(parseState('inbox', 'Failed')).toBe('Failed');
    expect(() => parseState('inbox', 'sent')).toThrow(HttpError);
  });

  it('writes the literal of each table, and failed for unknown literals', () => {
    expect(stateWord('outbox', 'Sent')).toBe('sent');
    expect(stateWord('inbox', 'Sent')).toBe('processed');
    expect(stateWord('inbox', 'Failed')).toBe('failed');
  });

  it('lets a purge name finished rows sent or processed on either table, or dead, and nothing else', () => {
    expect(['sent', 'processed', 'Dead'].map(parsePurgeState)).toEqual(['Sent', 'Sent', 'Dead']);
    for (const word of ['pending', 'processing', 'failed', 1])
      expect(() => parsePurgeState(word)).toThrow(HttpError);
  });
});
