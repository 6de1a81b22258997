/**
 * Outbox delivery benchmark: rows per second from pending to sent through the real assembly (`createServices`:
 * poller, router, HTTP publisher) to a local HTTP sink, with memory sampled while draining, against the same rows
 * claimed and settled without HTTP. See bench/README.md.
 *
 *   npx tsx bench/outbox-http.ts            # or: npm run bench:outbox-http
 *   npx tsx bench/outbox-http.ts --quick    # 20,000 rows per run, about 90 s
 *
 * Environment: QUEUEBOX_BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test),
 * QUEUEBOX_BENCH_ROWS (rows per run, default 100000; --quick 20000), QUEUEBOX_BENCH_SECONDS (cap on one run: no
 * claim after it, default 120), QUEUEBOX_BENCH_DRAINS (drainer processes per run, default `1,2`),
 * QUEUEBOX_BENCH_KINDS (`keyed` = 1,000 keys, `unkeyed`; default both),
 * QUEUEBOX_BENCH_MAX_CONCURRENCY (the destination's maxConcurrency, default 16 as the publisher's default),
 * QUEUEBOX_BENCH_CPU_PROF (a directory: the drainers run with --cpu-prof into it).
 */
import { randomBytes } from 'node:crypto';
import { cpus } from 'node:os';
import pg from 'pg';
import { type BenchChild, forkBenchChild } from './support/child.ts';
import { type HttpSink, startHttpSink } from './support/http-sink.ts';
import {
  busyLine,
  format,
  loadAverage,
  machineLine,
  median,
  megabytes,
  postgresCpuSeconds,
  readCpuTicks,
  readPostgresCpu,
} from './support/machine.ts';
import type { DrainInput, DrainMessage, MemorySample } from './support/outbox-drain-process.ts';

const quick = process.argv.includes('--quick');
const POSTGRES_URL = process.env.QUEUEBOX_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const ROWS = Number(process.env.QUEUEBOX_BENCH_ROWS ?? (quick ? 20_000 : 100_000));
const CAP_SECONDS = Number(process.env.QUEUEBOX_BENCH_SECONDS ?? 120);
const DRAINS = (process.env.QUEUEBOX_BENCH_DRAINS ?? '1,2').split(',').map(Number);
const KINDS = (process.env.QUEUEBOX_BENCH_KINDS ?? 'keyed,unkeyed').split(',') as Kind[];
const MAX_CONCURRENCY = Number(process.env.QUEUEBOX_BENCH_MAX_CONCURRENCY ?? 16);
const CPU_PROF = process.env.QUEUEBOX_BENCH_CPU_PROF;
const BATCH = 100;
const KEYS = 1000;
const TARGET = 3000;

type Kind = 'keyed' | 'unkeyed';
type Done = Extract<DrainMessage, { type: 'done' }>;

const schema = `bench_${randomBytes(4).toString('hex')}`;
const admin = new pg.Pool({ connectionString: POSTGRES_URL, max: 1 });
const t = `"${schema}".outbox`;

/** Empties the table and fills it with ROWS due rows (payload ≈ 60 bytes of JSON, one header), then vacuums. */
async function fill(kind: Kind): Promise<void> {
  await admin.query(`TRUNCATE ${t}`);
  const key = kind === 'keyed' ? `'key-' || lpad((g % ${KEYS})::text, 4, '0')` : 'NULL';
  await admin.query(
    `INSERT INTO ${t} (topic, key, payload, headers, max_attempts, scheduled_at)
     SELECT 'orders.created', ${key}, jsonb_build_object('order', g, 'note', 'benchmark payload of modest size'),
            '{"content-type":"application/json"}', 10, now() - interval '1 minute'
     FROM generate_series(1, $1::int) g`,
    [ROWS],
  );
  await admin.query(`VACUUM ANALYZE ${t}`);
}

async function countByState(): Promise<Record<string, number>> {
  const { rows } = await admin.query<{ state: string; n: number }>(
    `SELECT state, count(*)::int AS n FROM ${t} GROUP BY state`,
  );
  return Object.fromEntries(rows.map((r) => [r.state, r.n]));
}

interface RunResult {
  readonly rate: number;
  readonly elapsedS: number;
  readonly settled: number;
  readonly done: readonly Done[];
  readonly loadBefore: string;
  readonly loadAfter: string;
  /** Machine CPU busy share during the run, and the benchmark's own share (drainers and sink). */
  readonly busy: string;
  readonly postgresCpuS: number;
  readonly sink?: { requests: number; distinctKeys: number; cpuSeconds: number };
  readonly states: Record<string, number>;
}

