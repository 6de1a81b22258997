/** The admin API end to end on the real PostgreSQL store: every route, as an operator would call it. */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { type Clock, MessageState, type RowId } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import { outboxKeyLockName } from '@queuebox/store-postgres/outbox-key-lock';
import { requireServices, useTestStore } from '@queuebox/testing';
import type pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type AdminHandlerOptions,
  type AdminRequest,
  createAdminHandler,
  HTTP_PURGE_DEDUP_REMEDY,
  purgeDedupWarning,
} from '../src/handler.ts';
import { anOutboxMessage, inboxRows, outboxRows } from './fixtures.ts';

const postgres = await requireServices('admin tests', ['postgres']);

const TOKEN = 'integration-token';
const HOUR_MS = 3_600_000;
const auth = { authorization: `Bearer ${TOKEN}` };

describe.skipIf(postgres.skipReason)('admin API on PostgreSQL', () => {
  const db = useTestStore('admin_http', { url: postgres.url.postgres, storePoolSize: 4 });
  afterEach(async () => {
    await db.clear();
  });

  const handler = (overrides: Partial<AdminHandlerOptions> = {}) =>
    createAdminHandler({ store: db.store, token: TOKEN, ...overrides });
  const get = (path: string, overrides: Partial<AdminHandlerOptions> = {}) =>
    handler(overrides).handle({ method: 'GET', path, headers: auth });
  const post = (path: string, body?: unknown, overrides: Partial<AdminHandlerOptions> = {}) =>
    handler(overrides).handle({
      method: 'POST',
      path,
      headers: auth,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    } satisfies AdminRequest);

  it('GET /admin/stats: counts by literal, oldest pending age, dead rows per topic and source', async () => {
    await outboxRows(db.store, 2, 'dead', { topic: 'orders.paid' });
    await outboxRows(db.store, 1, 'sent');
    const [waiting] = await outboxRows(db.store, 1, 'pending');
    await db.backdate('outbox', [waiting as RowId], 60_000);
    await inboxRows(db.store, 1, 'processed');
    await inboxRows(db.store, 1, 'dead', 'orders-in');

    const response = await get('/admin/stats');

    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      outbox: {
        counts: { pending: 1, processing: 0, sent: 1, dead: 2, failed: 0 },
        oldestPendingAgeMs: expect.any(Number),
        deadByTopic: { 'orders.paid': 2 },
      },
      inbox: {
        counts: { pending: 0, processing: 0, processed: 1, dead: 1, failed: 0 },
        oldestPendingAgeMs: null,
        deadBySource: { 'orders-in': 1 },
      },
    });
    expect(
      (response.body as { outbox: { oldestPendingAgeMs: number } }).outbox.oldestPendingAgeMs,
    ).toBeGreaterThan(59_000);
  });

  it('GET /admin/outbox: filters by state and topic and pages with nextCursor', async () => {
    const dead = await outboxRows(db.store, 5, 'dead', { topic: 'orders.paid' });
    await outboxRows(db.store, 2, 'dead', { topic: 'orders.created' });
    await outboxRows(db.store, 2, 'pending', { topic: 'orders.paid' });

    const seen: RowId[] = [];
    let path = '/admin/outbox?state=dead&topic=orders.paid&limit=2';
    const cursors: (string | null)[] = [];
    for (let page = 0; page < 10; page++) {
      const response = await get(path);
      expect(response.status).toBe(200);
      const body = response.body as {
        rows: { id: RowId; state: string; topic: string }[];
        nextCursor: string | null;
      };
      for (const row of body.rows) expect(row).toMatchObject({ state: 'dead', topic: 'orders.paid' });
      seen.push(...body.rows.map((r) => r.id));
      cursors.push(body.nextCursor);
      if (body.nextCursor === null) break;
      path = `/admin/outbox?state=dead&topic=orders.paid&limit=2&cursor=${body.nextCursor}`;
    }

    expect(seen).toEqual(dead);
    expect(cursors).toHaveLength(3);
    expect(cursors[2]).toBeNull();
  });

  it('GET /admin/outbox/:id shows one row as JSON; a missing row is 404 row_not_found', async () => {
    const [id] = (await outboxRows(db.store, 1, 'dead', {
      topic: 'orders.paid',
      key: 'order-1',
      payload: { total: 42 },
      headers: { 'X-Trace': 't1' },
    })) as [RowId];

    const shown = await get(`/admin/outbox/${id}`);
    const missing = await get('/admin/outbox/999999999');

    expect(shown).toEqual({
      status: 200,
      body: expect.objectContaining({
        id,
        topic: 'orders.paid',
        key: 'order-1',
        state: 'dead',
        attempt: 1,
        maxAttempts: 3,
        lastError: 'HTTP 410 Gone',
        payload: { total: 42 },
        headers: { 'X-Trace': 't1' },
        createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        sentAt: null,
      }),
    });
    expect(missing).toEqual({
      status: 404,
      body: { error: 'row_not_found', message: 'No outbox row 999999999' },
    });
  });

  it('GET /admin/inbox and /admin/inbox/:id: by source and state, processed by its literal', async () => {
    const [processed] = (await inboxRows(db.store, 1, 'processed', 'stripe')) as [RowId];
    await inboxRows(db.store, 2, 'dead', 'github');

    const list = await get('/admin/inbox?source=stripe&state=processed');
    const one = await get(`/admin/inbox/${processed}`);

    expect(list.body).toEqual({
      rows: [expect.objectContaining({ id: processed, state: 'processed' })],
      nextCursor: null,
    });
    expect(one.body).toMatchObject({
      id: processed,
      source: 'stripe',
      state: 'processed',
      processedAt: expect.any(String),
    });
  });

  it('POST /admin/outbox/:id/requeue: dead → pending; then 409 not_dead; a dry run changes nothing', async () => {
    const [id] = (await outboxRows(db.store, 1, 'dead')) as [RowId];

    const dry = await post(`/admin/outbox/${id}/requeue`, { dryRun: true });
    const stillDead = await db.store.outbox.get(id);
    const requeued = await post(`/admin/outbox/${id}/requeue`);
    const again = await post(`/admin/outbox/${id}/requeue`);
    const missing = await post('/admin/outbox/999999999/requeue');

    expect(dry).toEqual({ status: 200, body: { dryRun: true, count: 1, ids: [id] } });
    expect(stillDead?.state).toBe(MessageState.Dead);
    expect(requeued).toEqual({ status: 200, body: { dryRun: false, count: 1, ids: [id] } });
    expect(await db.store.outbox.get(id)).toMatchObject({ state: MessageState.Pending, attempt: 0 });
    expect(again).toEqual({
      status: 409,
      body: {
        error: 'not_dead',
        message: `Only dead rows are requeued; outbox row ${id} is pending`,
        state: 'pending',
      },
    });
    expect(missing.status).toBe(404);
  });

  it('POST /admin/outbox/requeue: a dry run counts, then the real run requeues every batch in one request', async () => {
    const paid = await outboxRows(db.store, 5, 'dead', { topic: 'orders.paid' });
    const [other] = (await outboxRows(db.store, 1, 'dead', { topic: 'orders.created' })) as [RowId];

    const dry = await post('/admin/outbox/requeue', { topic: 'orders.paid', dryRun: true, batchSize: 2 });
    const run = await post('/admin/outbox/requeue', { topic: 'orders.paid', batchSize: 2 });

    expect(dry).toEqual({ status: 200, body: { dryRun: true, count: 5, ids: paid.slice(0, 2), more: true } });
    expect(run).toEqual({ status: 200, body: { dryRun: false, count: 5, ids: paid, more: false } });
    expect((await db.store.outbox.get(other))?.state).toBe(MessageState.Dead);
    const all = await post('/admin/outbox/requeue', { all: true });
    expect(all.body).toEqual({ dryRun: false, count: 1, ids: [other], more: false });
  });

  it('POST /admin/outbox/requeue: stops at the budget with more: true, and the next request goes on', async () => {
    const ids = await outboxRows(db.store, 5, 'dead');
    let now = 0;
    // Every reading of the clock is a second later: the 1 s budget ends after the first batch.
    const clock: Clock = { now: () => (now += 1000) };

    const first = await post(
      '/admin/outbox/requeue',
      { all: true, batchSize: 2 },
      { clock, bulkBudgetMs: 1000 },
    );
    const rest = await post('/admin/outbox/requeue', { all: true, batchSize: 10 });

    expect(first.body).toEqual({ dryRun: false, count: 2, ids: ids.slice(0, 2), more: true });
    expect(rest.body).toEqual({ dryRun: false, count: 3, ids: ids.slice(2), more: false });
  });

  /** Key `key`'s first row dead (one failed attempt), its second claimed: being delivered. */
  async function deadBehindProcessing(
    key: string,
    topic: string,
  ): Promise<{ dead: RowId; processing: RowId }> {
    const [dead, processing] = (await db.store.outbox.insert([
      anOutboxMessage({ key, topic }),
      anOutboxMessage({ key, topic }),
    ])) as [RowId, RowId];
    const [head] = await db.store.outbox.claim({ batchSize: 10, leaseMs: 60_000 });
    if (head?.id !== dead) throw new Error(`claimed ${head?.id}, not the head ${dead}`);
    const claim = { id: head.id, claimToken: head.claimToken ?? '' };
    await db.store.outbox.markDead([{ ...claim, reason: 'HTTP 500', attempted: true }]);
    const [next] = await db.store.outbox.claim({ batchSize: 10, leaseMs: 60_000 });
    if (next?.id !== processing) throw new Error(`claimed ${next?.id}, not ${processing}`);
    return { dead, processing };
  }

  it('POST /admin/outbox/:id/requeue: 409 key_in_flight while a later row of its key is processing', async () => {
    const { dead, processing } = await deadBehindProcessing('Q', 'orders.paid');

    const dry = await post(`/admin/outbox/${dead}/requeue`, { dryRun: true });
    const refused = await post(`/admin/outbox/${dead}/requeue`);

    const body = {
      error: 'key_in_flight',
      message: `Outbox row ${dead} stays dead: row ${processing} of its key "Q" is being delivered (processing), and a requeued row would be claimed beside it. Try again when that row settles`,
      key: 'Q',
      processingId: processing,
    };
    expect(dry).toEqual({ status: 409, body });
    expect(refused).toEqual({ status: 409, body });
    expect((await db.store.outbox.get(dead))?.state).toBe(MessageState.Dead);
    expect(await db.store.outbox.claim({ batchSize: 10, leaseMs: 60_000 })).toEqual([]);
  });

  it('POST /admin/outbox/requeue: rows whose key has a row processing stay dead, counted in skipped', async () => {
    const { dead, processing } = await deadBehindProcessing('Q', 'orders.paid');
    const others = await outboxRows(db.store, 2, 'dead', { topic: 'orders.paid' });

    const dry = await post('/admin/outbox/requeue', { topic: 'orders.paid', dryRun: true });
    const run = await post('/admin/outbox/requeue', { topic: 'orders.paid', batchSize: 1 });

    const skipped = {
      reason: 'key_in_flight',
      count: 1,
      message:
        '1 dead row stays dead: it shares its key with a row being delivered (processing), and requeued it would be claimed beside that row. Requeue again when that row settles',
      rows: [{ id: dead, key: 'Q', processingId: processing }],
    };
    expect(dry.body).toEqual({ dryRun: true, count: 2, ids: others, more: false, skipped });
    expect(run.body).toEqual({ dryRun: false, count: 2, ids: others, more: false, skipped });
    expect((await db.store.outbox.get(dead))?.state).toBe(MessageState.Dead);
  });

  it('POST /admin/inbox/:id/requeue and /admin/inbox/requeue: a row whose aggregate id has a row with the relay stays dead, said so', async () => {
    // x1 dead, then x2 of the same source and aggregate id claimed by a relay (processing).
    const message = (idempotencyKey: string) => ({
      source: 'orders-in',
      idempotencyKey,
      aggregateId: 'order-7',
      eventType: 'order.paid',
      payload: {},
      maxAttempts: 3,
    });
    const relay = { sources: ['orders-in'], batchSize: 10, leaseMs: 60_000 };
    const x1 = (await db.store.inbox.store(message('a'))).id;
    const [first] = await db.store.inbox.claimForRelay(relay);
    await db.store.inbox.markDead([{ id: x1, claimToken: first?.claimToken ?? '', reason: 'no' }]);
    const x2 = (await db.store.inbox.store(message('b'))).id;
    const [second] = await db.store.inbox.claimForRelay(relay);
    expect(second?.id).toBe(x2);

    const one = await post(`/admin/inbox/${x1}/requeue`);
    const many = await post('/admin/inbox/requeue', { source: 'orders-in' });

    expect(one).toEqual({
      status: 409,
      body: {
        error: 'key_in_flight',
        message: `Inbox row ${x1} stays dead: row ${x2} of its source and aggregate id "order-7" is with the relay or a worker (processing), and a requeued row would be forwarded after it. Try again when that row settles`,
        key: 'order-7',
        processingId: x2,
      },
    });
    expect(many.body).toEqual({
      dryRun: false,
      count: 0,
      ids: [],
      more: false,
      skipped: {
        reason: 'key_in_flight',
        count: 1,
        message:
          '1 dead row stays dead: it shares its source and aggregate id with a row the relay or a worker holds (processing), and requeued it would be forwarded after that row. Requeue again when that row settles',
        rows: [{ id: x1, key: 'order-7', processingId: x2 }],
      },
    });
    expect((await db.store.inbox.get(x1))?.state).toBe(MessageState.Dead);
  });

  /** An application's transaction that has enqueued key `key` and not committed: it holds the key's insert lock. */
  async function openEnqueue(key: string): Promise<pg.Client> {
    const writer = await db.connect();
    await writer.query('BEGIN');
    await writer.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
      outboxKeyLockName(db.schema, key),
    ]);
    return writer;
  }

  it('POST /admin/outbox/:id/requeue: 409 key_busy while another transaction holds its key lock; 200 after', async () => {
    const [dead] = (await outboxRows(db.store, 1, 'dead', { key: 'Q' })) as [RowId];
    const writer = await openEnqueue('Q');

    const refused = await post(`/admin/outbox/${dead}/requeue`);
    await writer.query('COMMIT');
    const accepted = await post(`/admin/outbox/${dead}/requeue`);

    expect(refused).toEqual({
      status: 409,
      body: {
        error: 'key_busy',
        message: `Outbox row ${dead} stays dead: another transaction holds the insert lock of its key "Q" (an application's enqueue of that key that has not committed yet, or another requeue or replay of it) or the key's next row to deliver (a claim or settle of that row at this moment), and a requeue does not wait for either. Try again in a moment`,
        key: 'Q',
      },
    });
    expect(accepted).toEqual({ status: 200, body: { dryRun: false, count: 1, ids: [dead] } });
  });

  it('POST /admin/outbox/:id/replay: 409 key_busy at once while another transaction holds its key lock; 201 after', async () => {
    const [sent] = (await outboxRows(db.store, 1, 'sent', { key: 'R' })) as [RowId];
    const writer = await openEnqueue('R');

    const refused = await post(`/admin/outbox/${sent}/replay`);
    await writer.query('COMMIT');
    const replayed = await post(`/admin/outbox/${sent}/replay`);

    expect(refused).toEqual({
      status: 409,
      body: {
        error: 'key_busy',
        message: `Outbox row ${sent} was not replayed: another transaction holds the insert lock of its key "R" (an application's enqueue of that key that has not committed yet, or a requeue or replay of it), and a replay does not wait for it. Try again in a moment`,
        key: 'R',
      },
    });
    expect(replayed.status).toBe(201);
    const { id } = replayed.body as { id: RowId };
    expect(await db.store.outbox.get(id)).toMatchObject({ key: 'R', state: MessageState.Pending });
  });

  it('POST /admin/outbox/:id/replay: 409 not_sent, not key_busy, for a keyed row that is not sent while its key lock is held', async () => {
    const [dead] = (await outboxRows(db.store, 1, 'dead', { key: 'S' })) as [RowId];
    const writer = await openEnqueue('S');

    const refused = await post(`/admin/outbox/${dead}/replay`);
    await writer.query('COMMIT');

    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ error: 'not_sent', state: 'dead' });
  });

  it('POST /admin/outbox/requeue: rows whose key lock another transaction holds stay dead, counted in keyBusy', async () => {
    const [busy] = (await outboxRows(db.store, 1, 'dead', { topic: 'orders.paid', key: 'Q' })) as [RowId];
    const others = [
      ...(await outboxRows(db.store, 1, 'dead', { topic: 'orders.paid', key: 'R' })),
      ...(await outboxRows(db.store, 1, 'dead', { topic: 'orders.paid', key: 'S' })),
    ];
    const writer = await openEnqueue('Q');

    const run = await post('/admin/outbox/requeue', { topic: 'orders.paid', batchSize: 1 });
    await writer.query('COMMIT');

    expect(run).toEqual({
      status: 200,
      body: {
        dryRun: false,
        count: 0,
        ids: [],
        more: true,
        keyBusy: {
          reason: 'key_busy',
          count: 1,
          message:
            "1 dead row stays dead: another transaction held the insert lock of its key (an application's enqueue not yet committed, or another requeue or replay) or its key's next row to deliver (a claim or settle of it at that moment), and a requeue does not wait for either. Requeue again in a moment",
          rows: [{ id: busy, key: 'Q' }],
        },
      },
    });
    // Sent again once the key is free, it goes on.
    const again = await post('/admin/outbox/requeue', { topic: 'orders.paid', batchSize: 1 });
    expect(again.body).toEqual({ dryRun: false, count: 3, ids: [busy, ...others], more: false });
  });

  it('a requeued row that is then sent keeps last_error as history, as the README says', async () => {
    const [id] = (await outboxRows(db.store, 1, 'dead')) as [RowId];
    await post(`/admin/outbox/${id}/requeue`);
    const [claimed] = await db.store.outbox.claim({ batchSize: 10, leaseMs: 60_000 });
    await db.store.outbox.markSent([{ id, claimToken: claimed?.claimToken ?? '', destination: 'billing' }]);

    const shown = await get(`/admin/outbox/${id}`);

    expect(shown.body).toMatchObject({
      id,
      state: 'sent',
      sentAt: expect.any(String),
      lastError: 'HTTP 410 Gone',
    });
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8').replace(/\s+/g, ' ');
    expect(readme).not.toContain('until the next attempt overwrites it');
    expect(readme).toContain(
      "`last_error` is the error of the row's last failed attempt. A requeue leaves it as it is, and so does a later success",
    );
  });

  it('POST /admin/inbox/requeue by ids and by source', async () => {
    const github = await inboxRows(db.store, 2, 'dead', 'github');
    const [stripe] = (await inboxRows(db.store, 1, 'dead', 'stripe')) as [RowId];

    const byIds = await post('/admin/inbox/requeue', { ids: [github[0], stripe], source: 'github' });
    const bySource = await post('/admin/inbox/requeue', { source: 'github' });

    expect(byIds.body).toEqual({ dryRun: false, count: 1, ids: [github[0]], more: false });
    expect(bySource.body).toEqual({ dryRun: false, count: 1, ids: [github[1]], more: false });
    expect((await db.store.inbox.get(stripe))?.state).toBe(MessageState.Dead);
  });

  it('POST /admin/outbox/:id/replay: 201 with a new pending copy; 409 not_sent for other states', async () => {
    const [sent] = (await outboxRows(db.store, 1, 'sent', { topic: 'orders.paid', payload: { n: 7 } })) as [
      RowId,
    ];
    const [dead] = (await outboxRows(db.store, 1, 'dead')) as [RowId];

    const replayed = await post(`/admin/outbox/${sent}/replay`);
    const refused = await post(`/admin/outbox/${dead}/replay`);
    const missing = await post('/admin/outbox/999999999/replay');

    expect(replayed.status).toBe(201);
    const { id } = replayed.body as { id: RowId; replayOf: RowId };
    expect(replayed.body).toEqual({ id, replayOf: sent });
    expect(await db.store.outbox.get(id)).toMatchObject({
      topic: 'orders.paid',
      payload: { n: 7 },
      state: MessageState.Pending,
    });
    expect(refused).toEqual({
      status: 409,
      body: {
        error: 'not_sent',
        message: `Only sent rows are replayed; outbox row ${dead} is dead`,
        state: 'dead',
      },
    });
    expect(missing.status).toBe(404);
  });

  it('POST /admin/:table/:id/redact: 200 erases a final row; 409 not_final for a live row; 404 for a missing one', async () => {
    const [sent] = (await outboxRows(db.store, 1, 'sent', {
      key: 'customer-7',
      payload: { email: 'ada@example.com' },
      headers: { 'X-Email': 'ada@example.com' },
    })) as [RowId];
    const [pending] = (await outboxRows(db.store, 1, 'pending', {
      payload: { email: 'bob@example.com' },
    })) as [RowId];
    const [dead] = (await inboxRows(db.store, 1, 'dead')) as [RowId];
    const before = await db.store.outbox.get(sent);

    const outbox = await post(`/admin/outbox/${sent}/redact`);
    const inbox = await post(`/admin/inbox/${dead}/redact`);
    const refused = await post(`/admin/outbox/${pending}/redact`);
    const missing = await post('/admin/inbox/999999999/redact');

    expect(outbox).toEqual({ status: 200, body: { status: 'redacted', id: sent } });
    expect(await db.store.outbox.get(sent)).toEqual({
      ...before,
      payload: null,
      headers: {},
      lastError: null,
    });
    expect(inbox).toMatchObject({
      status: 200,
      body: { status: 'redacted', id: dead, note: expect.any(String) },
    });
    expect(await db.store.inbox.get(dead)).toMatchObject({
      payload: null,
      lastError: null,
      state: MessageState.Dead,
    });
    expect(refused).toEqual({
      status: 409,
      body: {
        error: 'not_final',
        message: `Outbox row ${pending} is pending: only sent or dead rows are redacted, as a row in any other state may still be in delivery. Redact it once it is sent or dead`,
        state: 'pending',
      },
    });
    expect((await db.store.outbox.get(pending))?.payload).toEqual({ email: 'bob@example.com' });
    expect(missing).toEqual({
      status: 404,
      body: { error: 'row_not_found', message: 'No inbox row 999999999' },
    });
  });

  it('POST /admin/purge: deletes old rows of the state in batches and answers the count', async () => {
    const old = await outboxRows(db.store, 3, 'sent');
    const [young] = (await outboxRows(db.store, 1, 'sent')) as [RowId];
    const processed = await inboxRows(db.store, 2, 'processed');
    await db.backdate('outbox', old, 2 * HOUR_MS);
    await db.backdate('inbox', processed, 2 * HOUR_MS);

    const outbox = await post('/admin/purge', {
      table: 'outbox',
      state: 'sent',
      olderThanMs: HOUR_MS,
      batchSize: 2,
    });
    const inbox = await post('/admin/purge', { table: 'inbox', state: 'processed', olderThanMs: HOUR_MS });

    expect(outbox).toEqual({
      status: 200,
      body: { table: 'outbox', state: 'sent', olderThanMs: HOUR_MS, deleted: 3, more: false },
    });
    // Processed inbox rows under 72 hours old held their idempotency keys: the answer says so.
    expect(inbox.body).toEqual({
      table: 'inbox',
      state: 'processed',
      olderThanMs: HOUR_MS,
      deleted: 2,
      more: false,
      warnings: [purgeDedupWarning('inbox', 'Sent', HOUR_MS, 2, HTTP_PURGE_DEDUP_REMEDY)],
    });
    expect(await db.store.outbox.get(old[0] as RowId)).toBeUndefined();
    expect((await db.store.outbox.get(young))?.state).toBe(MessageState.Sent);
  });

  it('POST /admin/purge with "dryRun": true counts the rows a purge would delete and deletes none', async () => {
    const old = await outboxRows(db.store, 3, 'dead');
    const [young] = (await outboxRows(db.store, 1, 'dead')) as [RowId];
    // Old rows of another state: not counted.
    const sent = await outboxRows(db.store, 2, 'sent');
    await db.backdate('outbox', [...old, ...sent], 2 * HOUR_MS);

    const counted = await post('/admin/purge', {
      table: 'outbox',
      state: 'dead',
      olderThanMs: HOUR_MS,
      dryRun: true,
    });
    const countedSent = await post('/admin/purge', {
      table: 'outbox',
      state: 'sent',
      olderThanMs: HOUR_MS,
      dryRun: true,
    });
    const purged = await post('/admin/purge', { table: 'outbox', state: 'dead', olderThanMs: HOUR_MS });

    expect(countedSent.body).toMatchObject({ dryRun: true, state: 'sent', wouldDelete: 2 });
    expect(counted).toEqual({
      status: 200,
      body: { dryRun: true, table: 'outbox', state: 'dead', olderThanMs: HOUR_MS, wouldDelete: 3 },
    });
    // The purge that follows deletes exactly what the dry run counted.
    expect(purged.body).toMatchObject({ deleted: 3, more: false });
    expect((await db.store.outbox.get(young))?.state).toBe(MessageState.Dead);
  });

  it('a POST with a query string changes nothing: ?dryRun=true is refused, never run for real', async () => {
    const dead = await outboxRows(db.store, 2, 'dead');
    const [sent] = (await outboxRows(db.store, 1, 'sent')) as [RowId];
    await db.backdate('outbox', [...dead, sent], 2 * HOUR_MS);

    const answers = [
      await post('/admin/outbox/requeue?dryRun=true', { all: true }),
      await post(`/admin/outbox/${dead[0]}/requeue?dryRun=true`),
      await post(`/admin/outbox/${sent}/replay?dryRun=true`),
      await post('/admin/purge?dryRun=true', { table: 'outbox', state: 'dead', olderThanMs: HOUR_MS }),
    ];

    for (const answer of answers) {
      expect(answer).toMatchObject({ status: 400, body: { error: 'unknown_parameter' } });
    }
    const page = await db.store.admin.list('outbox', { limit: 10 });
    expect(page.rows.map((row) => row.state)).toEqual([
      MessageState.Dead,
      MessageState.Dead,
      MessageState.Sent,
    ]);
  });

  it("POST /admin/purge: an age past 100 years is 400 invalid_age, not the database's 500", async () => {
    const seen: unknown[] = [];
    const answer = await post(
      '/admin/purge',
      { table: 'outbox', state: 'dead', olderThanMs: 1e15 },
      { onError: (error) => seen.push(error) },
    );

    expect(answer).toMatchObject({ status: 400, body: { error: 'invalid_age' } });
    expect(seen).toEqual([]);
  });

  it('POST /admin/purge: the oldest age it takes, 100 years, is one the database can subtract', async () => {
    await outboxRows(db.store, 1, 'dead');

    const answer = await post('/admin/purge', {
      table: 'outbox',
      state: 'dead',
      olderThanMs: 36_500 * 86_400_000,
    });

    expect(answer).toEqual({
      status: 200,
      body: { table: 'outbox', state: 'dead', olderThanMs: 36_500 * 86_400_000, deleted: 0, more: false },
    });
  });
});

describe('admin API when the database is down', () => {
  it('answers 503 store_unavailable', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const store = await openPostgresStore({
      url: `postgres://postgres@127.0.0.1:${port}/test`,
      schema: 'nowhere',
    });
    const errors: unknown[] = [];
    try {
      const handler = createAdminHandler({ store, token: TOKEN, onError: (e) => errors.push(e) });

      const response = await handler.handle({ method: 'GET', path: '/admin/stats', headers: auth });

      expect(response).toEqual({
        status: 503,
        body: { error: 'store_unavailable', message: 'The database is unavailable; retry later' },
      });
      expect(errors).toHaveLength(1);
    } finally {
      await store.close();
    }
  });
});
