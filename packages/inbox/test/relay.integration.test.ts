import { randomUUID } from 'node:crypto';
import type { NewInboxMessage } from '@queuebox/core';
import { MessageState } from '@queuebox/core';
import { useTestStore } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import type { Sources } from '../src/index.ts';
import { createIngestion, createRelay } from '../src/index.ts';

const db = useTestStore('inbox_relay', { storePoolSize: 10 });

// Every test uses its own source names, so the rows of one test never meet the claims of another.
function names() {
  const tag = randomUUID().slice(0, 8);
  return { push: `push_${tag}`, pull: `pull_${tag}`, broker: `broker_${tag}` };
}

const aMessage = (source: string, overrides: Partial<NewInboxMessage> = {}): NewInboxMessage => ({
  source,
  idempotencyKey: randomUUID(),
  eventType: 'order.created',
  aggregateId: 'order-1',
  correlationId: null,
  payload: { order: 1 },
  headers: { 'content-type': 'application/json' },
  maxAttempts: 5,
  ...overrides,
});

async function storeNew(message: NewInboxMessage): Promise<string> {
  const result = await db.store.inbox.store(message);
  if (result.status !== 'stored') throw new Error('expected a new row');
  return result.id;
}

const FAR = () => Date.now() + 60_000;

describe('relay drain', () => {
  it('forwards a push row into the outbox as the relay table says, and marks it processed', async () => {
    // Prepare
    const n = names();
    const sources: Sources = { [n.push]: { type: 'http', topic: 'in.{{ source }}.{{ eventType }}' } };
    const id = await storeNew(
      aMessage(n.push, {
        idempotencyKey: 'key-1',
        correlationId: 'corr-9',
        headers: { 'content-type': 'application/json', 'X-Source': 'spoofed', 'x-inbox-id': '0' },
      }),
    );
    const relay = createRelay({
      store: db.store.inbox,
      sources,
      inbox: { relay: { maxAttempts: 3 } },
      outbox: { maxAttempts: 8 },
    });
    // Act
    const report = await relay.drain({ deadline: FAR() });
    // Assess
    expect(report).toMatchObject({
      enabled: true,
      claimed: 1,
      forwarded: 1,
      dead: 0,
      stale: 0,
      stoppedFor: 'empty',
    });
    expect(report.outboxIds).toHaveLength(1);
    const outbox = await db.store.outbox.get(report.outboxIds[0] ?? '');
    expect(outbox).toMatchObject({
      topic: `in.${n.push}.order.created`,
      key: 'order-1',
      payload: { order: 1 },
      maxAttempts: 3,
      state: MessageState.Pending,
      headers: {
        'content-type': 'application/json',
        'x-inbox-id': id,
        'x-source': n.push,
        'x-idempotency-key': 'key-1',
        'X-Correlation-Id': 'corr-9',
      },
    });
    expect(Object.keys(outbox?.headers ?? {})).toHaveLength(5);
    expect((await db.store.inbox.get(id))?.state).toBe(MessageState.Sent);
  });

  it('never relays pull sources', async () => {
    const n = names();
    const sources: Sources = { [n.push]: { type: 'http' }, [n.pull]: { type: 'http', mode: 'pull' } };
    const pullId = await storeNew(aMessage(n.pull));
    const report = await createRelay({ store: db.store.inbox, sources }).drain({ deadline: FAR() });
    expect(report.forwarded).toBe(0);
    expect((await db.store.inbox.get(pullId))?.state).toBe(MessageState.Pending);
  });

  it('sends a row whose topic renders empty to dead, writing no outbox row for it', async () => {
    const n = names();
    const sources: Sources = { [n.push]: { type: 'http' } };
    const id = await storeNew(aMessage(n.push, { eventType: null }));
    const forwardedId = await storeNew(aMessage(n.push));
    const before = await db.countOutbox();
    const report = await createRelay({ store: db.store.inbox, sources }).drain({ deadline: FAR() });
    expect(report).toMatchObject({ claimed: 2, forwarded: 1, dead: 1 });
    expect(await db.countOutbox()).toBe(before + 1);
    const dead = await db.store.inbox.get(id);
    expect(dead).toMatchObject({ state: MessageState.Dead, lastError: 'the topic template rendered empty' });
    expect((await db.store.inbox.get(forwardedId))?.state).toBe(MessageState.Sent);
  });

  it('uses {{ source }} as the default topic of a broker source and outbox.maxAttempts by default', async () => {
    const n = names();
    await storeNew(aMessage(n.broker, { eventType: null }));
    const relay = createRelay({
      store: db.store.inbox,
      sources: { [n.broker]: { type: 'amqp' } },
      outbox: { maxAttempts: 8 },
    });
    const report = await relay.drain({ deadline: FAR() });
    const outbox = await db.store.outbox.get(report.outboxIds[0] ?? '');
    expect(outbox).toMatchObject({ topic: n.broker, maxAttempts: 8 });
  });

  it('forwards in batches of inbox.relay.batchSize until nothing is left', async () => {
    const n = names();
    for (let i = 0; i < 5; i += 1) await storeNew(aMessage(n.push, { aggregateId: null }));
    const relay = createRelay({
      store: db.store.inbox,
      sources: { [n.push]: { type: 'http' } },
      inbox: { relay: { batchSize: 2 } },
    });
    const report = await relay.drain({ deadline: FAR() });
    expect(report).toMatchObject({ batches: 3, claimed: 5, forwarded: 5, stoppedFor: 'empty' });
    expect(new Set(report.outboxIds).size).toBe(5);
  });

  it('does nothing when inbox.relay.enabled is false', async () => {
    const n = names();
    const id = await storeNew(aMessage(n.push));
    const relay = createRelay({
      store: db.store.inbox,
      sources: { [n.push]: { type: 'http' } },
      inbox: { relay: { enabled: false } },
    });
    const report = await relay.drain({ deadline: FAR() });
    expect(report).toMatchObject({ enabled: false, claimed: 0, forwarded: 0 });
    expect((await db.store.inbox.get(id))?.state).toBe(MessageState.Pending);
  });

  it('stops at the deadline without claiming', async () => {
    const n = names();
    const id = await storeNew(aMessage(n.push));
    const relay = createRelay({ store: db.store.inbox, sources: { [n.push]: { type: 'http' } } });
    const report = await relay.drain({ deadline: Date.now() - 1 });
    expect(report).toMatchObject({ claimed: 0, stoppedFor: 'time' });
    expect((await db.store.inbox.get(id))?.state).toBe(MessageState.Pending);
  });

  it('reclaims an expired relay claim first, then forwards the row', async () => {
    // Prepare: a relay claimed the row and died; its lease is over.
    const n = names();
    const id = await storeNew(aMessage(n.push));
    const claimed = await db.store.inbox.claim({ sources: [n.push], batchSize: 10, leaseMs: 60_000 });
    expect(claimed.map((r) => r.id)).toEqual([id]);
    await db.expireInboxLeases();
    // Act
    const report = await createRelay({
      store: db.store.inbox,
      sources: { [n.push]: { type: 'http' } },
    }).drain({
      deadline: FAR(),
    });
    // Assess
    expect(report.reclaimed).toEqual({ returned: 1, dead: 0 });
    expect(report.forwarded).toBe(1);
    expect(await db.store.inbox.get(id)).toMatchObject({ state: MessageState.Sent, attempt: 1 });
  });

  it('reclaims at most once per reclaimIntervalMs, always on the first drain', async () => {
    // Prepare: a relay with a manual clock; its first drain reclaims (nothing to find).
    const n = names();
    let now = 1_000_000;
    const relay = createRelay({
      store: db.store.inbox,
      sources: { [n.push]: { type: 'http' } },
      clock: { now: () => now },
      reclaimIntervalMs: 1000,
    });
    await relay.drain({ deadline: Number.POSITIVE_INFINITY });
    const id = await storeNew(aMessage(n.push));
    await db.store.inbox.claim({ sources: [n.push], batchSize: 10, leaseMs: 60_000 });
    await db.expireInboxLeases();
    // Act: a drain within the interval skips the reclaim, one after it runs it.
    const early = await relay.drain({ deadline: Number.POSITIVE_INFINITY });
    now += 1000;
    const later = await relay.drain({ deadline: Number.POSITIVE_INFINITY });
    // Assess
    expect(early).toMatchObject({ reclaimed: { returned: 0, dead: 0 }, forwarded: 0 });
    expect(later).toMatchObject({ reclaimed: { returned: 1, dead: 0 }, forwarded: 1 });
    expect(await db.store.inbox.get(id)).toMatchObject({ state: MessageState.Sent, attempt: 1 });
  });
});