/** Starts `drains` drainer processes, lets them go at once, and waits until every one is done. */
async function run(mode: DrainInput['mode'], drains: number, sink: HttpSink): Promise<RunResult> {
  const input: DrainInput = {
    mode,
    postgresUrl: POSTGRES_URL,
    schema,
    sinkUrl: sink.url,
    batchSize: BATCH,
    maxConcurrency: MAX_CONCURRENCY,
    capSeconds: CAP_SECONDS,
    sampleMs: 250,
  };
  const profile = CPU_PROF && mode === 'deliver' ? ['--cpu-prof', '--cpu-prof-dir', CPU_PROF] : [];
  const children: BenchChild<DrainMessage>[] = Array.from({ length: drains }, () =>
    forkBenchChild<DrainMessage>('support/outbox-drain-process.ts', input, profile),
  );
  try {
    await Promise.all(
      children.map((c) =>
        c.next((m): m is Extract<DrainMessage, { type: 'ready' }> => m.type === 'ready', 60_000),
      ),
    );
    await sink.reset();
    const loadBefore = loadAverage();
    const postgresBefore = readPostgresCpu();
    const ticksBefore = readCpuTicks();
    const started = performance.now();
    for (const c of children) c.send({ type: 'go' });
    const done = await Promise.all(
      children.map((c) => c.next((m): m is Done => m.type === 'done', (CAP_SECONDS + 60) * 1000)),
    );
    const elapsedS = (performance.now() - started) / 1000;
    const postgresCpuS = postgresCpuSeconds(postgresBefore, readPostgresCpu());
    const ticksAfter = readCpuTicks();
    const loadAfter = loadAverage();
    const settled = done.reduce((sum, d) => sum + d.settled, 0);
    const sinkStats = mode === 'deliver' ? await sink.stats() : undefined;
    const ownCpu = done.reduce((sum, d) => sum + d.cpuSeconds, 0) + (sinkStats?.cpuSeconds ?? 0);
    return {
      rate: settled / elapsedS,
      elapsedS,
      settled,
      done,
      loadBefore,
      loadAfter,
      busy: busyLine(ticksBefore, ticksAfter, ownCpu, elapsedS),
      postgresCpuS,
      ...(sinkStats ? { sink: sinkStats } : {}),
      states: await countByState(),
    };
  } finally {
    for (const c of children) c.send({ type: 'close' });
    await Promise.all(children.map((c) => c.stop(10_000)));
  }
}

/**
 * The drainer's memory over the run: per tenth of the samples, the lowest heapUsed (the floor a GC left, which
 * is what rises when something leaks; the peaks are garbage not yet collected) and the highest RSS. Flat when the
 * median floor of the last four tenths is within 8 MB (or 10%) of the median floor of tenths 3 to 6 (the first two
 * are warm-up: JIT, pools, connections; a median, so that one tenth without a major GC does not decide). No
 * verdict for a drain shorter than 30 s: with the fetch-based publisher, heap and RSS kept rising for the first
 * 20–30 s of every run here before they levelled, so the quick mode only measures throughput.
 */
function memoryLine(samples: readonly MemorySample[]): { text: string; flat: boolean | undefined } {
  const tenths = Array.from({ length: 10 }, (_, i) =>
    samples.slice(Math.floor((i * samples.length) / 10), Math.floor(((i + 1) * samples.length) / 10)),
  ).filter((slice) => slice.length > 0);
  const floors = tenths.map((slice) => Math.min(...slice.map((s) => s.heapUsed)));
  const rss = tenths.map((slice) => Math.max(...slice.map((s) => s.rss)));
  const early = median(floors.slice(2, 6));
  const late = median(floors.slice(-4));
  const long = (samples.at(-1)?.t ?? 0) >= 30_000;
  const flat = long ? late - early < Math.max(8 * 2 ** 20, early * 0.1) : undefined;
  const mb = (values: number[]) => values.map((v) => (v / 2 ** 20).toFixed(0)).join(' ');
  return {
    flat,
    text:
      `heap floor per tenth of the run ${mb(floors)} MB (peak ${megabytes(Math.max(...samples.map((s) => s.heapUsed)))}), ` +
      `RSS ${mb(rss)} MB (${megabytes((rss.at(-1) ?? 0) - (rss[4] ?? 0))} MB over the second half): ` +
      (flat === undefined ? 'too short to judge' : `heap ${flat ? 'flat' : 'GROWING'}`),
  };
}

function heapVerdict(done: readonly Done[]): string {
  const verdicts = done.map((d) => memoryLine(d.samples).flat);
  if (verdicts.includes(undefined)) return 'heap not judged (run under 30 s)';
  return verdicts.every(Boolean) ? 'heap flat' : 'heap growing';
}

