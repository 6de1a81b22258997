/**
 * One outbox drain of 1,000 rows through the RDS Data API executor, against the local Data API endpoint of
 * test/data-api (the real SDK client over HTTP on loopback, PostgreSQL behind it), delivering to the HTTP sink;
 * then the same drain through `pg` for comparison. Prints rows/s and the Data API calls per batch.
 *
 *   npx tsx bench/data-api.ts      # QUEUEBOX_BENCH_POSTGRES_URL, QUEUEBOX_BENCH_ROWS (default 1000)
 *
 * The endpoint runs in this process (the sink in its own), so the drain and the endpoint share the CPU; on AWS the
 * round trip to the service (a few ms inside a region) replaces that.
 */
import { parseConfig } from '@queuebox/config';
import type { OutboxStore, Store } from '@queuebox/core';
import { defaultPublisherFactories } from '@queuebox/outbox';
import { openDataApiStore, openPostgresStore } from '@queuebox/store-postgres';
import { createServices } from '@queuebox/use-cases';
import pg from 'pg';
import { startLocalDataApi } from '../test/data-api/local-data-api.ts';
import { startHttpSink } from './support/http-sink.ts';
import { format, loadAverage, machineLine } from './support/machine.ts';

const postgresUrl = process.env.QUEUEBOX_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const rows = Number(process.env.QUEUEBOX_BENCH_ROWS ?? 1000);
const batchSize = 100;

console.log(`[bench data-api] ${machineLine()}; ${format(rows)} rows, batch ${batchSize}, 100 keys`);
const endpoint = await startLocalDataApi({ postgresUrl, poolSize: 4 });
const sink = await startHttpSink();
const admin = new pg.Pool({ connectionString: postgresUrl, max: 1 });

async function drain(label: string, open: (schema: string) => Promise<Store>): Promise<void> {
  const schema = `bench_dataapi_${Math.random().toString(36).slice(2, 8)}`;
  const store = await open(schema);
  try {
    await store.migrate();
    for (let i = 0; i < rows; i += 500) {
      await store.outbox.insert(
        Array.from({ length: Math.min(500, rows - i) }, (_, j) => ({
          topic: 'orders.created',
          key: `k${(i + j) % 100}`,
          payload: { n: i + j, note: 'sixty bytes of payload, roughly, like bench/store.ts' },
          headers: { 'x-bench': '1' },
          maxAttempts: 5,
        })),
      );
    }
    const claims = { n: 0, empty: 0, settles: 0 };
    const outbox: OutboxStore = {
      ...store.outbox,
      claim: async (options) => {
        claims.n++;
        const claimed = await store.outbox.claim(options);
        if (claimed.length === 0) claims.empty++;
        return claimed;
      },
      markSent: async (items) => {
        claims.settles++;
        return store.outbox.markSent(items);
      },
    };
    const config = parseConfig({
      database: { provider: 'postgres', url: postgresUrl, schema },
      outbox: { batchSize },
      destinations: { sink: { type: 'http', url: sink.url, timeoutMs: 10_000, maxConcurrency: 50 } },
      routes: [{ match: '#', destination: 'sink' }],
    });
    const services = createServices(
      config,
      { inbox: store.inbox, outbox },
      { publisherFactories: defaultPublisherFactories },
    );
    await sink.reset();
    endpoint.resetCalls();
    const loadBefore = loadAverage();
    const started = performance.now();
    let sent = 0;
    let batches = 0;
    for (;;) {
      const report = await services.poller.drain({ deadline: Date.now() + 60_000 });
      sent += report.sent;
      batches += report.batches;
      if (report.stoppedFor === 'empty') break;
    }
    const seconds = (performance.now() - started) / 1000;
    const stats = await sink.stats();
    const calls = endpoint.calls;
    const dataApi =
      calls.Execute > 0
        ? `; Data API calls: ${calls.Execute} ExecuteStatement, ${calls.BeginTransaction} BeginTransaction (${(calls.Execute / Math.max(1, batches)).toFixed(2)} statements per batch over ${batches} batches: ${claims.n} claims of which ${claims.empty} empty, ${claims.settles} markSent)`
        : '';
    console.log(
      `[bench data-api] ${label}: ${format(sent)} rows sent in ${seconds.toFixed(2)} s = ${format(sent / seconds)} rows/s; sink saw ${format(stats.requests)} requests${dataApi}; load ${loadBefore} → ${loadAverage()}`,
    );
    await services.close?.();
  } finally {
    await store.close();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  }
}

try {
  await drain('Data API (local endpoint)', (schema) =>
    openDataApiStore({
      resourceArn: endpoint.resourceArn,
      secretArn: endpoint.secretArn,
      endpoint: endpoint.url,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      schema,
    }),
  );
  await drain('pg pool (comparison)', (schema) =>
    openPostgresStore({ url: postgresUrl, schema, poolSize: 4 }),
  );
} finally {
  await sink.close();
  await endpoint.close();
  await admin.end();
}