describe('ingestion to relay', () => {
  it('replaces relay headers that a sender spoofed in mixed case', async () => {
    // Prepare
    const n = names();
    const sources: Sources = { [n.push]: { type: 'http', topic: 'hooks' } };
    const ingestion = createIngestion({ store: db.store.inbox, sources });
    const answer = await ingestion.handle({
      method: 'POST',
      path: `/inbox/${n.push}`,
      headers: {
        'Content-Type': 'application/json',
        'Idempotency-Key': 'k-1',
        'X-INBOX-ID': '999',
        'x-Source': 'other',
        'X-Idempotency-Key': 'forged',
        'X-Correlation-ID': 'corr-from-sender',
      },
      body: new TextEncoder().encode('{"kind":"a"}'),
    });
    expect(answer.status).toBe(202);
    // Act
    const report = await createRelay({ store: db.store.inbox, sources }).drain({ deadline: FAR() });
    // Assess
    const outbox = await db.store.outbox.get(report.outboxIds[0] ?? '');
    const lower = Object.fromEntries(
      Object.entries(outbox?.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]),
    );
    expect(lower['x-inbox-id']).toBe(answer.body.id);
    expect(lower['x-source']).toBe(n.push);
    expect(lower['x-idempotency-key']).toBe('k-1');
    // The correlation id the sender sent is the row's own (X-Correlation-Id is the default header), set once.
    expect(lower['x-correlation-id']).toBe('corr-from-sender');
    expect(Object.keys(outbox?.headers ?? {}).filter((k) => k.toLowerCase() === 'x-correlation-id')).toEqual([
      'X-Correlation-Id',
    ]);
    expect(Object.keys(outbox?.headers ?? {}).filter((k) => k.toLowerCase() === 'x-inbox-id')).toEqual([
      'x-inbox-id',
    ]);
  });
});
