/**
 * One outbox drainer of the outbox benchmark, as its own process (as separate outbox-tick invocations or local
 * runtimes would be). Mode `deliver`: the real assembly, `createServices` over `openPostgresStore`, one HTTP
 * destination (the sink) and one route, calling `poller.drain` until no row is pending. Mode `claim-settle`: the
 * store alone, `claim` then `markSent` of the claimed rows, the baseline without HTTP. Memory is sampled while it
 * runs; the parent gets one `done` message.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { parseConfig } from '@queuebox/config';
import type { OutboxStore } from '@queuebox/core';
import { defaultPublisherFactories } from '@queuebox/outbox';
import { openPostgresStore } from '@queuebox/store-postgres';
import { createServices } from '@queuebox/use-cases';
import pg from 'pg';
import { childInput, toParent } from './child.ts';

/** What the parent passes. */
export interface DrainInput {
  readonly mode: 'deliver' | 'claim-settle';
  readonly postgresUrl: string;
  readonly schema: string;
  readonly sinkUrl: string;
  readonly batchSize: number;
  /** The destination's `maxConcurrency` (requests in flight). */
  readonly maxConcurrency: number;
  /** Stop claiming after this long even when rows are left. */
  readonly capSeconds: number;
  readonly sampleMs: number;
}

/** One memory sample; `t` in milliseconds since `go`. */
export interface MemorySample {
  readonly t: number;
  readonly rss: number;
  readonly heapUsed: number;
}

/** What the process reports. */
export type DrainMessage =
  | { readonly type: 'ready' }
  | {
      readonly type: 'done';
      readonly settled: number;
      readonly notSent: number;
      readonly batches: number;
      readonly elapsedMs: number;
      readonly cpuSeconds: number;
      /** Wall time spent waiting for `claim`, and for the settles (`markSent` and the rest), in ms. */
      readonly claimMs: number;
      readonly settleMs: number;
      readonly capped: boolean;
      readonly samples: readonly MemorySample[];
    };

const input = childInput<DrainInput>();
const store = await openPostgresStore({ url: input.postgresUrl, schema: input.schema, poolSize: 4 });
const timing = { claimMs: 0, settleMs: 0 };
const timed =
  <A extends unknown[], R>(fn: (...args: A) => Promise<R>, into: 'claimMs' | 'settleMs') =>
  async (...args: A): Promise<R> => {
    const started = performance.now();
    try {
      return await fn(...args);
    } finally {
      timing[into] += performance.now() - started;
    }
  };
// The poller's settles of one batch run concurrently (sent, retry, dead, release); in this benchmark every row
// is sent, so the markSent time is the settle time.
const outbox: OutboxStore = {
  ...store.outbox,
  claim: timed(store.outbox.claim, 'claimMs'),
  markSent: timed(store.outbox.markSent, 'settleMs'),
};
const probe = new pg.Client({ connectionString: input.postgresUrl });
await probe.connect();

const config = parseConfig({
  database: { provider: 'postgres', url: input.postgresUrl, schema: input.schema },
  outbox: { batchSize: input.batchSize },
  destinations: {
    sink: { type: 'http', url: input.sinkUrl, timeoutMs: 10_000, maxConcurrency: input.maxConcurrency },
  },
  routes: [{ match: '#', destination: 'sink' }],
});
const services = createServices(
  config,
  { inbox: store.inbox, outbox },
  { publisherFactories: defaultPublisherFactories },
);

const anyPending = async (): Promise<boolean> => {
  const { rows } = await probe.query(
    `SELECT 1 FROM "${input.schema}".outbox WHERE state = 'pending' LIMIT 1`,
  );
  return rows.length > 0;
};

process.on('message', (message: { type: string }) => {
  if (message.type === 'go') void run();
  // Connections stay open until the parent has read PostgreSQL's CPU counters of their backends.
  if (message.type === 'close') void close();
});
toParent({ type: 'ready' } satisfies DrainMessage);

async function run(): Promise<void> {
  const started = performance.now();
  const cpuAtStart = process.cpuUsage();
  const capAt = Date.now() + input.capSeconds * 1000;
  const samples: MemorySample[] = [];
  const sample = () => {
    const { rss, heapUsed } = process.memoryUsage();
    samples.push({ t: performance.now() - started, rss, heapUsed });
  };
  sample();
  const sampler = setInterval(sample, input.sampleMs);
  let settled = 0;
  let notSent = 0;
  let batches = 0;
  let capped = false;
  try {
    for (;;) {
      if (Date.now() >= capAt) {
        capped = true;
        break;
      }
      let empty: boolean;
      if (input.mode === 'deliver') {
        // The local runtime's drain budget (10 s), cut to the cap.
        const report = await services.poller.drain({ deadline: Math.min(Date.now() + 10_000, capAt) });
        settled += report.sent;
        notSent += report.retried + report.dead + report.stale;
        batches += report.batches;
        empty = report.stoppedFor === 'empty';
      } else {
        const rows = await outbox.claim({
          batchSize: input.batchSize,
          leaseMs: config.outbox.claimTimeoutMs,
        });
        if (rows.length > 0) {
          const report = await outbox.markSent(
            rows.map((r) => ({ id: r.id, claimToken: r.claimToken ?? '', destination: 'sink' })),
          );
          settled += report.settled.length;
          notSent += report.stale.length;
          batches++;
        }
        empty = rows.length === 0;
      }
      // Nothing claimable is not nothing left: the other drainer may hold every head of the keys still pending.
      if (empty) {
        if (!(await anyPending())) break;
        await sleep(2);
      }
    }
  } finally {
    clearInterval(sampler);
  }
  sample();
  const cpu = process.cpuUsage(cpuAtStart);
  toParent({
    type: 'done',
    settled,
    notSent,
    batches,
    elapsedMs: performance.now() - started,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    ...timing,
    capped,
    samples,
  } satisfies DrainMessage);
}

async function close(): Promise<void> {
  await services.close();
  await store.close();
  await probe.end();
  process.disconnect();
}
