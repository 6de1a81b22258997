/**
 * Latency benchmark: insert-to-delivery latency of the local runtime on PostgreSQL, with wake-ups (LISTEN/NOTIFY
 * from migration 0002's insert triggers) and with polling only. See bench/README.md.
 *
 *   npx tsx bench/latency.ts
 *
 * Three processes: this one produces (`enqueue` of @queuebox/client, one transaction per message, at a fixed
 * rate); a child runs the runtime (`startRuntime` of @queuebox/local, its own event loop, as `npm start` would);
 * another child is the HTTP receiver (node:http) the runtime delivers to. Latency = the receiver's clock when the
 * request body has arrived − the producer's clock when COMMIT was acknowledged, both read as
 * `performance.timeOrigin + performance.now()` (one machine, one system clock).
 *
 * Environment: QUEUEBOX_BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test),
 * QUEUEBOX_BENCH_SECONDS (measured seconds per run, default 20; a 2 s warm-up comes before),
 * QUEUEBOX_BENCH_KEYS (distinct keys the rows cycle through, default 1000; 0: rows without a key, as latency.mjs),
 * QUEUEBOX_BENCH_RATE (messages per second of the main runs, default 200; a pair of runs at a tenth of it shows the
 * wake-ups where the drain goes idle between messages).
 */
import { randomBytes } from 'node:crypto';
import { enqueue } from '@queuebox/client';
import pg from 'pg';
import { type BenchChild, forkBenchChild } from './support/child.ts';
import type { ReceiverCommand, ReceiverMessage } from './support/latency-receiver-process.ts';
import type { RuntimeInput, RuntimeMessage } from './support/latency-runtime-process.ts';
import { loadAverage, processCpuSeconds, readCpuTicks } from './support/machine.ts';

const POSTGRES_URL = process.env.QUEUEBOX_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SECONDS = Number(process.env.QUEUEBOX_BENCH_SECONDS ?? 20);
const RATE = Number(process.env.QUEUEBOX_BENCH_RATE ?? 200);
const LOW_RATE = RATE / 10;
const WARMUP_SECONDS = 2;
/**
 * Distinct outbox keys the producer cycles through (rows of one key are delivered in order); 0 writes rows without a
 * key, as ../shared/peers' latency.mjs does (then the store's light claim runs).
 */
const KEYS = Math.max(0, Math.floor(Number(process.env.QUEUEBOX_BENCH_KEYS ?? 1000)));
/** Longest wait for the last deliveries after the producer stopped. */
const DRAIN_WAIT_MS = 30_000;
const TARGET = { p50: 20, p99: 100 };

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The `p`th percentile (nearest rank); NaN for none. */
function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] ?? Number.NaN;
}

const ms = (n: number) => (Number.isFinite(n) ? `${n.toFixed(1)} ms` : 'n/a');

// ------------------------------------------------------------------------------------------------------------
// Parent: one run

interface RunSpec {
  readonly label: string;
  readonly wakeUps: boolean;
  readonly pollIntervalMs: number;
  /** Messages per second. */
  readonly rate: number;
}

interface Sent {
  /** When the message was due by the fixed rate. */
  readonly dueAt: number;
  /** When BEGIN was sent (lateness = startedAt − dueAt: the producer or a pool connection fell behind). */
  readonly startedAt: number;
  readonly commitSentAt: number;
  readonly committedAt: number;
}

interface RunResult {
  readonly spec: RunSpec;
  readonly latencies: number[];
  /** From the moment COMMIT was sent: an upper bound that includes the commit itself (its WAL flush). */
  readonly fromCommitSent: number[];
  readonly expected: number;
  readonly missing: number;
  readonly duplicates: number;
  readonly commitRtt: number[];
  readonly lateness: number[];
  readonly achievedRate: number;
  readonly loadBefore: string;
  readonly loadAfter: string;
  readonly machineBusy: number;
  readonly runtimeCpu: number;
  /** Outbox drains that delivered something (the runtime logs one line each), start-up and stop included. */
  readonly drains: number;
  readonly problems: string[];
}

