/**
 * Inbox benchmark: accepted webhooks per second through the local runtime's HTTP server (`startRuntime` on
 * PostgreSQL, the real request handler and ingestion), generic HMAC verification on every request, 20% of the
 * requests repeating an accepted delivery, with p50/p99 latency. Relay off, then relay on (the relay forwarding
 * every stored row into the outbox and the outbox delivering it to a local HTTP sink, all in the runtime's
 * process, as `npm start` runs them). See bench/README.md.
 *
 *   npx tsx bench/inbox-http.ts            # or: npm run bench:inbox-http
 *   npx tsx bench/inbox-http.ts --quick    # 3 s per scenario
 *
 * Environment: QUEUEBOX_BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test),
 * QUEUEBOX_BENCH_SECONDS (counted seconds per scenario, default 15; --quick 3), QUEUEBOX_BENCH_CONNECTIONS
 * (keep-alive connections of the load generator, default 16), QUEUEBOX_BENCH_LOG_LEVEL (the runtime's log level,
 * default info as in the default configuration; lines go to a temporary file), QUEUEBOX_BENCH_RELAY (`off,on`).
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream, writeFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance as perfHooks } from 'node:perf_hooks';
import { parseConfig } from '@queuebox/config';
import { createLogger, type LogLevel, startRuntime } from '@queuebox/local';
import pg from 'pg';
import { forkBenchChild } from './support/child.ts';
import { type HttpSink, startHttpSink } from './support/http-sink.ts';
import {
  busyLine,
  format,
  loadAverage,
  machineLine,
  postgresCpuSeconds,
  readCpuTicks,
  readPostgresCpu,
} from './support/machine.ts';
import type { LoadInput, LoadReport } from './support/webhook-load-process.ts';

const quick = process.argv.includes('--quick');
const POSTGRES_URL = process.env.QUEUEBOX_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SECONDS = Number(process.env.QUEUEBOX_BENCH_SECONDS ?? (quick ? 3 : 15));
const WARMUP_SECONDS = quick ? 1 : 3;
const CONNECTIONS = Number(process.env.QUEUEBOX_BENCH_CONNECTIONS ?? 16);
const LOG_LEVEL = (process.env.QUEUEBOX_BENCH_LOG_LEVEL ?? 'info') as LogLevel;
const RELAY = (process.env.QUEUEBOX_BENCH_RELAY ?? 'off,on').split(',');
const DUPLICATE_SHARE = 0.2;
const TARGET = 2000;
// Public test material, never a real secret.
const SECRET = 'queuebox-bench-hmac-secret';

const admin = new pg.Pool({ connectionString: POSTGRES_URL, max: 1 });
/** The runtime's connections carry this application_name, so their backends' CPU can be told from others'. */
const APPLICATION_NAME = `queuebox-bench-${process.pid}`;
const KEYED = process.env.QUEUEBOX_BENCH_KEYED !== '0';
/** Directory for a CPU profile of this process (the runtime) over each scenario's load, e.g. /tmp/prof. */
const PROFILE_DIR = process.env.QUEUEBOX_BENCH_CPU_PROFILE;
const COUNT_STATEMENTS = process.env.QUEUEBOX_BENCH_COUNT_STATEMENTS === '1';

/** Statements sent by this process (the runtime runs in it), by the first words of their text. */
const statements = new Map<string, number>();
if (COUNT_STATEMENTS) {
  const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const first = args[0];
    const text = typeof first === 'string' ? first : ((first as { text?: string } | undefined)?.text ?? '');
    const shape = text.replace(/\s+/g, ' ').trim().slice(0, 60);
    statements.set(shape, (statements.get(shape) ?? 0) + 1);
    return query.apply(this, args);
  } as typeof pg.Client.prototype.query;
}

/** CPU ticks of the backends serving the runtime (by application_name), by pid. */
async function ownBackendTicks(): Promise<Map<string, number>> {
  const { rows } = await admin.query<{ pid: number }>(
    'SELECT pid FROM pg_stat_activity WHERE application_name = $1',
    [APPLICATION_NAME],
  );
  const all = readPostgresCpu();
  return new Map(rows.map((r) => [String(r.pid), all.get(String(r.pid)) ?? 0]));
}
const schemas: string[] = [];

async function countByState(schema: string, table: 'inbox' | 'outbox'): Promise<Record<string, number>> {
  const { rows } = await admin.query<{ state: string; n: number }>(
    `SELECT state, count(*)::int AS n FROM "${schema}".${table} GROUP BY state ORDER BY state`,
  );
  return Object.fromEntries(rows.map((r) => [r.state, r.n]));
}

/**
 * Drains that did work and their mean size, from the runtime's info lines (`relay drain`, `outbox drain`): how
 * well the loops batch under a steady stream of wake-ups. Empty below level info.
 */
