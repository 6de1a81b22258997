/** Rows in a given state, made through the store port itself (as the poller and the sources make them). */
import { randomUUID } from 'node:crypto';
import type { NewInboxMessage, NewOutboxMessage, RowId, Store } from '@queuebox/core';

/** An outbox message: topic `orders.created`, no key, three attempts. */
export function anOutboxMessage(overrides: Partial<NewOutboxMessage> = {}): NewOutboxMessage {
  return { topic: 'orders.created', payload: { id: randomUUID() }, maxAttempts: 3, ...overrides };
}

/** An inbox message of source `stripe` with a fresh idempotency key. */
export function anInboxMessage(overrides: Partial<NewInboxMessage> = {}): NewInboxMessage {
  return { source: 'stripe', idempotencyKey: randomUUID(), payload: { n: 1 }, maxAttempts: 3, ...overrides };
}

/**
 * Inserts `count` outbox rows and, for `sent` / `dead`, claims and settles them (other pending rows claimed on
 * the way are released untouched).
 */
export async function outboxRows(
  store: Store,
  count: number,
  state: 'pending' | 'sent' | 'dead',
  overrides: Partial<NewOutboxMessage> = {},
): Promise<RowId[]> {
  const ids = await store.outbox.insert(Array.from({ length: count }, () => anOutboxMessage(overrides)));
  if (state === 'pending') return ids;
  const claimed = await store.outbox.claim({ batchSize: 1000, leaseMs: 60_000 });
  const mine = claimed
    .filter((r) => ids.includes(r.id))
    .map((r) => ({ id: r.id, claimToken: r.claimToken ?? '' }));
  const others = claimed
    .filter((r) => !ids.includes(r.id))
    .map((r) => ({ id: r.id, claimToken: r.claimToken ?? '' }));
  await store.outbox.release(others);
  if (mine.length !== ids.length) throw new Error(`claimed ${mine.length} of ${ids.length} new rows`);
  if (state === 'sent') await store.outbox.markSent(mine.map((c) => ({ ...c, destination: 'billing' })));
  else await store.outbox.markDead(mine.map((c) => ({ ...c, reason: 'HTTP 410 Gone', attempted: true })));
  return ids;
}

/** Stores `count` inbox rows of `source`: pending, dead (as a broker source stores a poison message), or processed. */
export async function inboxRows(
  store: Store,
  count: number,
  state: 'pending' | 'processed' | 'dead',
  source = 'stripe',
): Promise<RowId[]> {
  const ids: RowId[] = [];
  for (let i = 0; i < count; i++) {
    const message = anInboxMessage({ source });
    const stored =
      state === 'dead' ? await store.inbox.storeDead(message, 'not JSON') : await store.inbox.store(message);
    ids.push(stored.id);
  }
  if (state === 'processed') {
    const claimed = await store.inbox.claim({ sources: [source], batchSize: 1000, leaseMs: 60_000 });
    if (claimed.length !== ids.length)
      throw new Error(`claimed ${claimed.length} of ${ids.length} rows of ${source}`);
    await store.inbox.markProcessed(claimed.map((r) => ({ id: r.id, claimToken: r.claimToken ?? '' })));
  }
  return ids;
}
