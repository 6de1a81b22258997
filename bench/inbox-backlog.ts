/**
 * Work per relayed row when batches are full: N pending inbox rows are inserted with one SQL statement, then the
 * local runtime (relay and outbox on, HTTP delivery to the benchmark sink) drains them. Prints the CPU per 1,000
 * rows of the runtime, of its own PostgreSQL backends (application_name) and of the sink, and the statements per
 * 1,000 rows, to compare with the same figures under a steady stream (`bench/inbox-http.ts`, where batches are
 * as large as the rows that arrived since the last drain).
 *
 *   npx tsx bench/inbox-backlog.ts     # QUEUEBOX_BENCH_ROWS (default 10000)
 */
import { randomBytes } from 'node:crypto';
import { parseConfig } from '@queuebox/config';
import { createLogger, startRuntime } from '@queuebox/local';
import pg from 'pg';
import { startHttpSink } from './support/http-sink.ts';
import { loadAverage, postgresCpuSeconds, readPostgresCpu } from './support/machine.ts';

const POSTGRES_URL = process.env.QUEUEBOX_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const ROWS = Number(process.env.QUEUEBOX_BENCH_ROWS ?? 10_000);
const APPLICATION_NAME = `queuebox-backlog-${process.pid}`;
const admin = new pg.Pool({ connectionString: POSTGRES_URL, max: 1 });

const statements = new Map<string, number>();
const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  const first = args[0];
  const text = typeof first === 'string' ? first : ((first as { text?: string } | undefined)?.text ?? '');
  const shape = text.replace(/\s+/g, ' ').trim().slice(0, 60);
  statements.set(shape, (statements.get(shape) ?? 0) + 1);
  return query.apply(this, args);
} as typeof pg.Client.prototype.query;

async function ownBackendTicks(): Promise<Map<string, number>> {
  const { rows } = await admin.query<{ pid: number }>(
    'SELECT pid FROM pg_stat_activity WHERE application_name = $1',
    [APPLICATION_NAME],
  );
  const all = readPostgresCpu();
  return new Map(rows.map((r) => [String(r.pid), all.get(String(r.pid)) ?? 0]));
}

async function main(): Promise<void> {
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  const url = new URL(POSTGRES_URL);
  url.searchParams.set('application_name', APPLICATION_NAME);
  const sink = await startHttpSink();
  const config = (relay: boolean) =>
    parseConfig({
      database: { provider: 'postgres', url: url.toString(), schema },
      http: { host: '127.0.0.1', port: 0 },
      logLevel: 'warn',
      inbox: { relay: { enabled: relay } },
      sources: { bench: { type: 'http', mode: 'push', auth: { scheme: 'none' }, eventTypePath: '$.type' } },
      destinations: { sink: { type: 'http', url: sink.url, timeoutMs: 10_000 } },
      routes: [{ match: '#', destination: 'sink' }],
    });
  const quiet = createLogger({ level: 'warn', write: () => undefined });
  try {
    // Migrate, then fill the inbox.
    await (await startRuntime(config(false), { logger: quiet })).stop('migrated');
    await admin.query(
      `INSERT INTO "${schema}".inbox (source, idempotency_key, event_type, payload, max_attempts)
       SELECT 'bench', 'evt_' || g, 'order.created',
              jsonb_build_object('id', 'evt_' || g, 'type', 'order.created', 'created', 1764547200 + g,
                'data', jsonb_build_object('object', jsonb_build_object('id', 'ord_' || g % 5000,
                'amount', 1000 + g % 9000, 'currency', 'eur'))), 10
       FROM generate_series(1, $1) g`,
      [ROWS],
    );
    await admin.query(`VACUUM ANALYZE "${schema}".inbox`);
    await sink.reset();
    statements.clear();
    const load = loadAverage();
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    const runtime = await startRuntime(config(true), { logger: quiet });
    const ownBefore = await ownBackendTicks();
    for (;;) {
      const { rows } = await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${schema}".outbox WHERE state = 'sent'`,
      );
      if ((rows[0]?.n ?? 0) >= ROWS) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const seconds = (performance.now() - started) / 1000;
    const own = postgresCpuSeconds(ownBefore, await ownBackendTicks());
    const cpu = process.cpuUsage(cpuBefore);
    const sinkStats = await sink.stats();
    await runtime.stop('done');
    const per = (s: number) => ((s / ROWS) * 1e6).toFixed(0);
    console.log(
      `${ROWS} rows relayed and delivered in ${seconds.toFixed(1)} s (${Math.round(ROWS / seconds)} rows/s), ` +
        `load ${load} → ${loadAverage()}; CPU per 1,000 rows: runtime ${per((cpu.user + cpu.system) / 1e6)} ms, ` +
        `own PostgreSQL backends ${per(own)} ms, sink ${per(sinkStats.cpuSeconds)} ms`,
    );
    for (const [shape, n] of [...statements].sort((a, b) => b[1] - a[1]).slice(0, 8)) {
      console.log(`  statements per 1,000 rows ${((n / ROWS) * 1000).toFixed(1)}: ${shape}`);
    }
  } finally {
    await sink.close();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}

await main();
