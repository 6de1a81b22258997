/**
 * `POST /admin/purge` warns, as `queuebox purge` does, when it deleted processed or dead inbox rows a provider may
 * still retry: the inbox deduplicates an idempotency key only while its row exists. The answer used to carry no
 * warning. Both interfaces word it with one function (`purgeDedupWarning`), each naming its own way to keep the rows.
 */
import type { PurgeOptions, Store } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import {
  type AdminRequest,
  createAdminHandler,
  HTTP_PURGE_DEDUP_REMEDY,
  INBOX_DEDUP_WINDOW_MS,
  purgeDedupWarning,
} from '../src/handler.ts';
import { createAdminRoutes } from '../src/http-routes.ts';

const TOKEN = 'admin-token-0123456789';
const HOUR_MS = 3_600_000;

/** A store whose purge deletes `counts[table]` rows once, then none; it records every request. */
function purgingStore(counts: { outbox: number; inbox: number }) {
  const requests: PurgeOptions[] = [];
  const left = { ...counts };
  const admin = {
    purge: async (request: PurgeOptions) => {
      requests.push(request);
      const n = Math.min(left[request.table], request.batchSize);
      left[request.table] -= n;
      return n;
    },
  };
  return { store: { admin } as unknown as Pick<Store, 'admin' | 'outbox' | 'inbox'>, requests };
}

const purge = (body: unknown): AdminRequest => ({
  method: 'POST',
  path: '/admin/purge',
  headers: { authorization: `Bearer ${TOKEN}` },
  body: JSON.stringify(body),
});

async function answer(body: unknown, counts: { outbox: number; inbox: number }) {
  const { store } = purgingStore(counts);
  return createAdminHandler({ store, token: TOKEN }).handle(purge(body));
}

describe('POST /admin/purge of inbox rows younger than 72 hours', () => {
  it('answers the deletion with a warning that provider retries of the deleted keys are stored and delivered again', async () => {
    // Act
    const response = await answer(
      { table: 'inbox', state: 'processed', olderThanMs: 24 * HOUR_MS },
      { outbox: 0, inbox: 3 },
    );

    // Assess
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      table: 'inbox',
      state: 'processed',
      olderThanMs: 24 * HOUR_MS,
      deleted: 3,
      more: false,
      warnings: [
        'deleted 3 processed inbox rows older than 1d, which can include rows younger than 72h. The inbox ' +
          "deduplicates an idempotency key only while its row exists: a provider's retry of a deleted key (Stripe " +
          'retries for up to 3 days) is stored and delivered again. Keep inbox rows longer than your providers ' +
          'retry: "olderThanMs": 259200000 (72h) or more.',
      ],
    });
  });

  it('warns for dead inbox rows too: a dead row holds its idempotency key as a processed one does', async () => {
    const response = await answer(
      { table: 'inbox', state: 'dead', olderThanMs: HOUR_MS },
      { outbox: 0, inbox: 1 },
    );

    expect((response.body as { warnings?: string[] }).warnings).toEqual([
      purgeDedupWarning('inbox', 'Dead', HOUR_MS, 1, HTTP_PURGE_DEDUP_REMEDY),
    ]);
    expect((response.body as { warnings: string[] }).warnings[0]).toMatch(
      /^deleted 1 dead inbox row older than 1h,/,
    );
  });

  it.each([
    ['the outbox', { table: 'outbox', state: 'sent', olderThanMs: HOUR_MS }, { outbox: 5, inbox: 5 }],
    [
      'inbox rows of 72 hours or more',
      { table: 'inbox', state: 'processed', olderThanMs: INBOX_DEDUP_WINDOW_MS },
      { outbox: 0, inbox: 5 },
    ],
    ['no row deleted', { table: 'inbox', state: 'processed', olderThanMs: HOUR_MS }, { outbox: 0, inbox: 0 }],
  ])('gives no warning for %s', async (_what, body, counts) => {
    const response = await answer(body, counts);

    expect(response.status).toBe(200);
    expect(response.body).not.toHaveProperty('warnings');
  });

  it('reaches the AWS admin routes (createAdminRoutes) with the warning', async () => {
    const { store } = purgingStore({ outbox: 0, inbox: 2 });
    const routes = createAdminRoutes({
      store: async () => store,
      checkHealth: async () => ({ status: 200, body: {} }),
      authorize: () => true,
      wake: async () => undefined,
    });

    const response = await routes.route({
      method: 'POST',
      path: '/admin/purge',
      body: JSON.stringify({ table: 'inbox', state: 'sent', olderThanMs: 2 * HOUR_MS }),
    });

    expect(response.status).toBe(200);
    expect((response.body as { warnings?: string[] }).warnings).toEqual([
      purgeDedupWarning('inbox', 'Sent', 2 * HOUR_MS, 2, HTTP_PURGE_DEDUP_REMEDY),
    ]);
  });
});

