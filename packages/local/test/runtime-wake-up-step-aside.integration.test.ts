/**
 * The outbox's wake-up listener steps aside under load and comes back (`createStepAside`, migration 0012), in the
 * local runtime (`startRuntime`, in this process) on a real PostgreSQL. The poll interval is 60 s, so every row
 * delivered within the test's waits was delivered because something woke the drain: a notification while the
 * listener holds the lock, the fast wake-ups while it is aside, the take-back's wake-up after it.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseConfig } from '@queuebox/config';
import { silentLogger } from '@queuebox/core';
import { OUTBOX_CHANNEL, wakeUpLockName } from '@queuebox/store-postgres/wake-up-channels';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Runtime, startRuntime } from '../src/runtime.ts';

const needs = await requireServices('local wake-up step-aside tests', ['postgres']);

async function until(what: string, done: () => boolean | Promise<boolean>, withinMs = 10_000): Promise<void> {
  const giveUpAt = Date.now() + withinMs;
  while (!(await done())) {
    if (Date.now() > giveUpAt) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/**
 * An HTTP sink that records each delivery's `mark` (or its order, without one), and a runtime on `schema` whose outbox
 * routes `load.#` to it, with a 60 s poll interval and the given step-aside settings.
 */
async function aRuntimeAndSink(
  schema: string,
  wakeUpStepAside: NonNullable<Parameters<typeof startRuntime>[1]>['wakeUpStepAside'],
): Promise<{ runtime: Runtime; server: Server; delivered: string[] }> {
  const delivered: string[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => {
      body += chunk;
    });
    request.on('end', () => {
      delivered.push((JSON.parse(body) as { mark?: string }).mark ?? String(delivered.length));
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const config = parseConfig({
    database: { provider: 'postgres', url: needs.url.postgres, schema },
    http: { port: 0, host: '127.0.0.1' },
    destinations: { sink: { type: 'http', url: `http://127.0.0.1:${port}/hooks` } },
    routes: [{ match: 'load.#', destination: 'sink' }],
    outbox: { pollIntervalMs: 60_000 },
  });
  const runtime = await startRuntime(config, {
    logger: silentLogger,
    brokerConsumers: false,
    statsIntervalMs: 0,
    retentionIntervalMs: 0,
    ...(wakeUpStepAside === undefined ? {} : { wakeUpStepAside }),
  });
  return { runtime, server, delivered };
}

describe.skipIf(needs.skipReason)('local runtime: the outbox wake-up listener steps aside under load', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'local_aside', 6);
  let server: Server;
  let delivered: string[] = [];
  let runtime: Runtime;
  const heard: string[] = [];
  let listener: pg.Client;

  const aside = async () =>
    (await runtime.metrics.registry.getSingleMetric('queuebox_wakeup_outbox_aside')?.get())?.values[0]?.value;

  /** Whether a session holds the outbox channel's wake-up lock (a shared try fails then). */
  async function lockHeld(): Promise<boolean> {
    const client = await pool.connect();
    try {
      const name = wakeUpLockName(schema.name, OUTBOX_CHANNEL);
      const { rows } = await client.query<{ free: boolean }>(
        'SELECT pg_try_advisory_lock_shared(hashtextextended($1, 0)) AS free',
        [name],
      );
      if (rows[0]?.free)
        await client.query('SELECT pg_advisory_unlock_shared(hashtextextended($1, 0))', [name]);
      return rows[0]?.free === false;
    } finally {
      client.release();
    }
  }

  /** One row per transaction, as an application that enqueues beside each business write. */
  const insertOne = (mark: string) =>
    pool.query(
      `INSERT INTO "${schema.name}".outbox (topic, payload, max_attempts) VALUES ('load.job', $1, 3)`,
      [JSON.stringify({ mark })],
    );

  beforeAll(async () => {
    // The defaults scaled down: aside at 40 notifications/s, back under 20 rows/s after 600 ms aside.
    ({ runtime, server, delivered } = await aRuntimeAndSink(schema.name, {
      enterPerSecond: 40,
      exitPerSecond: 20,
      checkMs: 200,
      minAsideMs: 600,
      pollMs: 5,
    }));
    await until('the wake-up listener', async () => runtime.capture.listening && (await lockHeld()));
    listener = new pg.Client(needs.url.postgres);
    listener.on('notification', (message) => {
      if (message.payload === schema.name) heard.push(message.channel);
    });
    await listener.connect();
    await listener.query(`LISTEN ${OUTBOX_CHANNEL}`);
  });

  afterAll(async () => {
    await listener?.end();
    await runtime?.stop('test end');
    server?.close();
  });

  it('lets go of the lock while enqueuing transactions arrive fast, delivers every row by polling, and comes back when they slow down', async () => {
    // Prepare: a quiet start delivers by notification.
    await insertOne('quiet-1');
    await until('the quiet row', () => delivered.includes('quiet-1'), 3000);
    expect(heard.length).toBe(1);
    expect(await aside()).toBe(0);

    // Act: 4 connections enqueue one row per transaction, about 100 a second in all, until the listener steps aside.
    let n = 0;
    let loading = true;
    const load = Promise.all(
      [0, 1, 2, 3].map(async () => {
        while (loading) {
          await insertOne(`load-${n++}`);
          await sleep(40);
        }
      }),
    );
    await until('the listener aside', async () => (await aside()) === 1, 5000);
    // The transactions that found the lock held when they inserted have committed (and notified) by then.
    await sleep(100);
    expect(await lockHeld()).toBe(false);
    // Rows written while aside notify nobody, and are still delivered within the 60 s poll interval.
    const heardWhenAside = heard.length;
    const deliveredWhenAside = delivered.length;
    // Past minAsideMs and several checks: a drain that runs on under load (the fast wake-ups keep it claiming) must
    // still count as busy (an outside audit saw the listener come back every 5-8 s at full load).
    await sleep(1200);
    // Still aside, and the drain kept up meanwhile: the fast wake-ups deliver, not a take-back after the load.
    expect(await aside()).toBe(1);
    expect(delivered.length - deliveredWhenAside).toBeGreaterThan(50);
    loading = false;
    await load;
    await until('every row of the load', () => delivered.length === n + 1, 3000);
    expect(heard.length).toBe(heardWhenAside);

    // Assess: quiet again, it takes the lock back, and the next insert notifies and is delivered at once.
    await until('the listener back', async () => (await aside()) === 0, 5000);
    await until('the lock taken back', lockHeld, 3000);
    await insertOne('quiet-2');
    await until('the row after the load', () => delivered.includes('quiet-2'), 3000);
    expect(heard.length).toBe(heardWhenAside + 1);
    expect(new Set(delivered).size).toBe(delivered.length);
  });
});

