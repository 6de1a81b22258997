/**
 * What a running local runtime costs the application's enqueuing commits, with the outbox's wake-up listener
 * stepping aside under load (the default, migration 0012) and without (`wakeUpStepAside: false`: it holds the lock
 * whatever the load, as before 0012), on PostgreSQL.
 *
 *   ./node_modules/.bin/node bench/enqueue-beside-runtime.ts
 *
 * The runtime runs in a child process (`startRuntime`, delivering to an HTTP sink in this process); this process is
 * the application: QUEUEBOX_BENCH_CONNECTIONS (default 10) connections, each transaction an insert into a business
 * table and one `enqueue`. The two modes take turns (QUEUEBOX_BENCH_ROUNDS rounds, default 2, of
 * QUEUEBOX_BENCH_SECONDS each, default 8), each on a fresh schema. Prints per turn: transactions/s and the p50 / p99
 * of a transaction (BEGIN … COMMIT), rows delivered and the p50 / p99 from just before COMMIT to the sink, and
 * whether the listener stepped aside (its log line). QUEUEBOX_BENCH_POSTGRES_URL (default
 * postgres://postgres@127.0.0.1:5432/test). QUEUEBOX_BENCH_COMMIT_DELAY_US (default 0) makes the application's
 * commits slow, as on a server whose disk is remote (Aurora): its sessions set `commit_delay` to it and
 * `commit_siblings` to 0 (a superuser's settings), so each commit waits that long before its WAL flush.
 * QUEUEBOX_BENCH_RATE (default 0: as fast as they can) paces the application's transactions to that many a second
 * in all, spread over the connections (to see that a steady moderate rate keeps the listener listening).
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { enqueue } from '../packages/client/src/index.ts';
import { parseConfig } from '../packages/config/src/index.ts';
import { startRuntime } from '../packages/local/src/runtime.ts';
import { openPostgresStore } from '../packages/store-postgres/src/index.ts';

const url = process.env.QUEUEBOX_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

if (process.argv[2] === '--runtime') {
  // The child: a runtime on the schema, delivering to the sink, until SIGTERM.
  const [, , , schema, sink, mode] = process.argv as [string, string, string, string, string, string];
  const runtime = await startRuntime(
    parseConfig({
      database: { provider: 'postgres', url, schema },
      http: { port: 0, host: '127.0.0.1' },
      destinations: { sink: { type: 'http', url: sink } },
      routes: [{ match: '#', destination: 'sink' }],
      logLevel: 'info',
    }),
    { brokerConsumers: false, migrate: false, ...(mode === 'listening' ? { wakeUpStepAside: false } : {}) },
  );
  process.once('SIGTERM', () => {
    void runtime.stop('bench turn over').then(() => process.exit(0));
  });
} else {
  const connections = Math.max(1, Math.floor(Number(process.env.QUEUEBOX_BENCH_CONNECTIONS ?? 10)));
  const seconds = Math.max(1, Number(process.env.QUEUEBOX_BENCH_SECONDS ?? 8));
  const rounds = Math.max(1, Math.floor(Number(process.env.QUEUEBOX_BENCH_ROUNDS ?? 2)));
  const commitDelayUs = Math.max(0, Math.floor(Number(process.env.QUEUEBOX_BENCH_COMMIT_DELAY_US ?? 0)));
  const rate = Math.max(0, Number(process.env.QUEUEBOX_BENCH_RATE ?? 0));
  // Each connection's transactions start this far apart (0: at once after the last).
  const spacingMs = rate > 0 ? (connections * 1000) / rate : 0;
  const appUrl = new URL(url);
  if (commitDelayUs > 0) {
    appUrl.searchParams.set('options', `-c commit_delay=${commitDelayUs} -c commit_siblings=0`);
  }
  const arrivals: number[] = [];
  const sink = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => {
      body += chunk;
    });
    request.on('end', () => {
      arrivals.push(Date.now() - (JSON.parse(body) as { at: number }).at);
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
  const sinkUrl = `http://127.0.0.1:${(sink.address() as AddressInfo).port}/hooks`;
  const admin = new pg.Client(url);
  await admin.connect();
  const quantile = (values: number[], q: number) => {
    const sorted = [...values].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  };
  const modes = ['listening', 'steps-aside'] as const;
  const results: Record<string, unknown>[] = [];
  try {
    for (let round = 1; round <= rounds; round++) {
      for (const mode of round % 2 === 0 ? [...modes].reverse() : modes) {
        const schema = `bench_beside_${process.pid}_${round}_${mode.replace('-', '_')}`;
        const store = await openPostgresStore({ url, schema });
        await store.migrate();
        await store.close();
        await admin.query(`CREATE TABLE "${schema}".orders (id bigserial PRIMARY KEY, body text NOT NULL)`);
        arrivals.length = 0;
        const child = spawn(
          process.execPath,
          [fileURLToPath(import.meta.url), '--runtime', schema, sinkUrl, mode],
          { stdio: ['ignore', 'pipe', 'inherit'] },
        );
        let log = '';
        child.stdout.setEncoding('utf8');
        child.stdout.on('data', (chunk: string) => {
          log += chunk;
        });
        while (!log.includes('listening for inserts')) await new Promise((r) => setTimeout(r, 50));
        const pool = new pg.Pool({ connectionString: appUrl.toString(), max: connections });
        const latencies: number[] = [];
        const end = performance.now() + seconds * 1000;
        await Promise.all(
          Array.from({ length: connections }, async (_, worker) => {
            const client = await pool.connect();
            try {
              const first = performance.now() + (spacingMs * worker) / connections;
              for (let n = 0; performance.now() < end; n++) {
                const due = first + n * spacingMs;
                if (spacingMs > 0 && due > performance.now()) {
                  await new Promise((r) => setTimeout(r, due - performance.now()));
                }
                const started = performance.now();
                await client.query('BEGIN');
                await client.query(`INSERT INTO "${schema}".orders (body) VALUES ($1)`, [
                  `order ${worker}-${n}`,
                ]);
                await enqueue(
                  client,
                  { topic: 'orders.created', payload: { worker, n, at: Date.now() } },
                  { schema },
                );
                await client.query('COMMIT');
                latencies.push(performance.now() - started);
              }
            } finally {
              client.release();
            }
          }),
        );
        await pool.end();
        // Every row delivered, or 10 s.
        for (let waited = 0; arrivals.length < latencies.length && waited < 10_000; waited += 50) {
          await new Promise((r) => setTimeout(r, 50));
        }
        child.kill('SIGTERM');
        await new Promise((resolve) => child.once('exit', resolve));
        await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        results.push({
          round,
          mode,
          connections,
          commitDelayUs,
          rate,
          txPerSecond: Math.round(latencies.length / seconds),
          txP50ms: Number(quantile(latencies, 0.5).toFixed(2)),
          txP99ms: Number(quantile(latencies, 0.99).toFixed(2)),
          delivered: arrivals.length,
          deliveryP50ms: quantile(arrivals, 0.5),
          deliveryP99ms: quantile(arrivals, 0.99),
          steppedAside: (log.match(/steps aside under load/g) ?? []).length,
        });
        console.log(JSON.stringify(results.at(-1)));
      }
    }
    for (const mode of modes) {
      const rates = results.filter((r) => r.mode === mode).map((r) => r.txPerSecond as number);
      console.log(
        JSON.stringify({
          mode,
          meanTxPerSecond: Math.round(rates.reduce((a, b) => a + b, 0) / rates.length),
        }),
      );
    }
  } finally {
    await admin.end();
    sink.close();
  }
}