describe('POST /admin/purge with "dryRun": true', () => {
  /** `purgingStore`'s store, whose admin also counts (as the PostgreSQL and PGlite stores' do). */
  function countingStore(counts: { outbox: number; inbox: number }) {
    const { store, requests } = purgingStore(counts);
    const counted: Omit<PurgeOptions, 'batchSize'>[] = [];
    const admin = Object.assign(store.admin, {
      countPurge: async (options: Omit<PurgeOptions, 'batchSize'>) => {
        counted.push(options);
        return counts[options.table];
      },
    });
    return { store: { ...store, admin } as Pick<Store, 'admin' | 'outbox' | 'inbox'>, requests, counted };
  }

  it('counts what the purge would delete and deletes nothing, warning of young inbox rows as a dry run', async () => {
    // Prepare
    const { store, requests, counted } = countingStore({ outbox: 0, inbox: 4 });

    // Act
    const response = await createAdminHandler({ store, token: TOKEN }).handle(
      purge({ table: 'inbox', state: 'dead', olderThanMs: HOUR_MS, dryRun: true }),
    );

    // Assess
    expect(requests).toEqual([]);
    expect(counted).toEqual([{ table: 'inbox', state: 'Dead', olderThanMs: HOUR_MS }]);
    expect(response).toEqual({
      status: 200,
      body: {
        dryRun: true,
        table: 'inbox',
        state: 'dead',
        olderThanMs: HOUR_MS,
        wouldDelete: 4,
        warnings: [purgeDedupWarning('inbox', 'Dead', HOUR_MS, 4, HTTP_PURGE_DEDUP_REMEDY, true)],
      },
    });
    expect((response.body as { warnings: string[] }).warnings[0]).toMatch(
      /^would delete 4 dead inbox rows older than 1h,/,
    );
  });

  it('answers 409 dry_run_unavailable on a store that cannot count, deleting nothing', async () => {
    // Prepare: the SQL Server store's admin has no countPurge.
    const { store, requests } = purgingStore({ outbox: 3, inbox: 0 });

    // Act
    const response = await createAdminHandler({ store, token: TOKEN }).handle(
      purge({ table: 'outbox', state: 'dead', olderThanMs: HOUR_MS, dryRun: true }),
    );

    // Assess
    expect(response).toMatchObject({ status: 409, body: { error: 'dry_run_unavailable' } });
    expect(requests).toEqual([]);
  });

  it('refuses a dryRun that is not a boolean before anything runs', async () => {
    // Prepare
    const { store, requests, counted } = countingStore({ outbox: 3, inbox: 0 });

    // Act
    const response = await createAdminHandler({ store, token: TOKEN }).handle(
      purge({ table: 'outbox', state: 'dead', olderThanMs: HOUR_MS, dryRun: 'true' }),
    );

    // Assess
    expect(response).toMatchObject({ status: 400, body: { error: 'invalid_dry_run' } });
    expect(requests).toEqual([]);
    expect(counted).toEqual([]);
  });
});