describe.skipIf(needs.skipReason)(
  'local runtime: the outbox listener steps aside when enqueuing commits wait in line',
  () => {
    const { pool, schema } = usePostgresSchema(needs.url.postgres, 'local_aside_wait', 10);
    let runtime: Runtime;
    let server: Server;
    let deliveries: string[] = [];

    beforeAll(async () => {
      // No rate this machine reaches steps aside: only commits seen waiting in line can.
      ({
        runtime,
        server,
        delivered: deliveries,
      } = await aRuntimeAndSink(schema.name, {
        enterPerSecond: 1e9,
        minPerSecond: 20,
        busyShare: 0.2,
        checkMs: 250,
        minAsideMs: 500,
        sampleMs: 25,
      }));
      await until('the wake-up listener', () => runtime.capture.listening, 10_000);
    });

    afterAll(async () => {
      await runtime?.stop('test end');
      server?.close();
    });

    it('counts the commits waiting for the notification lock, and steps aside on them', async () => {
      const aside = async () =>
        (await runtime.metrics.registry.getSingleMetric('queuebox_wakeup_outbox_aside')?.get())?.values[0]
          ?.value;
      let loading = true;
      let written = 0;
      let mostWaiting = 0;
      // Ten connections enqueue one row per transaction without pause: their notifying commits queue for the lock.
      const load = Promise.all(
        Array.from({ length: 10 }, async () => {
          while (loading) {
            await pool.query(
              `INSERT INTO "${schema.name}".outbox (topic, payload, max_attempts) VALUES ('load.job', '{}', 3)`,
            );
            written += 1;
          }
        }),
      );
      try {
        await until(
          'the listener aside',
          async () => {
            if ((await aside()) === 1) return true;
            mostWaiting = Math.max(mostWaiting, (await runtime.capture.waitingCommits?.()) ?? 0);
            return false;
          },
          20_000,
        );
        // Under full load a drain runs on for as long as rows keep coming: the rows it settles still count, so the
        // listener stays aside past minAsideMs and several checks.
        await sleep(1500);
        expect(await aside()).toBe(1);
      } finally {
        loading = false;
        await load;
      }
      expect(mostWaiting).toBeGreaterThan(0);
      await until('every row delivered', () => deliveries.length === written, 10_000);
    });
  },
);
