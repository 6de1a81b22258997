/**
 * The PGlite capture on a real embedded database migrated by the store: inserts through the store port wake the
 * drains through `listen()`, other schemas do not, and close() stops the callbacks.
 */
import { PGlite } from '@electric-sql/pglite';
import type { Store } from '@queuebox/core';
import { createPgliteExecutor, createPostgresStore } from '@queuebox/store-postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPgliteCapture } from '../src/index.ts';
import { aWakeCounter } from './wake-counter.ts';

describe('createPgliteCapture on an embedded PGlite', () => {
  let db: PGlite;
  let store: Store;

  beforeAll(async () => {
    db = await PGlite.create();
    store = createPostgresStore({
      executor: createPgliteExecutor(db),
      schema: 'queuebox',
      provider: 'pglite',
    });
    await store.migrate();
  });
  afterAll(async () => {
    await store?.close();
  });

  it('wakes onOutbox and onInbox for inserts through the store, only for its own schema, until closed', async () => {
    const counter = aWakeCounter();
    const capture = createPgliteCapture({
      db,
      schema: 'queuebox',
      onOutbox: counter.onOutbox,
      onInbox: counter.onInbox,
    });
    expect(await capture.start()).toBe(true);
    expect(counter.outbox).toBe(1);
    expect(counter.inbox).toBe(1);
    counter.reset();

    await store.outbox.insert([
      { topic: 'a', payload: {}, maxAttempts: 1 },
      { topic: 'b', payload: {}, maxAttempts: 1 },
    ]);
    await store.inbox.store({ source: 's', idempotencyKey: 'k1', payload: {}, maxAttempts: 1 });
    await db.query(`SELECT pg_notify('queuebox_outbox', 'another_schema')`);
    await counter.waitFor('inbox', 1);
    const seen = { outbox: counter.outbox, inbox: counter.inbox };
    await capture.close();
    await store.outbox.insert([{ topic: 'c', payload: {}, maxAttempts: 1 }]);

    expect(seen).toEqual({ outbox: 1, inbox: 1 });
    expect(counter.outbox).toBe(1);
    expect(capture.listening).toBe(false);
  });

  it('answers false from start() when listen() fails, and reports the error', async () => {
    const errors: unknown[] = [];
    const capture = createPgliteCapture({
      db: { listen: () => Promise.reject(new Error('closed database')), query: () => Promise.resolve() },
      schema: 'queuebox',
      onError: (error) => errors.push(error),
    });

    expect(await capture.start()).toBe(false);
    expect(errors).toHaveLength(1);
    expect(capture.listening).toBe(false);
  });
});
