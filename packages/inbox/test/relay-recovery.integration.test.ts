/**
 * The relay's drain on a real PostgreSQL when it must stop early or a store call fails half way: its stop signal
 * (the local runtime's shutdown), a forward-and-claim whose forward committed although the call failed, and the
 * dead-lettering of rows whose topic renders empty while the database is unavailable. The store is the real one;
 * only its answers are cut (a call that fails before or after it ran), as a restart or failover does.
 */
import { randomUUID } from 'node:crypto';
import type { InboxStore, NewInboxMessage, RowId } from '@queuebox/core';
import { MessageState, StoreError, StoreUnavailableError } from '@queuebox/core';
import { translateError } from '@queuebox/store-postgres/errors';
import { useTestStore } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { createRelay, EMPTY_TOPIC, type Sources } from '../src/index.ts';

const db = useTestStore('inbox_relay_recovery', { storePoolSize: 6 });

/**
 * A push source of its own per test, so the rows of one test never meet the claims of another. Its topic is the
 * event type: a row without one goes dead.
 */
function aSource(): { name: string; sources: Sources } {
  const name = `push_${randomUUID().slice(0, 8)}`;
  return { name, sources: { [name]: { type: 'http', topic: '{{ eventType }}' } } };
}

const aMessage = (source: string, overrides: Partial<NewInboxMessage> = {}): NewInboxMessage => ({
  source,
  idempotencyKey: randomUUID(),
  eventType: 'order.created',
  aggregateId: null,
  payload: { n: 1 },
  maxAttempts: 5,
  ...overrides,
});

async function storeNew(message: NewInboxMessage): Promise<RowId> {
  const result = await db.store.inbox.store(message);
  if (result.status !== 'stored') throw new Error('expected a new row');
  return result.id;
}

/** The inbox states of `ids`, in order. */
async function states(ids: readonly RowId[]): Promise<(string | undefined)[]> {
  return Promise.all(ids.map(async (id) => (await db.store.inbox.get(id))?.state));
}

/** How many outbox rows were forwarded from the inbox rows `ids`. */
async function outboxRowsOf(ids: readonly RowId[]): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${db.schema}".outbox WHERE headers->>'x-inbox-id' = ANY($1::text[])`,
    [ids],
  );
  return rows[0]?.n ?? 0;
}

const down = () => new StoreUnavailableError('the database system is shutting down (test)');

describe('relay drain: stop signal', () => {
  it('ends a wait behind a crashed relay at once when its signal aborts, claiming nothing more', async () => {
    // Prepare: a crashed relay holds x1 (lease 10 minutes); x2 of the same aggregate id waits behind it.
    const { name, sources } = aSource();
    const x1 = await storeNew(aMessage(name, { aggregateId: 'x' }));
    const [held] = await db.store.inbox.claimForRelay({ sources: [name], batchSize: 1, leaseMs: 600_000 });
    const x2 = await storeNew(aMessage(name, { aggregateId: 'x' }));
    let claims = 0;
    const counting: InboxStore = {
      ...db.store.inbox,
      claimForRelay: (claim) => {
        claims++;
        return db.store.inbox.claimForRelay(claim);
      },
    };
    const stop = new AbortController();
    const relay = createRelay({ store: counting, sources });
    // Act: the drain claims, finds x2 blocked and claims again after growing pauses; the signal aborts 300 ms in.
    const started = Date.now();
    const drained = relay.drain({ deadline: started + 20_000, signal: stop.signal });
    await new Promise((resolve) => setTimeout(resolve, 300));
    stop.abort();
    const report = await drained;
    const tookMs = Date.now() - started;
    const claimsAtStop = claims;
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Assess: it stopped long before its 20 s deadline (its pauses grow to 1 s), and no claim came after.
    expect(held?.id).toBe(x1);
    expect(report).toMatchObject({ claimed: 0, forwarded: 0, stoppedFor: 'aborted' });
    expect(tookMs).toBeLessThan(10_000);
    expect(claimsAtStop).toBeGreaterThan(1);
    expect(claims).toBe(claimsAtStop);
    expect(await states([x1, x2])).toEqual([MessageState.Processing, MessageState.Pending]);
  });

  it('forwards the rows a claim in flight at the stop took, alone, and claims no more', async () => {
    // Prepare: five rows, batches of two; the signal aborts while the forward-and-claim of the first batch runs.
    const { name, sources } = aSource();
    const ids: RowId[] = [];
    for (let i = 0; i < 5; i++) ids.push(await storeNew(aMessage(name)));
    const stop = new AbortController();
    const calls: string[] = [];
    const stopping: InboxStore = {
      ...db.store.inbox,
      claimForRelay: async (claim) => {
        calls.push('claimForRelay');
        return db.store.inbox.claimForRelay(claim);
      },
      forwardAndClaim: async (items, claim) => {
        calls.push(`forwardAndClaim(${items.length})`);
        const step = await db.store.inbox.forwardAndClaim(items, claim);
        stop.abort();
        return step;
      },
      forward: async (items) => {
        calls.push(`forward(${items.length})`);
        return db.store.inbox.forward(items);
      },
    };
    const relay = createRelay({
      store: stopping,
      sources,
      inbox: { relay: { batchSize: 2 } },
      fillMs: 0,
      chainMs: 60_000,
    });
    // Act
    const report = await relay.drain({ deadline: Date.now() + 20_000, signal: stop.signal });
    // Assess: the batch in flight committed, the batch it claimed was forwarded alone; the fifth row waits.
    expect(calls).toEqual(['claimForRelay', 'forwardAndClaim(2)', 'forward(2)']);
    expect(report).toMatchObject({ claimed: 4, forwarded: 4, stale: 0, stoppedFor: 'aborted' });
    expect(report.outboxIds).toHaveLength(4);
    expect(await states(ids)).toEqual([
      MessageState.Sent,
      MessageState.Sent,
      MessageState.Sent,
      MessageState.Sent,
      MessageState.Pending,
    ]);
    expect(await outboxRowsOf(ids)).toBe(4);
  });

  it('starts nothing when its signal aborted before the drain', async () => {
    const { name, sources } = aSource();
    const id = await storeNew(aMessage(name));
    const stop = new AbortController();
    stop.abort();

    const report = await createRelay({ store: db.store.inbox, sources }).drain({
      deadline: Date.now() + 20_000,
      signal: stop.signal,
    });

    expect(report).toMatchObject({ claimed: 0, batches: 0, stoppedFor: 'aborted' });
    expect(await states([id])).toEqual([MessageState.Pending]);
  });
});