function runtimeConfig(schema: string, receiverUrl: string, pollIntervalMs: number): unknown {
  return {
    database: { url: POSTGRES_URL, schema },
    http: { port: 0, host: '127.0.0.1' },
    outbox: { pollIntervalMs },
    destinations: { receiver: { type: 'http', url: receiverUrl } },
    routes: [{ match: 'bench.#', destination: 'receiver' }],
    logLevel: 'info',
  };
}

/** Enqueues `count` messages at `rate`, one transaction each, without waiting for one to finish before the next is due. */
async function produce(
  pool: pg.Pool,
  schema: string,
  run: number,
  count: number,
  rate: number,
): Promise<Sent[]> {
  const sent: Sent[] = [];
  const interval = 1000 / rate;
  const inFlight = new Set<Promise<void>>();
  const one = async (seq: number, dueAt: number) => {
    const startedAt = now();
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await enqueue(
        client,
        { topic: 'bench.latency', key: KEYS > 0 ? `key-${seq % KEYS}` : null, payload: { run, seq } },
        { schema },
      );
      const commitSentAt = now();
      await client.query('COMMIT');
      sent[seq] = { dueAt, startedAt, commitSentAt, committedAt: now() };
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  };
  const start = now() + 20;
  for (let seq = 0; seq < count; seq++) {
    const dueAt = start + seq * interval;
    const wait = dueAt - now();
    // Open loop: a message that is overdue (a slow timer, a stalled commit) goes at once, so a stall delays the
    // next ones' start, never the schedule.
    if (wait > 0.5) await sleep(wait);
    const work = one(seq, dueAt);
    inFlight.add(work);
    void work.finally(() => inFlight.delete(work)).catch(() => undefined);
  }
  await Promise.all(inFlight);
  return sent;
}

