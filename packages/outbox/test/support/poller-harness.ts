/**
 * What the poller integration tests share: a store migrated into a schema of the file's own on the test PostgreSQL
 * (`testPostgresUrl()`; kept for inspection when a test failed), a loopback receiver, and the factories of rows,
 * destinations and pollers. `store` and `receiver` are live bindings, set by `usePollerDatabase()`'s hooks.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type NewOutboxMessage,
  type OutboxRow,
  type RowId,
  rowIdOfMessageId,
  type Store,
} from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import { testPostgresUrl } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, afterEach, beforeAll } from 'vitest';
import type { DestinationOptions, RouteOptions } from '../../src/options.ts';
import { createOutboxPoller, type OutboxPollerDeps, type OutboxPollerOptions } from '../../src/poller.ts';
import { createPublishers, defaultPublisherFactories, type PublisherSet } from '../../src/publishers.ts';
import { type HttpReceiver, startHttpReceiver } from './http-receiver.ts';

export const DATABASE_URL = testPostgresUrl();
export const SCHEMA = `outbox_poller_${randomBytes(4).toString('hex')}`;
export const SECRET = `whsec_${Buffer.from('poller test signing key!').toString('base64')}`;

export let store: Store;
export let receiver: HttpReceiver;
let failed = false;
const openPublishers: PublisherSet[] = [];

/** Registers the file's hooks: open the store and the receiver, clear the rows after each test, drop the schema. */
export function usePollerDatabase(): void {
  beforeAll(async () => {
    receiver = await startHttpReceiver();
    store = await openPostgresStore({ url: DATABASE_URL, schema: SCHEMA });
    await store.migrate();
  });

  afterEach(async (context) => {
    if (context.task.result?.state === 'fail') failed = true;
    await Promise.all(openPublishers.splice(0).map((p) => p.close()));
    receiver.reset();
    await sql(`DELETE FROM "${SCHEMA}".outbox`);
  });

  afterAll(async () => {
    await store?.close();
    await receiver?.close();
    // A failing file keeps its schema for inspection.
    if (failed) console.log(`outbox poller tests failed; schema ${SCHEMA} kept for inspection`);
    else await sql(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
  });
}

export async function sql(text: string): Promise<void> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// factories

export const anOutboxMessage = (over: Partial<NewOutboxMessage> = {}): NewOutboxMessage => ({
  topic: 'orders.created',
  key: null,
  payload: { n: 1 },
  headers: {},
  maxAttempts: 5,
  ...over,
});

export const destinationsFor = (
  over: Partial<DestinationOptions> = {},
): Record<string, DestinationOptions> => ({
  hooks: { type: 'http', url: receiver.url, timeoutMs: 2000, ...over },
});

export const defaultRoutes: RouteOptions[] = [{ match: 'orders.#', destination: 'hooks' }];

export const defaultOptions: OutboxPollerOptions = {
  batchSize: 10,
  claimTimeoutMs: 30_000,
  maxAttempts: 5,
  backoff: { baseMs: 100, maxMs: 10_000 },
  settleReserveMs: 200,
};

export function aPoller(over: Partial<OutboxPollerDeps> = {}) {
  const destinations = over.destinations ?? destinationsFor();
  const publishers = createPublishers(destinations, defaultPublisherFactories);
  openPublishers.push(publishers);
  return createOutboxPoller({
    store: store.outbox,
    publishers,
    routes: defaultRoutes,
    destinations,
    options: defaultOptions,
    // Jitter at its top: the delay is exactly the ceiling, min(maxMs, baseMs × 2^(attempt−1)).
    random: () => 1,
    ...over,
  });
}

export const soon = (ms = 10_000) => ({ deadline: Date.now() + ms });

export async function insert(...messages: Partial<NewOutboxMessage>[]): Promise<RowId[]> {
  return store.outbox.insert(messages.map(anOutboxMessage));
}

export async function rowOf(id: RowId): Promise<OutboxRow> {
  const row = await store.outbox.get(id);
  if (row === undefined) throw new Error(`row ${id} is gone`);
  return row;
}

/** Waits until every given row is due again (its scheduled_at has passed). */
export async function untilDue(ids: readonly RowId[]): Promise<void> {
  const rows = await Promise.all(ids.map(rowOf));
  const latest = Math.max(...rows.map((r) => r.scheduledAt.getTime()));
  const wait = latest - Date.now() + 20;
  if (wait > 0) await sleep(wait);
}

/**
 * The outbox row id of a delivery: the part of its `Idempotency-Key` (the message id, `<install id>-<row id>`)
 * after the last `-`. The file's rows are all of one schema, so the row id names the message.
 */
export function rowIdOf(request: { readonly headers: Record<string, string> }): RowId {
  const messageId = request.headers['idempotency-key'] ?? '';
  return rowIdOfMessageId(messageId);
}

/** Verifies a delivery the way a Standard Webhooks receiver does. */
export function signatureValid(headers: Record<string, string>, body: string): boolean {
  const key = Buffer.from(SECRET.slice('whsec_'.length), 'base64');
  const expected = createHmac('sha256', key)
    .update(`${headers['webhook-id']}.${headers['webhook-timestamp']}.${body}`)
    .digest();
  return (headers['webhook-signature'] ?? '').split(' ').some((entry) => {
    const [version, value] = entry.split(',', 2);
    const given = Buffer.from(value ?? '', 'base64');
    return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected);
  });
}

export const delayOf = (row: OutboxRow) => row.scheduledAt.getTime() - row.updatedAt.getTime();