describe('relay drain: a forward whose answer was lost', () => {
  it('counts rows a failed forward-and-claim forwarded after all as forwarded, not stale', async () => {
    // Prepare: the forward-and-claim commits, then fails as reading its claim's answer can (or as SQL Server's
    // claim, a statement of its own after the forward committed).
    const { name, sources } = aSource();
    const ids = [await storeNew(aMessage(name)), await storeNew(aMessage(name))];
    let failures = 0;
    const lossy: InboxStore = {
      ...db.store.inbox,
      forwardAndClaim: async (items, claim) => {
        const step = await db.store.inbox.forwardAndClaim(items, claim);
        if (failures++ === 0) throw down();
        return step;
      },
    };
    // Act
    const report = await createRelay({ store: lossy, sources, sleep: async () => {} }).drain({
      deadline: Date.now() + 20_000,
    });
    // Assess: both rows reached the outbox once, and the report says so (its caller wakes the outbox on it).
    expect(failures).toBe(1);
    expect(await outboxRowsOf(ids)).toBe(2);
    expect(await states(ids)).toEqual([MessageState.Sent, MessageState.Sent]);
    expect(report).toMatchObject({ claimed: 2, forwarded: 2, stale: 0 });
  });

  it('counts rows forwarded by a forward-and-claim whose claim then failed for another reason (a deadlock victim)', async () => {
    // Prepare: as SQL Server's forward-and-claim does, the forward commits and then the claim, a statement of its
    // own, fails with an error that is not an outage.
    const { name, sources } = aSource();
    const ids = [await storeNew(aMessage(name)), await storeNew(aMessage(name))];
    let failures = 0;
    const deadlocked: InboxStore = {
      ...db.store.inbox,
      forwardAndClaim: async (items, claim) => {
        if (failures++ > 0) return db.store.inbox.forwardAndClaim(items, claim);
        await db.store.inbox.forward(items);
        throw new StoreError('The statement was chosen as a deadlock victim too many times (test)');
      },
    };
    // Act
    const report = await createRelay({ store: deadlocked, sources, sleep: async () => {} }).drain({
      deadline: Date.now() + 20_000,
    });
    // Assess: the drain went on; both rows reached the outbox once, counted (its caller wakes the outbox on it).
    expect(failures).toBe(1);
    expect(await outboxRowsOf(ids)).toBe(2);
    expect(report).toMatchObject({ claimed: 2, forwarded: 2, stale: 0 });
  });

  it('tries a forward the database ended as a deadlock victim again, and again, instead of leaving its rows to their lease', async () => {
    // Prepare: beside a migration's lock (an outside audit's rolling upgrade), the forward-and-claim and then the
    // forward alone were both chosen as deadlock victims (40P01, as the store translates it); before, the drain
    // failed there and the rows, and every later row of their aggregate ids, waited out the 5-minute lease.
    const { name, sources } = aSource();
    const ids = [
      await storeNew(aMessage(name, { aggregateId: 'agg-dl' })),
      await storeNew(aMessage(name, { aggregateId: 'agg-dl' })),
    ];
    const deadlock = () =>
      translateError(Object.assign(new Error('deadlock detected (test)'), { code: '40P01' }));
    let forwards = 0;
    const deadlocked: InboxStore = {
      ...db.store.inbox,
      forwardAndClaim: async () => {
        throw deadlock();
      },
      forward: async (items) => {
        if (forwards++ < 2) throw deadlock();
        return db.store.inbox.forward(items);
      },
    };
    // Act
    const report = await createRelay({ store: deadlocked, sources, sleep: async () => {} }).drain({
      deadline: Date.now() + 20_000,
    });
    // Assess
    expect(forwards).toBe(3);
    expect(report).toMatchObject({ claimed: 2, forwarded: 2, stale: 0 });
    expect(await states(ids)).toEqual([MessageState.Sent, MessageState.Sent]);
    expect(await outboxRowsOf(ids)).toBe(2);
  });

  it('still counts stale the rows whose lease another relay took over and forwarded meanwhile', async () => {
    // Prepare: the forward-and-claim fails before it ran; meanwhile the rows' lease expires, the reclaim step of
    // another relay returns them and that relay forwards them.
    const { name, sources } = aSource();
    const ids = [await storeNew(aMessage(name)), await storeNew(aMessage(name))];
    const other = createRelay({ store: db.store.inbox, sources });
    let failures = 0;
    const lost: InboxStore = {
      ...db.store.inbox,
      forwardAndClaim: async (items, claim) => {
        if (failures++ === 0) {
          await db.pool.query(
            `UPDATE "${db.schema}".inbox SET lease_until = now() - interval '1 second' WHERE id = ANY($1::bigint[])`,
            [ids],
          );
          const theirs = await other.drain({ deadline: Date.now() + 20_000 });
          expect(theirs).toMatchObject({ reclaimed: { returned: 2 }, forwarded: 2 });
          throw down();
        }
        return db.store.inbox.forwardAndClaim(items, claim);
      },
    };
    // Act
    const report = await createRelay({ store: lost, sources, sleep: async () => {} }).drain({
      deadline: Date.now() + 20_000,
    });
    // Assess: forwarded once, by the other relay; this one lost its claims.
    expect(await outboxRowsOf(ids)).toBe(2);
    expect(report).toMatchObject({ claimed: 2, forwarded: 0, stale: 2 });
  });
});