async function measure(
  spec: RunSpec,
  run: number,
  pool: pg.Pool,
  receiver: BenchChild<ReceiverMessage>,
  receiverUrl: string,
  schemas: string[],
): Promise<RunResult> {
  const schema = `bench_latency_${randomBytes(4).toString('hex')}`;
  schemas.push(schema);
  const problems: string[] = [];
  let drains = 0;
  const runtime = forkBenchChild<RuntimeMessage>(
    'support/latency-runtime-process.ts',
    {
      config: runtimeConfig(schema, receiverUrl, spec.pollIntervalMs),
      wakeUps: spec.wakeUps,
    } satisfies RuntimeInput,
    [],
    (line) => {
      if (line.includes('"message":"outbox drain"')) drains++;
      // Warnings and errors are shown; the info lines (one per drain) only counted.
      if (/"level":"(WARN|ERROR)"/.test(line)) console.error(`  runtime: ${line}`);
    },
  );
  try {
    const ready = await runtime.next(
      (m): m is Extract<RuntimeMessage, { type: 'ready' | 'failed' }> =>
        m.type === 'ready' || m.type === 'failed',
      60_000,
    );
    if (ready.type === 'failed') throw new Error(`the runtime did not start: ${ready.error}`);
    if (spec.wakeUps && !ready.listening) problems.push('the wake-up listener was not listening at start');
    // The drains that start-up (and the LISTEN) set off are over before the first message.
    await sleep(500);

    const warmup = Math.round(WARMUP_SECONDS * spec.rate);
    const count = warmup + Math.round(SECONDS * spec.rate);
    const loadBefore = loadAverage();
    const cpuBefore = readCpuTicks();
    const runtimeCpuBefore = processCpuSeconds(runtime.process.pid);
    const sent = await produce(pool, schema, run, count, spec.rate);

    // Wait for the last deliveries, at most DRAIN_WAIT_MS beyond the producer.
    const waitUntil = now() + DRAIN_WAIT_MS + spec.pollIntervalMs;
    while (now() < waitUntil) {
      receiver.send({ type: 'count' } satisfies ReceiverCommand);
      const { count: got } = await receiver.next(
        (m): m is Extract<ReceiverMessage, { type: 'count' }> => m.type === 'count',
        10_000,
      );
      if (got >= count) break;
      await sleep(50);
    }
    const cpuAfter = readCpuTicks();
    const runtimeCpu = processCpuSeconds(runtime.process.pid) - runtimeCpuBefore;
    const loadAfter = loadAverage();
    receiver.send({ type: 'dump' } satisfies ReceiverCommand);
    const { received } = await receiver.next(
      (m): m is Extract<ReceiverMessage, { type: 'dump' }> => m.type === 'dump',
      10_000,
    );

    const firstAt = new Map<number, number>();
    let duplicates = 0;
    for (const [fromRun, seq, at] of received) {
      if (fromRun !== run) continue;
      if (firstAt.has(seq)) duplicates++;
      else firstAt.set(seq, at);
    }
    const latencies: number[] = [];
    const fromCommitSent: number[] = [];
    const commitRtt: number[] = [];
    const lateness: number[] = [];
    let missing = 0;
    for (let seq = warmup; seq < count; seq++) {
      const s = sent[seq];
      const at = firstAt.get(seq);
      if (s === undefined || at === undefined) {
        missing++;
        continue;
      }
      latencies.push(at - s.committedAt);
      fromCommitSent.push(at - s.commitSentAt);
      commitRtt.push(s.committedAt - s.commitSentAt);
      lateness.push(s.startedAt - s.dueAt);
    }
    const first = sent[warmup];
    const last = sent[count - 1];
    const achievedRate =
      first && last && count - 1 > warmup
        ? (count - 1 - warmup) / ((last.startedAt - first.startedAt) / 1000)
        : 0;
    const sort = (values: number[]) => values.sort((a, b) => a - b);
    return {
      spec,
      latencies: sort(latencies),
      fromCommitSent: sort(fromCommitSent),
      expected: count - warmup,
      missing,
      duplicates,
      commitRtt: sort(commitRtt),
      lateness: sort(lateness),
      achievedRate,
      loadBefore,
      loadAfter,
      machineBusy:
        cpuAfter.total > cpuBefore.total
          ? (cpuAfter.busy - cpuBefore.busy) / (cpuAfter.total - cpuBefore.total)
          : Number.NaN,
      runtimeCpu,
      drains,
      problems,
    };
  } finally {
    runtime.send({ type: 'stop' });
    const stopped = await runtime
      .next((m): m is Extract<RuntimeMessage, { type: 'stopped' }> => m.type === 'stopped', 30_000)
      .catch(() => undefined);
    if (stopped && !stopped.clean) console.error('  runtime: the stop was not clean');
    await runtime.stop(5_000);
  }
}

function report(result: RunResult): void {
  const { latencies: l, fromCommitSent: u, spec } = result;
  const line = (values: readonly number[]) =>
    `p50 ${ms(percentile(values, 50))}   p90 ${ms(percentile(values, 90))}   p99 ${ms(percentile(values, 99))}` +
    `   max ${ms(values.at(-1) ?? Number.NaN)}   min ${ms(values[0] ?? Number.NaN)}`;
  const seconds = SECONDS;
  console.log(
    `\n${spec.label}, ${spec.rate} msg/s, pollIntervalMs ${spec.pollIntervalMs}: ${l.length} of ${result.expected} delivered` +
      `${result.missing > 0 ? `, ${result.missing} MISSING` : ''}${result.duplicates > 0 ? `, ${result.duplicates} delivered twice` : ''}`,
  );
  console.log(`  latency   ${line(l)}   (from COMMIT acknowledged)`);
  console.log(`            ${line(u)}   (from COMMIT sent: upper bound)`);
  console.log(
    `  producer  ${result.achievedRate.toFixed(1)} msg/s over ${seconds} s; COMMIT round trip p50 ${ms(percentile(result.commitRtt, 50))}` +
      ` p99 ${ms(percentile(result.commitRtt, 99))}; start behind schedule p99 ${ms(percentile(result.lateness, 99))}`,
  );
  console.log(
    `  machine   load average ${result.loadBefore} before, ${result.loadAfter} after; CPUs ${(result.machineBusy * 100).toFixed(0)}% busy` +
      `; runtime process ${((result.runtimeCpu / (seconds + WARMUP_SECONDS)) * 100).toFixed(0)}% of one CPU; ${result.drains} drains with work`,
  );
  for (const problem of result.problems) console.log(`  NOTE: ${problem}`);
}

