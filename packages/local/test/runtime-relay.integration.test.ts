/**
 * The local runtime's relay loop (`startRuntime` in this process, on a real PostgreSQL):
 *
 * - A graceful stop while the relay waits behind a crashed relay. A row of aggregate id `x` is held in processing by
 *   a relay that died (its lease runs for minutes), and a later row of `x` is pending: the runtime's relay claims,
 *   finds it blocked, and claims again every second until its drain's deadline. The stop used to wait for that
 *   deadline (the whole drain budget, 45 s by default); now the shutdown's signal ends the relay's wait at once and
 *   no new claim starts.
 * - The outbox is woken for rows a relay drain forwarded although the forward's answer was lost (the relay's try
 *   again finds them forwarded): the wake-up used to follow the outbox ids of the report, which such a forward has
 *   none of, so the rows waited for the outbox's poll interval.
 */

import { setTimeout as sleep } from 'node:timers/promises';
import { parseConfig } from '@queuebox/config';
import { type InboxStore, type NewInboxMessage, StoreUnavailableError, silentLogger } from '@queuebox/core';
import { openStore } from '@queuebox/store';
import { createPgExecutor, createPostgresStore } from '@queuebox/store-postgres';
import { requireServices, testPool, usePostgresSchema } from '@queuebox/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { type Runtime, type RuntimeOptions, startRuntime } from '../src/runtime.ts';

const needs = await requireServices('local runtime relay test', ['postgres']);

/** The drain budget in these tests: a stop that waited for the relay drain's deadline would take this long. */
const DRAIN_BUDGET_MS = 20_000;

describe.skipIf(needs.skipReason)('local runtime relay loop', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'local_relay', 1);
  let runtime: Runtime | undefined;

  afterEach(async () => {
    await runtime?.stop('test end');
    runtime = undefined;
    await pool
      .query(`DELETE FROM "${schema.name}".inbox; DELETE FROM "${schema.name}".outbox`)
      .catch(() => {});
  });

  /**
   * A runtime with the push source `hooks` (topic `hooks`, which no route matches: a claimed outbox row goes dead at
   * once, nothing is sent), no wake-ups from the database and outbox polls `outboxPollMs` apart.
   */
  const start = (options: RuntimeOptions = {}, outboxPollMs = 100) =>
    startRuntime(
      parseConfig({
        database: { provider: 'postgres', url: needs.url.postgres, schema: schema.name },
        http: { port: 0, host: '127.0.0.1' },
        outbox: { pollIntervalMs: outboxPollMs },
        sources: {
          hooks: {
            type: 'http',
            path: 'hooks',
            auth: { scheme: 'none' },
            topic: 'hooks',
            idempotencyKey: { path: '$.id' },
          },
        },
        destinations: { sink: { type: 'http', url: 'http://127.0.0.1:9/sink' } },
        routes: [{ match: 'nothing.routes.here', destination: 'sink' }],
      }),
      {
        logger: silentLogger,
        brokerConsumers: false,
        statsIntervalMs: 0,
        retentionIntervalMs: 0,
        wakeUps: false,
        drainBudgetMs: DRAIN_BUDGET_MS,
        shutdownTimeoutMs: DRAIN_BUDGET_MS + 5_000,
        ...options,
      },
    );

  const message = (key: string, aggregateId: string | null = null): NewInboxMessage => ({
    source: 'hooks',
    idempotencyKey: key,
    eventType: 'e',
    aggregateId,
    payload: { key },
    maxAttempts: 3,
  });

  const states = async (table: 'inbox' | 'outbox') =>
    (
      await pool.query<{ id: string; state: string }>(
        `SELECT id::text AS id, state FROM "${schema.name}".${table} ORDER BY id`,
      )
    ).rows;

  it('ends the blocked relay drain at the stop, long before its deadline, and strands no row', async () => {
    // Prepare: a "crashed relay" that claimed x1 (lease 10 minutes) and will never forward it; then x2 arrives.
    const crashed = createPostgresStore({ executor: createPgExecutor(testPool(1)), schema: schema.name });
    let x1: string;
    let x2: string;
    try {
      await crashed.migrate();
      x1 = (await crashed.inbox.store(message('x1', 'x'))).id;
      const held = await crashed.inbox.claimForRelay({ sources: ['hooks'], batchSize: 1, leaseMs: 600_000 });
      expect(held.map((row) => row.id)).toEqual([x1]);
      x2 = (await crashed.inbox.store(message('x2', 'x'))).id;
    } finally {
      await crashed.close();
    }
    runtime = await start();
    // The relay's first drain started with the runtime: it finds x2 blocked behind x1 and claims again and again.
    await sleep(1_000);

    // Act
    const started = Date.now();
    const clean = await runtime.stop('test');
    const tookMs = Date.now() - started;

    // Assess: a clean stop, long before the drain's deadline (20 s; the relay's pauses are at most 1 s); x2 never
    // claimed, x1 still the crashed relay's, left to its lease.
    expect(clean).toBe(true);
    expect(tookMs).toBeLessThan(DRAIN_BUDGET_MS / 2);
    expect(await states('inbox')).toEqual([
      { id: x1, state: 'processing' },
      { id: x2, state: 'pending' },
    ]);
  });

  it('wakes the outbox for rows whose forward answered with a failure after it committed', async () => {
    // Prepare: the store's first forward-and-claim commits, then fails as reading its claim's answer can. The
    // outbox polls once a minute, so only a wake-up brings its drain soon.
    let failures = 0;
    const lossy = (inbox: InboxStore): InboxStore => ({
      ...inbox,
      async forwardAndClaim(items, claim) {
        const step = await inbox.forwardAndClaim(items, claim);
        if (failures++ === 0) throw new StoreUnavailableError('Connection terminated unexpectedly (test)');
        return step;
      },
    });
    runtime = await start(
      {
        openStore: async (database) => {
          const store = await openStore(database);
          return { ...store, inbox: lossy(store.inbox) };
        },
      },
      60_000,
    );
    // The outbox loop's first drain (at the start) found nothing; its next poll is a minute away.
    await sleep(500);

    // Act: a row arrives and the relay is woken, as a stored webhook does.
    await runtime.store.inbox.store(message('w1'));
    runtime.wakeRelay();

    // Assess: forwarded once, and the outbox claimed the row within seconds (no route: dead at once).
    const until = Date.now() + 10_000;
    let outbox = await states('outbox');
    while (outbox[0]?.state !== 'dead' && Date.now() < until) {
      await sleep(50);
      outbox = await states('outbox');
    }
    expect(failures).toBeGreaterThanOrEqual(1);
    expect(outbox.map((row) => row.state)).toEqual(['dead']);
    expect((await states('inbox')).map((row) => row.state)).toEqual(['processed']);
  });
});
