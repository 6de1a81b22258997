import type { InboxRow, InboxStore, RelayClaimOptions } from '@queuebox/core';
import { ConfigError, StoreUnavailableError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import type { SourceOptions } from '../src/index.ts';
import { createRelay, toOutboxMessage, topicTemplateOf } from '../src/index.ts';

const anInboxRow = (overrides: Partial<InboxRow> = {}): InboxRow => ({
  id: '17',
  source: 'stripe',
  idempotencyKey: 'evt_1',
  eventType: 'invoice.paid',
  aggregateId: 'in_1',
  correlationId: null,
  payload: { id: 'evt_1', type: 'invoice.paid' },
  headers: { 'content-type': 'application/json' },
  state: 'Processing',
  attempt: 0,
  maxAttempts: 10,
  scheduledAt: new Date(0),
  claimToken: 'token-1',
  leaseUntil: new Date(60_000),
  receivedAt: new Date(0),
  processedAt: null,
  lastError: null,
  ...overrides,
});
const anHttpSource = (overrides: Partial<SourceOptions> = {}): SourceOptions => ({
  type: 'http',
  ...overrides,
});

function mapped(row: InboxRow, source: SourceOptions, options = {}) {
  const result = toOutboxMessage(row, source, options);
  if (!result.ok) throw new Error(`expected a message, got ${result.reason}`);
  return result.message;
}

describe('relay mapping: topic', () => {
  it('renders the source topic template with {{ source }} and {{ eventType }}, whitespace allowed', () => {
    const source = anHttpSource({ topic: 'in.{{source}}.{{   eventType }}' });
    expect(mapped(anInboxRow(), source).topic).toBe('in.stripe.invoice.paid');
  });

  it('defaults to {{ eventType }} for an HTTP source', () => {
    expect(topicTemplateOf(anHttpSource())).toBe('{{ eventType }}');
    expect(mapped(anInboxRow({ eventType: 'push' }), anHttpSource()).topic).toBe('push');
  });

  it.each(['amqp', 'kafka', 'nats'] as const)('defaults to {{ source }} for an %s source', (type) => {
    expect(mapped(anInboxRow({ source: 'orders-in', eventType: null }), { type }).topic).toBe('orders-in');
  });

  it('goes dead when the template renders empty', () => {
    const result = toOutboxMessage(anInboxRow({ eventType: null }), anHttpSource(), {});
    expect(result).toEqual({ ok: false, reason: 'the topic template rendered empty' });
    const blank = toOutboxMessage(
      anInboxRow({ eventType: '  ' }),
      anHttpSource({ topic: '{{ eventType }}' }),
      {},
    );
    expect(blank.ok).toBe(false);
  });

  it('goes dead when the topic is longer than the outbox topic column', () => {
    const result = toOutboxMessage(
      anInboxRow({ eventType: 'e'.repeat(395) }),
      anHttpSource({ topic: 'longer.{{ eventType }}' }),
      {},
    );
    expect(result).toEqual({ ok: false, reason: 'the rendered topic is longer than 400 characters' });
    expect(
      toOutboxMessage(
        anInboxRow({ eventType: 'e'.repeat(395) }),
        anHttpSource({ topic: 'x.{{ eventType }}' }),
        {},
      ).ok,
    ).toBe(true);
  });

  it('keeps a template that renders partly (only an empty topic goes dead)', () => {
    expect(
      mapped(anInboxRow({ eventType: null }), anHttpSource({ topic: 'stripe.{{ eventType }}' })).topic,
    ).toBe('stripe.');
  });
});

describe('relay mapping: key and payload', () => {
  it('uses the aggregate id as the key, null when the row has none', () => {
    expect(mapped(anInboxRow({ aggregateId: 'cus_9' }), anHttpSource()).key).toBe('cus_9');
    expect(mapped(anInboxRow({ aggregateId: null }), anHttpSource()).key).toBeNull();
  });

  it('forwards the stored payload unchanged (no transform at relay time)', () => {
    const payload = { nested: { list: [1, 'two', null] }, flag: false };
    const source = anHttpSource({ transform: { jsonata: '{"replaced": true}' } });
    expect(mapped(anInboxRow({ payload }), source).payload).toEqual(payload);
  });
});

describe('relay mapping: headers', () => {
  it('keeps the stored headers, then adds x-inbox-id, x-source, x-idempotency-key and X-Correlation-Id', () => {
    const row = anInboxRow({
      headers: { 'content-type': 'application/json', 'x-a': '1' },
      correlationId: 'corr-1',
    });
    expect(mapped(row, anHttpSource()).headers).toEqual({
      'content-type': 'application/json',
      'x-a': '1',
      'x-inbox-id': '17',
      'x-source': 'stripe',
      'x-idempotency-key': 'evt_1',
      'X-Correlation-Id': 'corr-1',
    });
  });

  it('adds no X-Correlation-Id when the row carries none', () => {
    const headers = mapped(anInboxRow({ correlationId: null }), anHttpSource()).headers ?? {};
    expect(Object.keys(headers).map((h) => h.toLowerCase())).not.toContain('x-correlation-id');
  });

  it('replaces spoofed relay headers in any letter case', () => {
    // Prepare: a sender set every relay header itself, in mixed case.
    const row = anInboxRow({
      headers: {
        'X-Inbox-Id': '999',
        'X-SOURCE': 'github',
        'x-Idempotency-KEY': 'forged',
        'x-correlation-id': 'forged-corr',
        'x-keep': 'yes',
      },
      correlationId: 'real-corr',
    });
    // Act
    const headers = mapped(row, anHttpSource()).headers ?? {};
    // Assess
    expect(headers).toEqual({
      'x-keep': 'yes',
      'x-inbox-id': '17',
      'x-source': 'stripe',
      'x-idempotency-key': 'evt_1',
      'X-Correlation-Id': 'real-corr',
    });
  });

  it("replaces relay headers spelt with letters whose Unicode case maps to theirs (a broker message's names)", () => {
    // Prepare: long s, dotless i, Kelvin sign: upper- or lower-cased, each is a relay header's name
    const row = anInboxRow({
      headers: {
        'x-\u017Fource': 'github',
        'x-\u0131nbox-id': '999',
        'x-idempotency-\u212Aey': 'forged',
        'X-CORRELAT\u0130ON-ID': 'forged: Java takes the dotted capital I for i',
        'x-s\u00F6urce': 'kept: another letter',
      },
      correlationId: null,
    });
    // Act
    const headers = mapped(row, anHttpSource()).headers ?? {};
    // Assess
    expect(headers).toEqual({
      'x-s\u00F6urce': 'kept: another letter',
      'x-inbox-id': '17',
      'x-source': 'stripe',
      'x-idempotency-key': 'evt_1',
    });
  });

  it('drops a spoofed X-Correlation-Id even when the row carries none', () => {
    const row = anInboxRow({ headers: { 'X-CORRELATION-ID': 'forged' }, correlationId: null });
    expect(mapped(row, anHttpSource()).headers).toEqual({
      'x-inbox-id': '17',
      'x-source': 'stripe',
      'x-idempotency-key': 'evt_1',
    });
  });
});

describe('relay mapping: max_attempts', () => {
  it('uses inbox.relay.maxAttempts first', () => {
    const options = { inbox: { relay: { maxAttempts: 3 } }, outbox: { maxAttempts: 7 } };
    expect(mapped(anInboxRow(), anHttpSource(), options).maxAttempts).toBe(3);
  });

  it('falls back to outbox.maxAttempts, then 10', () => {
    expect(
      mapped(anInboxRow(), anHttpSource(), { inbox: { relay: {} }, outbox: { maxAttempts: 7 } }).maxAttempts,
    ).toBe(7);
    expect(mapped(anInboxRow({ maxAttempts: 4 }), anHttpSource(), {}).maxAttempts).toBe(10);
  });
});

describe('createRelay configuration', () => {
  it('refuses an AMQP template with {{ eventType }} when the source cannot provide one', () => {
    const store = {} as never;
    expect(() =>
      createRelay({ store, sources: { q: { type: 'amqp', topic: 'x.{{ eventType }}' } } }),
    ).toThrow(ConfigError);
    expect(() =>
      createRelay({
        store,
        sources: { q: { type: 'amqp', topic: 'x.{{ eventType }}', eventTypeFromHeader: true } },
      }),
    ).not.toThrow();
    expect(() => createRelay({ store, sources: { h: { type: 'http', topic: '{{ nope }}' } } })).toThrow(
      ConfigError,
    );
  });

  it('relays push sources only', () => {
    const relay = createRelay({
      store: {} as never,
      sources: { a: { type: 'http' }, b: { type: 'http', mode: 'pull' }, c: { type: 'kafka', mode: 'push' } },
    });
    expect(relay.sources).toEqual(['a', 'c']);
  });
});

describe('relay drain: forward and claim in one step', () => {
  /** A store that answers the relay's calls from `batches` (one per claim) and records them. */
  function scriptedStore(batches: InboxRow[][]) {
    const calls: string[] = [];
    const claimOnce = () => (batches.shift() ?? []).map(({ payload: _payload, ...row }) => row);
    const report = (items: readonly { id: string }[]) => ({
      settled: items.map((i) => ({ id: i.id, state: 'Sent' as const })),
      stale: [],
      outboxIds: items.map((i) => `9${i.id}`),
    });
    const store = {
      claimForRelay: async () => {
        calls.push('claimForRelay');
        return claimOnce();
      },
      forwardAndClaim: async (items: readonly { id: string }[]) => {
        calls.push(`forwardAndClaim(${items.length})`);
        return { forwarded: report(items), claimed: claimOnce() };
      },
      forward: async (items: readonly { id: string }[]) => {
        calls.push(`forward(${items.length})`);
        return report(items);
      },
      reclaimExpired: async () => ({ returned: 0, dead: 0 }),
    } as unknown as InboxStore;
    return { store, calls };
  }
  const sources = { stripe: anHttpSource() };

  it('forwards each partial batch with the claim of the next while the chain window lasts', async () => {
    const { store, calls } = scriptedStore([[anInboxRow({ id: '1' })], [anInboxRow({ id: '2' })]]);
    const report = await createRelay({ store, sources, clock: { now: () => 0 } }).drain({ deadline: 1 });

    expect(calls).toEqual(['claimForRelay', 'forwardAndClaim(1)', 'forwardAndClaim(1)']);
    expect(report).toMatchObject({ batches: 2, claimed: 2, forwarded: 2, stoppedFor: 'empty' });
    expect(report.outboxIds).toEqual(['91', '92']);
  });

  it("reports the longest of its forwards' key-lock waits, not their sum", async () => {
    // Prepare: two forwards, held 300 ms and 200 ms by application transactions of their keys.
    const { store } = scriptedStore([[anInboxRow({ id: '1' })], [anInboxRow({ id: '2' })]]);
    const waits = [300, 200];
    const held = {
      ...store,
      forwardAndClaim: async (...args: Parameters<InboxStore['forwardAndClaim']>) => {
        const step = await store.forwardAndClaim(...args);
        return { ...step, forwarded: { ...step.forwarded, keyWaitMs: waits.shift() } };
      },
    } as InboxStore;

    // Act
    const report = await createRelay({ store: held, sources, clock: { now: () => 0 } }).drain({
      deadline: 1,
    });

    // Assess
    expect(report).toMatchObject({ forwarded: 2, keyWaitMs: 300 });
  });

  it('forwards a batch again alone while the database is unavailable, within the deadline, then claims on', async () => {
    // Prepare: the forward-and-claim and the first forward fail as a restarting database answers.
    const { store, calls } = scriptedStore([[anInboxRow({ id: '1' })], [anInboxRow({ id: '2' })]]);
    const down = new StoreUnavailableError('the database system is starting up (test)');
    const real = { forward: store.forward, forwardAndClaim: store.forwardAndClaim };
    let failures = 0;
    const blipping = {
      ...store,
      forwardAndClaim: async (...args: Parameters<InboxStore['forwardAndClaim']>) => {
        if (failures === 0) {
          failures++;
          calls.push('forwardAndClaim: unavailable');
          throw down;
        }
        return real.forwardAndClaim(...args);
      },
      forward: async (...args: Parameters<InboxStore['forward']>) => {
        if (failures === 1) {
          failures++;
          calls.push('forward: unavailable');
          throw down;
        }
        return real.forward(...args);
      },
    } as InboxStore;
    const sleeps: number[] = [];
    const relay = createRelay({
      store: blipping,
      sources,
      clock: { now: () => 0 },
      sleep: async (ms) => {
        sleeps.push(ms);
      },
    });
    // Act
    const report = await relay.drain({ deadline: 10_000 });
    // Assess: row 1 forwarded on the second try of the forward alone, after 0.1 s and 0.2 s; then row 2 as usual.
    expect(calls).toEqual([
      'claimForRelay',
      'forwardAndClaim: unavailable',
      'forward: unavailable',
      'forward(1)',
      'claimForRelay',
      'forwardAndClaim(1)',
    ]);
    expect(sleeps).toEqual([100, 200]);
    expect(report).toMatchObject({ claimed: 2, forwarded: 2 });
  });

  it('gives a forward up at the deadline, or at once for anything but an unavailable database', async () => {
    // Prepare
    const { store } = scriptedStore([[anInboxRow({ id: '1' })], [anInboxRow({ id: '2' })]]);
    const fails = (error: Error) =>
      ({
        ...store,
        forwardAndClaim: async () => {
          throw error;
        },
        forward: async () => {
          throw error;
        },
      }) as InboxStore;
    const sleep = async () => {};
    // Act / Assess
    await expect(
      createRelay({
        store: fails(new StoreUnavailableError('down')),
        sources,
        clock: { now: () => 0 },
        sleep,
      }).drain({ deadline: 50 }),
    ).rejects.toThrow('down');
    await expect(
      createRelay({ store: fails(new Error('syntax error')), sources, clock: { now: () => 0 }, sleep }).drain(
        {
          deadline: 10_000,
        },
      ),
    ).rejects.toThrow('syntax error');
  });

  it('forwards a partial batch alone and ends once chainMs have passed (0: at once)', async () => {
    const { store, calls } = scriptedStore([[anInboxRow({ id: '1' })], [anInboxRow({ id: '2' })]]);
    const report = await createRelay({ store, sources, chainMs: 0, clock: { now: () => 0 } }).drain({
      deadline: 1,
    });

    expect(calls).toEqual(['claimForRelay', 'forward(1)']);
    expect(report).toMatchObject({ batches: 1, forwarded: 1, stoppedFor: 'empty' });
  });

  it('forwards the batch in hand without claiming when the deadline passed', async () => {
    const { store, calls } = scriptedStore([[anInboxRow({ id: '1' })], [anInboxRow({ id: '2' })]]);
    let now = 0;
    const relay = createRelay({
      store: {
        ...store,
        claimForRelay: async (options) => {
          now = 5;
          return store.claimForRelay(options);
        },
      },
      sources,
      clock: { now: () => now },
    });

    const report = await relay.drain({ deadline: 5 });

    expect(calls).toEqual(['claimForRelay', 'forward(1)']);
    expect(report).toMatchObject({ forwarded: 1, stoppedFor: 'time' });
  });

  it('lets the next batch fill for fillMs after a claim of at least fillMinRows rows, but not after a trickle', async () => {
    // Prepare: a claim of 12 rows (under load), then one of a single row (a trickle).
    const twelve = Array.from({ length: 12 }, (_, i) => anInboxRow({ id: String(i + 1) }));
    const { store, calls } = scriptedStore([twelve, [anInboxRow({ id: '13' })]]);
    const sleep = async (ms: number) => {
      calls.push(`sleep(${ms})`);
    };
    const relay = createRelay({
      store,
      sources,
      fillMs: 20,
      fillMinRows: 10,
      sleep,
      clock: { now: () => 0 },
    });
    // Act
    const report = await relay.drain({ deadline: 1000 });
    // Assess: one pause, before the 12 rows went with the next claim; the single row went at once.
    expect(calls).toEqual(['claimForRelay', 'sleep(20)', 'forwardAndClaim(12)', 'forwardAndClaim(1)']);
    expect(report).toMatchObject({ batches: 2, forwarded: 13, stoppedFor: 'empty' });
  });

  /**
   * A store whose claims answer `answers` in turn: rows, how many rows each left blocked and the rows holding them
   * back. A call that skips aggregate ids is recorded with them (`skip …`).
   */
  function blockingStore(answers: { rows: InboxRow[]; blocked?: number; blockedBy?: string[] }[]) {
    const calls: string[] = [];
    const next = () => {
      const answer = answers.shift() ?? { rows: [] };
      const rows = answer.rows.map(({ payload: _payload, ...row }) => row);
      return Object.assign(
        rows,
        answer.blocked === undefined ? {} : { blocked: answer.blocked },
        answer.blockedBy === undefined ? {} : { blockedBy: answer.blockedBy },
      );
    };
    const skipped = (claim: RelayClaimOptions) =>
      claim.skipAggregatesOf === undefined ? '' : ` skip ${claim.skipAggregatesOf.join(',')}`;
    const report = (items: readonly { id: string }[]) => ({
      settled: items.map((i) => ({ id: i.id, state: 'Sent' as const })),
      stale: [],
      outboxIds: items.map((i) => `9${i.id}`),
    });
    const store = {
      claimForRelay: async (claim: RelayClaimOptions) => {
        calls.push(`claimForRelay${skipped(claim)}`);
        return next();
      },
      forwardAndClaim: async (items: readonly { id: string }[], claim: RelayClaimOptions) => {
        calls.push(`forwardAndClaim(${items.length})${skipped(claim)}`);
        return { forwarded: report(items), claimed: next() };
      },
      forward: async (items: readonly { id: string }[]) => {
        calls.push(`forward(${items.length})`);
        return report(items);
      },
      reclaimExpired: async () => ({ returned: 0, dead: 0 }),
    } as unknown as InboxStore;
    return { store, calls };
  }

  it('claims again after growing pauses while its claims take nothing but leave rows blocked, then ends as idle', async () => {
    const { store, calls } = blockingStore([
      { rows: [], blocked: 2 },
      { rows: [], blocked: 2 },
      { rows: [], blocked: 2 },
      { rows: [anInboxRow({ id: '7' }), anInboxRow({ id: '8' })] },
      { rows: [] },
    ]);
    let now = 0;
    const sleep = async (ms: number) => {
      calls.push(`sleep(${ms})`);
      now += ms;
    };
    const relay = createRelay({ store, sources, sleep, clock: { now: () => now } });

    const report = await relay.drain({ deadline: 10_000 });

    expect(calls).toEqual([
      'claimForRelay',
      'sleep(20)',
      'claimForRelay',
      'sleep(40)',
      'claimForRelay',
      'sleep(80)',
      'claimForRelay',
      'forwardAndClaim(2)',
    ]);
    expect(report).toMatchObject({ forwarded: 2, stoppedFor: 'empty' });
  });

  it('pauses at most blockedPauseMaxMs and stops at its deadline while rows stay blocked (a crashed holder)', async () => {
    const { store, calls } = blockingStore(Array.from({ length: 20 }, () => ({ rows: [], blocked: 1 })));
    let now = 0;
    const sleep = async (ms: number) => {
      calls.push(`sleep(${ms})`);
      now += ms;
    };
    const relay = createRelay({ store, sources, sleep, blockedPauseMaxMs: 100, clock: { now: () => now } });

    const report = await relay.drain({ deadline: 450 });

    expect(calls.filter((c) => c.startsWith('sleep'))).toEqual([
      'sleep(20)',
      'sleep(40)',
      'sleep(80)',
      'sleep(100)',
      'sleep(100)',
      'sleep(100)',
      'sleep(10)',
    ]);
    expect(report).toMatchObject({ forwarded: 0, stoppedFor: 'time' });
  });

  it('goes on after a partial batch past the chain window when its claim left rows blocked; ends at once with blockedPauseMs 0', async () => {
    const answers = () => [
      { rows: [anInboxRow({ id: '1' })], blocked: 1 },
      { rows: [anInboxRow({ id: '2' })] },
      { rows: [] },
    ];
    const waiting = blockingStore(answers());
    const off = blockingStore(answers());
    const clock = { now: () => 0 };

    await createRelay({ store: waiting.store, sources, chainMs: 0, clock }).drain({ deadline: 1 });
    await createRelay({ store: off.store, sources, chainMs: 0, blockedPauseMs: 0, clock }).drain({
      deadline: 1,
    });

    expect(waiting.calls).toEqual(['claimForRelay', 'forward(1)', 'claimForRelay', 'forward(1)']);
    expect(off.calls).toEqual(['claimForRelay', 'forward(1)']);
  });

  it('skips the ids its last claim named held (blockedBy), paces the claims that skip, and reads an id again once it is free', async () => {
    // Prepare: a crashed relay holds row 1 (id x); x's later rows fill the first window. Batches of 2.
    const rows = (...ids: string[]) => ids.map((id) => anInboxRow({ id }));
    const { store, calls } = blockingStore([
      { rows: [], blocked: 2, blockedBy: ['1'] },
      // Skipping x: one row of another id (less than a batch), x still held.
      { rows: rows('7'), blockedBy: ['1'] },
      // A full batch goes on at once.
      { rows: rows('8', '9'), blockedBy: ['1'] },
      { rows: [], blockedBy: ['1'] },
      // x1's lease was reclaimed: the claim that skips x no longer names it; x's rows are unread.
      { rows: [] },
      { rows: rows('2', '3') },
      { rows: [] },
    ]);
    let now = 0;
    const sleep = async (ms: number) => {
      calls.push(`sleep(${ms})`);
      now += ms;
    };
    const relay = createRelay({
      store,
      sources,
      inbox: { relay: { batchSize: 2 } },
      sleep,
      clock: { now: () => now },
    });
    // Act
    const report = await relay.drain({ deadline: 10_000 });
    // Assess
    // The first claim found a held id: the next, skipping it, comes at once (finding held ids costs claims, not
    // pauses); after that, a claim that skips and takes less than a batch pauses.
    expect(calls).toEqual([
      'claimForRelay',
      'claimForRelay skip 1',
      'forward(1)',
      'sleep(20)',
      'claimForRelay skip 1',
      'forwardAndClaim(2) skip 1',
      'sleep(20)',
      'claimForRelay skip 1',
      'claimForRelay',
      'forwardAndClaim(2)',
    ]);
    expect(report).toMatchObject({ claimed: 5, forwarded: 5, stoppedFor: 'empty' });
  });

  it('skips held ids with blockedPauseMs 0 too, and still ends at a claim that takes nothing', async () => {
    const { store, calls } = blockingStore([
      { rows: [anInboxRow({ id: '7' }), anInboxRow({ id: '8' })], blocked: 1, blockedBy: ['1'] },
      { rows: [], blockedBy: ['1'] },
      { rows: [anInboxRow({ id: '9' })] },
    ]);

    const report = await createRelay({
      store,
      sources,
      inbox: { relay: { batchSize: 2 } },
      blockedPauseMs: 0,
      clock: { now: () => 0 },
    }).drain({ deadline: 1000 });

    expect(calls).toEqual(['claimForRelay', 'forwardAndClaim(2) skip 1']);
    expect(report).toMatchObject({ forwarded: 2, stoppedFor: 'empty' });
  });

  it('never pauses with fillMs 0', async () => {
    const twelve = Array.from({ length: 12 }, (_, i) => anInboxRow({ id: String(i + 1) }));
    const { store, calls } = scriptedStore([twelve]);
    const sleep = async (ms: number) => {
      calls.push(`sleep(${ms})`);
    };

    await createRelay({ store, sources, fillMs: 0, sleep, clock: { now: () => 0 } }).drain({
      deadline: 1000,
    });

    expect(calls).toEqual(['claimForRelay', 'forwardAndClaim(12)']);
  });
});