async function main(): Promise<void> {
  const admin = new pg.Pool({ connectionString: POSTGRES_URL, max: 1 });
  // Enough connections that one slow commit does not hold up the schedule.
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 10 });
  const schemas: string[] = [];
  const receiver = forkBenchChild<ReceiverMessage>('support/latency-receiver-process.ts', {});
  try {
    const { rows } = await admin.query<{ v: string; sc: string }>(
      "SELECT current_setting('server_version') AS v, current_setting('synchronous_commit') AS sc",
    );
    console.log(
      `PostgreSQL ${rows[0]?.v} at ${new URL(POSTGRES_URL).host} (synchronous_commit ${rows[0]?.sc}); ` +
        `${navigator.hardwareConcurrency} CPUs; load average ${loadAverage()}`,
    );
    console.log(
      `${RATE} msg/s (and ${LOW_RATE} msg/s), ${SECONDS} s measured after a ${WARMUP_SECONDS} s warm-up, one transaction per message ` +
        `(enqueue, ${KEYS > 0 ? `key of ${KEYS}` : 'no key'}); runtime and receiver in child processes; latency = received − COMMIT acknowledged.`,
    );
    const { url: receiverUrl } = await receiver.next(
      (m): m is Extract<ReceiverMessage, { type: 'listening' }> => m.type === 'listening',
      30_000,
    );
    const specs: RunSpec[] = [
      { label: 'wake-ups on', wakeUps: true, pollIntervalMs: 100, rate: RATE },
      { label: 'wake-ups off', wakeUps: false, pollIntervalMs: 100, rate: RATE },
      { label: 'wake-ups off', wakeUps: false, pollIntervalMs: 1000, rate: RATE },
      // At a low rate the drain finds the outbox empty between messages and waits: here the wake-ups show.
      { label: 'wake-ups on', wakeUps: true, pollIntervalMs: 100, rate: LOW_RATE },
      { label: 'wake-ups off', wakeUps: false, pollIntervalMs: 100, rate: LOW_RATE },
    ];
    const results: RunResult[] = [];
    for (const [run, spec] of specs.entries()) {
      const result = await measure(spec, run, pool, receiver, receiverUrl, schemas);
      report(result);
      results.push(result);
    }
    const on = results[0];
    if (on) {
      const p50 = percentile(on.latencies, 50);
      const p99 = percentile(on.latencies, 99);
      const met = p50 < TARGET.p50 && p99 < TARGET.p99 && on.missing === 0;
      console.log(
        `\nTarget with wake-ups at ${RATE} msg/s: p50 < ${TARGET.p50} ms and p99 < ${TARGET.p99} ms — ` +
          `${met ? 'met' : 'NOT met'} (p50 ${ms(p50)}, p99 ${ms(p99)}).`,
      );
    }
  } finally {
    if (receiver.process.connected) receiver.process.disconnect();
    await receiver.stop(5_000);
    for (const schema of schemas) {
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch((error: unknown) => {
        console.error(`could not drop schema ${schema}:`, error);
      });
    }
    await pool.end();
    await admin.end();
  }
}

await main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