async function drainSizes(logFile: string): Promise<string> {
  const drains = { relay: { n: 0, rows: 0 }, outbox: { n: 0, rows: 0 } };
  for (const raw of (await readFile(logFile, 'utf8')).split('\n')) {
    if (!raw.includes(' drain"')) continue;
    const line = JSON.parse(raw) as { message?: string; forwarded?: number; claimed?: number };
    if (line.message === 'relay drain') {
      drains.relay.n++;
      drains.relay.rows += line.forwarded ?? 0;
    } else if (line.message === 'outbox drain') {
      drains.outbox.n++;
      drains.outbox.rows += line.claimed ?? 0;
    }
  }
  const mean = (d: { n: number; rows: number }) => (d.n === 0 ? '-' : (d.rows / d.n).toFixed(1));
  return (
    `relay ${format(drains.relay.n)} drains of ${mean(drains.relay)} rows on average, ` +
    `outbox ${format(drains.outbox.n)} drains of ${mean(drains.outbox)} rows`
  );
}

/** One scenario: a runtime on a fresh schema, the load generator against it, then the tables counted. */
function withApplicationName(url: string): string {
  const parsed = new URL(url);
  parsed.searchParams.set('application_name', APPLICATION_NAME);
  return parsed.toString();
}

async function scenario(relay: boolean, sink: HttpSink, logDir: string): Promise<string> {
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  schemas.push(schema);
  const config = parseConfig({
    database: { provider: 'postgres', url: withApplicationName(POSTGRES_URL), schema },
    http: { host: '127.0.0.1', port: 0 },
    logLevel: LOG_LEVEL,
    inbox: { relay: { enabled: relay } },
    sources: {
      bench: {
        type: 'http',
        mode: 'push',
        auth: {
          scheme: 'hmac',
          secrets: [SECRET],
          header: 'X-Signature',
          algorithm: 'sha256',
          encoding: 'hex',
          prefix: 'sha256=',
        },
        idempotencyKey: { header: 'X-Delivery-Id' },
        eventTypePath: '$.type',
        // QUEUEBOX_BENCH_KEYED=0 leaves the aggregate id (the outbox key) unset, as ../shared/peers inbox.mjs does.
        ...(KEYED ? { aggregateIdPath: '$.data.id' } : {}),
      },
    },
    destinations: { sink: { type: 'http', url: sink.url, timeoutMs: 10_000 } },
    routes: [{ match: '#', destination: 'sink' }],
  });
  const logFile = join(logDir, `runtime-${schema}.log`);
  const logStream = createWriteStream(logFile);
  const runtime = await startRuntime(config, {
    logger: createLogger({ level: LOG_LEVEL, write: (line) => logStream.write(`${line}\n`) }),
  });
  try {
    await sink.reset();
    const input: LoadInput = {
      url: `${runtime.url}/inbox/bench`,
      secret: SECRET,
      signatureHeader: 'x-signature',
      signaturePrefix: 'sha256=',
      idHeader: 'x-delivery-id',
      connections: CONNECTIONS,
      warmupSeconds: WARMUP_SECONDS,
      seconds: SECONDS,
      duplicateShare: DUPLICATE_SHARE,
      aggregates: 1000,
    };
    const load = forkBenchChild<LoadReport>('support/webhook-load-process.ts', input);
    const loadBefore = loadAverage();
    const postgresBefore = readPostgresCpu();
    const ownBefore = await ownBackendTicks();
    statements.clear();
    const ticksBefore = readCpuTicks();
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    const loopDelay = monitorEventLoopDelay({ resolution: 1 });
    loopDelay.enable();
    const loopBefore = perfHooks.eventLoopUtilization();
    const profiler = PROFILE_DIR ? new Session() : undefined;
    if (profiler) {
      profiler.connect();
      await profiler.post('Profiler.setSamplingInterval', { interval: 500 });
      await profiler.post('Profiler.enable');
      await profiler.post('Profiler.start');
    }
    let report: LoadReport;
    try {
      report = await load.next(
        (m): m is LoadReport => m.type === 'done',
        (WARMUP_SECONDS + SECONDS + 60) * 1000,
      );
    } finally {
      await load.stop(5000);
    }
    if (profiler && PROFILE_DIR) {
      const { profile } = await profiler.post('Profiler.stop');
      writeFileSync(
        join(PROFILE_DIR, `relay-${relay ? 'on' : 'off'}-${schema}.cpuprofile`),
        JSON.stringify(profile),
      );
      profiler.disconnect();
    }
    loopDelay.disable();
    const loop = perfHooks.eventLoopUtilization(loopBefore);
    // The whole run including the warm-up, as the CPU counters cannot tell the two apart.
    const cpu = process.cpuUsage(cpuBefore);
    const runtimeCpu = (cpu.user + cpu.system) / 1e6;
    const postgresCpu = postgresCpuSeconds(postgresBefore, readPostgresCpu());
    const ownAfter = await ownBackendTicks();
    const ownPostgresCpu = postgresCpuSeconds(ownBefore, ownAfter);
    const counted_statements = [...statements].sort((a, b) => b[1] - a[1]);
    const busy = busyLine(
      ticksBefore,
      readCpuTicks(),
      runtimeCpu + report.cpuSeconds,
      (performance.now() - started) / 1000,
    );
    const loadAfter = loadAverage();
    const inbox = await countByState(schema, 'inbox');
    const outbox = await countByState(schema, 'outbox');
    const sinkStats = relay ? await sink.stats() : undefined;

    const counted = Object.values(report.byStatus).reduce((s, n) => s + n, 0);
    const acceptedRate = (report.byStatus['202'] ?? 0) / report.windowSeconds;
    const requestRate = counted / report.windowSeconds;
    const stored = Object.values(inbox).reduce((s, n) => s + n, 0);
    const answered = report.acceptedTotal;
    const perThousand = (seconds: number) => ((seconds / report.requestsTotal) * 1e6).toFixed(0);
    const name = `relay ${relay ? 'on ' : 'off'}`;
    const pad = ' '.repeat(name.length);
    const lines = [
      `${name}  ${format(requestRate).padStart(6)} requests/s, of which ${format(acceptedRate)} accepted (202)/s; ` +
        `p50 ${report.p50.toFixed(1)} ms, p90 ${report.p90.toFixed(1)} ms, p99 ${report.p99.toFixed(1)} ms, ` +
        `max ${report.max.toFixed(0)} ms; load ${loadBefore} → ${loadAfter}, ${busy} over the whole run   ` +
        `${requestRate >= TARGET ? `meets the ${format(TARGET)}/s target` : `below the ${format(TARGET)}/s target`}`,
      `${pad}  answers ${JSON.stringify(report.byStatus)}; repeats sent ${format(report.duplicatesSent)}, answered ` +
        `200 duplicate ${format(report.duplicatesAnswered)}; inbox rows ${format(stored)} for ${format(answered)} ` +
        `202s ${stored === answered ? '(equal)' : '(DIFFERENT)'}`,
      `${pad}  inbox ${JSON.stringify(inbox)}, outbox ${JSON.stringify(outbox)}` +
        (sinkStats ? `, sink got ${format(sinkStats.requests)} deliveries by the end of the load` : ''),
      `${pad}  CPU per 1,000 requests: runtime ${perThousand(runtimeCpu)} ms (system calls ${perThousand(cpu.system / 1e6)}), load generator ` +
        `${perThousand(report.cpuSeconds)} ms, postgres ${perThousand(postgresCpu)} ms (all postgres processes on ` +
        `the machine); if CPU were the only limit, ${cpus().length} idle cores would give about ` +
        `${format(cpus().length / ((runtimeCpu + report.cpuSeconds + postgresCpu) / report.requestsTotal))} requests/s`,
      `${pad}  the runtime's event loop: busy ${(loop.utilization * 100).toFixed(0)}% of the run; delay p50 ` +
        `${(loopDelay.percentile(50) / 1e6).toFixed(1)} ms, p99 ${(loopDelay.percentile(99) / 1e6).toFixed(1)} ms, ` +
        `max ${(loopDelay.max / 1e6).toFixed(0)} ms (beyond the 1 ms sampling interval)`,
      `${pad}  CPU per 1,000 requests: the runtime's own PostgreSQL backends (application_name) ` +
        `${perThousand(ownPostgresCpu)} ms` +
        (sinkStats ? `, sink ${perThousand(sinkStats.cpuSeconds)} ms` : ''),
      ...counted_statements.map(
        ([shape, n]) =>
          `${pad}  statements per 1,000 requests ${((n / report.requestsTotal) * 1000).toFixed(1)}: ${shape}`,
      ),
    ];
    await runtime.stop('benchmark done');
    await new Promise((resolve) => logStream.end(resolve));
    if (relay && (LOG_LEVEL === 'info' || LOG_LEVEL === 'debug')) {
      lines.push(`${pad}  ${await drainSizes(logFile)} (whole run, from the runtime's log)`);
    }
    return lines.join('\n');
  } finally {
    await runtime.stop('benchmark done');
    if (!logStream.writableEnded) await new Promise((resolve) => logStream.end(resolve));
  }
}

async function main(): Promise<void> {
  const { rows: version } = await admin.query<{ v: string }>("SELECT current_setting('server_version') AS v");
  console.log(`PostgreSQL ${version[0]?.v} at ${new URL(POSTGRES_URL).host}; ${machineLine()}`);
  console.log(
    `${CONNECTIONS} keep-alive connections (load generator: its own process), ${WARMUP_SECONDS} s warm-up then ` +
      `${SECONDS} s counted per scenario, ${DUPLICATE_SHARE * 100}% repeats, generic HMAC sha256 on every ` +
      `request, runtime log level ${LOG_LEVEL} (to a file).\n`,
  );
  const logDir = await mkdtemp(join(tmpdir(), 'queuebox-bench-inbox-'));
  const sink = await startHttpSink();
  try {
    for (const relay of RELAY) {
      console.log(await scenario(relay === 'on', sink, logDir));
      console.log('');
    }
  } finally {
    await sink.close();
    await rm(logDir, { recursive: true, force: true });
  }
}

main()
  .catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  })
  .finally(async () => {
    for (const schema of schemas) {
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    }
    await admin.end();
  });
