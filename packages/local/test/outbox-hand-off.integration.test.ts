/**
 * The local runtime's outbox loop (`startRuntime`, in this process, on a real PostgreSQL) beside a slow destination:
 * a drain that stops for time returns while its slow request still runs, and the next drain delivers the rows of
 * another destination at once; at shutdown the slow request still finishes, is settled and counted on /metrics.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseConfig } from '@queuebox/config';
import { type RowId, silentLogger } from '@queuebox/core';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Runtime, startRuntime } from '../src/runtime.ts';

const needs = await requireServices('local outbox hand-off tests', ['postgres']);

/** A loopback HTTP receiver answering 204 after `delayMs`, recording when each request arrived. */
async function aReceiver(delayMs: number): Promise<{ url: string; arrivals: number[]; server: Server }> {
  const arrivals: number[] = [];
  const server = createServer((request, response) => {
    arrivals.push(Date.now());
    request.resume();
    request.on('end', () => {
      setTimeout(() => response.writeHead(204).end(), delayMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/hooks`, arrivals, server };
}

async function until(what: string, done: () => boolean | Promise<boolean>, withinMs = 10_000): Promise<void> {
  const giveUpAt = Date.now() + withinMs;
  while (!(await done())) {
    if (Date.now() > giveUpAt) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}

describe.skipIf(needs.skipReason)('local runtime outbox loop beside a slow destination', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'local_handoff', 2);
  let slow: Awaited<ReturnType<typeof aReceiver>>;
  let fast: Awaited<ReturnType<typeof aReceiver>>;
  let runtime: Runtime;

  const stateOf = async (id: RowId) => {
    const { rows } = await pool.query<{ state: string }>(
      `SELECT state FROM "${schema.name}".outbox WHERE id = $1`,
      [id],
    );
    return rows[0]?.state;
  };

  beforeAll(async () => {
    slow = await aReceiver(2800);
    fast = await aReceiver(0);
    const config = parseConfig({
      database: { provider: 'postgres', url: needs.url.postgres, schema: schema.name },
      http: { port: 0, host: '127.0.0.1' },
      destinations: {
        slow: { type: 'http', url: slow.url, timeoutMs: 3000 },
        fast: { type: 'http', url: fast.url, timeoutMs: 2000 },
      },
      routes: [
        { match: 'slow.#', destination: 'slow' },
        { match: 'fast.#', destination: 'fast' },
      ],
    });
    // A 5.5 s budget fits the 3 s timeout and twice the 1 s settle reserve: each drain claims for 1.5 s only, then
    // stops for time while the slow request (2.8 s) still runs.
    runtime = await startRuntime(config, {
      logger: silentLogger,
      brokerConsumers: false,
      drainBudgetMs: 5500,
    });
  });

  afterAll(async () => {
    await runtime?.stop('test end');
    slow?.server.close();
    fast?.server.close();
  });

  it('delivers rows of another destination at once while an earlier drain waits for a slow request', async () => {
    // Prepare
    const [slowRow] = (await runtime.store.outbox.insert([
      { topic: 'slow.job', key: null, payload: {}, headers: {}, maxAttempts: 3 },
    ])) as [RowId];
    runtime.wakeOutbox();
    await until('the slow request', () => slow.arrivals.length === 1);
    // Past the claiming time of the drain that started it.
    await sleep(1800);

    // Act
    const writtenAt = Date.now();
    const fastRows = await runtime.store.outbox.insert(
      [1, 2, 3].map((n) => ({ topic: 'fast.job', key: null, payload: { n }, headers: {}, maxAttempts: 3 })),
    );
    runtime.wakeOutbox();
    await until('the fast rows', () => fast.arrivals.length === 3);

    // Assess
    expect(Math.max(...fast.arrivals) - writtenAt).toBeLessThan(300);
    expect(slow.arrivals).toHaveLength(1);
    for (const id of fastRows) await until(`row ${id} sent`, async () => (await stateOf(id)) === 'sent');
    expect(await stateOf(slowRow)).toBe('processing');

    // Act: stop while the slow request is still out.
    expect(await runtime.stop('test end')).toBe(true);

    // Assess: it finished, was settled and counted before the runtime stopped.
    expect(await stateOf(slowRow)).toBe('sent');
    const sent = await runtime.metrics.registry.getSingleMetric('queuebox_outbox_sent_total')?.get();
    expect(sent?.values[0]?.value).toBe(4);
  });
});