describe('relay drain: dead-lettering while the database is unavailable', () => {
  it('marks a row whose topic renders empty dead again while the database is unavailable, then goes on', async () => {
    // Prepare: one row whose topic renders empty and one to forward; the first markDead fails before it ran.
    const { name, sources } = aSource();
    const empty = await storeNew(aMessage(name, { eventType: null }));
    const fine = await storeNew(aMessage(name));
    const sleeps: number[] = [];
    let failures = 0;
    const blip: InboxStore = {
      ...db.store.inbox,
      markDead: async (items) => {
        if (failures++ === 0) throw down();
        return db.store.inbox.markDead(items);
      },
    };
    // Act
    const report = await createRelay({
      store: blip,
      sources,
      sleep: async (ms) => {
        sleeps.push(ms);
      },
    }).drain({ deadline: Date.now() + 20_000 });
    // Assess
    expect(sleeps).toEqual([100]);
    expect(report).toMatchObject({ claimed: 2, dead: 1, forwarded: 1, stale: 0 });
    expect(await db.store.inbox.get(empty)).toMatchObject({
      state: MessageState.Dead,
      lastError: EMPTY_TOPIC,
    });
    expect(await states([fine])).toEqual([MessageState.Sent]);
  });

  it('counts a markDead that committed although its answer was lost as dead, not stale', async () => {
    const { name, sources } = aSource();
    const empty = await storeNew(aMessage(name, { eventType: null }));
    let failures = 0;
    const lossy: InboxStore = {
      ...db.store.inbox,
      markDead: async (items) => {
        const report = await db.store.inbox.markDead(items);
        if (failures++ === 0) throw down();
        return report;
      },
    };

    const report = await createRelay({ store: lossy, sources, sleep: async () => {} }).drain({
      deadline: Date.now() + 20_000,
    });

    expect(report).toMatchObject({ claimed: 1, dead: 1, stale: 0 });
    expect(await states([empty])).toEqual([MessageState.Dead]);
  });

  it('forwards the rows in hand before it fails for a markDead that cannot be written', async () => {
    // Prepare: markDead fails for good (not an outage); the other row of the batch was mapped for the forward.
    const { name, sources } = aSource();
    const empty = await storeNew(aMessage(name, { eventType: null }));
    const fine = await storeNew(aMessage(name));
    const broken: InboxStore = {
      ...db.store.inbox,
      markDead: async () => {
        throw new Error('permission denied for table inbox (test)');
      },
    };
    // Act / Assess: the drain fails with markDead's error, the row to forward is forwarded, not left to its lease.
    await expect(
      createRelay({ store: broken, sources, sleep: async () => {} }).drain({ deadline: Date.now() + 20_000 }),
    ).rejects.toThrow('permission denied');
    expect(await states([empty, fine])).toEqual([MessageState.Processing, MessageState.Sent]);
    expect(await outboxRowsOf([fine])).toBe(1);
  });
});