function label(kind: Kind): string {
  return kind === 'keyed' ? `${KEYS} keys` : 'unkeyed';
}

async function main(): Promise<void> {
  const { rows: version } = await admin.query<{ v: string }>("SELECT current_setting('server_version') AS v");
  console.log(
    `PostgreSQL ${version[0]?.v} at ${new URL(POSTGRES_URL).host}, schema ${schema}; ${machineLine()}`,
  );
  console.log(
    `${format(ROWS)} rows per run, batch ${BATCH}, destination maxConcurrency ${MAX_CONCURRENCY}, ` +
      `cap ${CAP_SECONDS} s per run; each drainer is its own process, the HTTP sink another.\n`,
  );
  // The schema is created by a store's migrate, as the runtime would do it.
  const { openPostgresStore } = await import('@queuebox/store-postgres');
  const store = await openPostgresStore({ url: POSTGRES_URL, schema, poolSize: 1 });
  await store.migrate();
  await store.close();

  const sink = await startHttpSink();
  console.log(`HTTP sink (node:http, its own process) at ${sink.url}\n`);
  try {
    const summary: string[] = [];
    for (const kind of KINDS) {
      for (const drains of DRAINS) {
        // The baseline and the delivery run back to back, so they see about the same load.
        await fill(kind);
        const base = await run('claim-settle', drains, sink);
        await fill(kind);
        const http = await run('deliver', drains, sink);
        const ratio = http.rate / base.rate;
        const cpu = http.done.reduce((s, d) => s + d.cpuSeconds, 0);
        const capped = http.done.some((d) => d.capped) ? '  (cap hit: rows left)' : '';
        const head = `${label(kind).padEnd(10)} ${drains} drain${drains > 1 ? 's' : ' '}`;
        console.log(
          `${head}  pending→sent over HTTP ${format(http.rate).padStart(6)} rows/s ` +
            `(${format(http.settled)} in ${http.elapsedS.toFixed(1)} s, load ${http.loadBefore} → ${http.loadAfter}, ${http.busy})${capped}`,
        );
        console.log(
          `${' '.repeat(head.length)}  claim+settle only      ${format(base.rate).padStart(6)} rows/s ` +
            `(load ${base.loadBefore} → ${base.loadAfter}, ${base.busy})   ratio ${(ratio * 100).toFixed(0)}%   ` +
            `${http.rate >= TARGET ? `meets the ${format(TARGET)}/s target` : `below the ${format(TARGET)}/s target`}`,
        );
        const perThousand = (seconds: number) => ((seconds / http.settled) * 1e6).toFixed(0);
        const cpuPerRow = (cpu + (http.sink?.cpuSeconds ?? 0) + http.postgresCpuS) / http.settled;
        console.log(
          `${' '.repeat(head.length)}  CPU per 1,000 rows: drainers ${perThousand(cpu)} ms, sink ` +
            `${perThousand(http.sink?.cpuSeconds ?? 0)} ms, postgres ${perThousand(http.postgresCpuS)} ms ` +
            `(all postgres processes on the machine); if CPU were the only limit, ${cpus().length} idle cores ` +
            `would give about ${format(cpus().length / cpuPerRow)} rows/s`,
        );
        const sinkLine = http.sink
          ? `sink got ${format(http.sink.requests)} requests for ${format(http.sink.distinctKeys)} distinct rows`
          : '';
        console.log(
          `${' '.repeat(head.length)}  ${sinkLine}; table: ${JSON.stringify(http.states)}; not sent by drainers: ` +
            `${http.done.reduce((s, d) => s + d.notSent, 0)}`,
        );
        http.done.forEach((d, i) => {
          const share = (ms: number) => `${((100 * ms) / d.elapsedMs).toFixed(0)}%`;
          console.log(
            `${' '.repeat(head.length)}  drainer ${i + 1}: ${format(d.settled)} rows, ${d.batches} batches, in claim ` +
              `${share(d.claimMs)} and in markSent ${share(d.settleMs)} of its time; ${memoryLine(d.samples).text}`,
          );
        });
        summary.push(
          `${head}: ${format(http.rate)} rows/s (claim+settle ${format(base.rate)}, ${(ratio * 100).toFixed(0)}%), ` +
            `load ${http.loadBefore}, ${http.busy}, ${heapVerdict(http.done)}`,
        );
        console.log('');
      }
    }
    console.log('Summary:');
    for (const line of summary) console.log(`  ${line}`);
  } finally {
    await sink.close();
  }
}

main()
  .catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  })
  .finally(async () => {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await admin.end();
  });
