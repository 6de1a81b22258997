/**
 * Soak: the fault suite of test/faults at the issue's full size, with figures instead of assertions (it exits 1
 * when a message was lost, delivered out of order per key, or duplicated where no fault explains it). See the
 * "Soak" section of bench/README.md.
 *
 *   npx tsx bench/soak.ts
 *
 * 1. Crash: 20,000 messages over 1,000 keys; the runtime is killed with SIGKILL three times while it delivers
 *    and started again each time (3 s leases).
 * 2. Database restart: 10,000 messages over 200 keys plus webhooks a sender keeps posting; the runtime's own
 *    PostgreSQL (a private cluster, never the shared one) is stopped and started twice.
 * 3. Concurrency: 4 runtimes (processes) on one database, 100,000 messages over 1,000 keys enqueued while they run.
 * 4. Signature timing: 401 answer times for forged HMAC signatures that differ from the right one in their first
 *    or in their last character (a coarse end-to-end probe; the unit of proof is the constant-time comparison in
 *    packages/inbox/src/auth/primitives.ts).
 *
 * Environment: QUEUEBOX_BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test), QUEUEBOX_SOAK_SCALE
 * (default 1; 0.1 runs a tenth of every count), QUEUEBOX_SOAK_ONLY (comma list of crash,restart,concurrency,timing).
 * Everything runs on 127.0.0.1; each scenario works in a fresh schema bench_soak_<random> that is dropped after it.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { openPostgresStore } from '@queuebox/store-postgres';
import pg from 'pg';
import {
  type Expected,
  enqueueKeyed,
  judgeDeliveries,
  processingRows,
  startRecordingReceiver,
  statesOf,
} from '../test/faults/support/deliveries.ts';
import { type DatabaseOutage, databaseOutage } from '../test/faults/support/postgres-cluster.ts';
import { healthStatus, killAll, killHard, waitUntil } from '../test/faults/support/processes.ts';
import { faultConfigYaml, withPassword } from '../test/faults/support/runtime-config.ts';
import { leakedSecrets, outputOf, startWebhookSender } from '../test/faults/support/wire.ts';
import {
  baseUrlOf,
  cleanup,
  type QueueBoxProcess,
  signStandardWebhook,
  startQueueBox,
} from '../test/local/support.ts';

const POSTGRES_URL = process.env.QUEUEBOX_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SCALE = Number(process.env.QUEUEBOX_SOAK_SCALE ?? 1);
const ONLY = new Set(
  (process.env.QUEUEBOX_SOAK_ONLY ?? 'crash,restart,concurrency,timing').split(',').map((s) => s.trim()),
);
const scaled = (n: number, min: number) => Math.max(min, Math.round(n * SCALE));

const SIZES = {
  crash: { count: scaled(20_000, 1_000), keys: scaled(1_000, 50), kills: 3 },
  restart: { count: scaled(10_000, 500), keys: scaled(200, 20), outages: 2, downMs: 3_000 },
  concurrency: { count: scaled(100_000, 2_000), keys: scaled(1_000, 50), processes: 4 },
  timing: { samples: scaled(2_000, 200) },
};

/** One line of the summary. */
interface Figure {
  readonly scenario: string;
  readonly load: string;
  readonly faults: string;
  readonly lost: number;
  readonly duplicates: string;
  readonly notes: string;
  readonly ok: boolean;
}

const figures: Figure[] = [];
const processes: QueueBoxProcess[] = [];
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const rate = (count: number, ms: number) => `${Math.round((count * 1000) / ms).toLocaleString('en')}/s`;
const n = (value: number) => value.toLocaleString('en');

async function inFreshSchema<T>(
  label: string,
  url: string,
  work: (schema: string, pool: pg.Pool) => Promise<T>,
) {
  const schema = `bench_soak_${label}_${randomBytes(3).toString('hex')}`;
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  pool.on('error', () => undefined);
  try {
    const store = await openPostgresStore({ url, schema });
    await store.migrate();
    await store.close();
    return await work(schema, pool);
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await pool.end();
  }
}

async function duplicatesWithoutExpiredLease(pool: pg.Pool, schema: string, ids: readonly string[]) {
  if (ids.length === 0) return 0;
  const { rows } = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${schema}".outbox WHERE id = ANY($1::bigint[]) AND attempt < 1`,
    [ids],
  );
  return rows[0]?.n ?? 0;
}

// ------------------------------------------------------------------------------------------------------------

async function crash(): Promise<void> {
  const { count, keys, kills } = SIZES.crash;
  console.info(`[soak] crash: ${n(count)} messages over ${n(keys)} keys, ${kills} kills`);
  await inFreshSchema('crash', POSTGRES_URL, async (schema, pool) => {
    const secrets = { databasePassword: `db-pw-${randomBytes(8).toString('hex')}` };
    const expected = await enqueueKeyed(pool, { schema, count, keys, topic: 'soak.crash', run: schema });
    const receiver = await startRecordingReceiver();
    const yaml = faultConfigYaml({
      database: { url: withPassword(POSTGRES_URL, secrets.databasePassword), schema },
      receiverUrl: receiver.url,
      claimTimeoutMs: 4_000,
    });
    const started = Date.now();
    const inProcessingAtKills = new Set<string>();
    const own: QueueBoxProcess[] = [];
    let processingTotal = 0;
    try {
      for (let kill = 1; kill <= kills; kill += 1) {
        const runtime = await startQueueBox({ yaml });
        processes.push(runtime);
        own.push(runtime);
        await baseUrlOf(runtime);
        const target = Math.floor((count * kill) / (kills + 1)) + 37;
        await waitUntil(
          () => receiver.distinct() >= target,
          `${n(target)} deliveries`,
          600_000,
          undefined,
          10,
        );
        await killHard(runtime);
        await new Promise((resolve) => setTimeout(resolve, 300));
        const atKill = await processingRows(pool, schema);
        processingTotal += atKill.size;
        for (const id of atKill.keys()) inProcessingAtKills.add(id);
        console.info(
          `[soak] crash: kill ${kill} after ${n(receiver.distinct())} distinct deliveries, ${atKill.size} rows in processing`,
        );
      }
      const last = await startQueueBox({ yaml });
      processes.push(last);
      own.push(last);
      await baseUrlOf(last);
      await waitUntil(
        async () => (await statesOf(pool, schema, 'outbox')).sent === count,
        'every row sent',
        900_000,
        undefined,
        500,
      );
      const elapsed = Date.now() - started;
      await last.stop('SIGTERM');
      const verdict = judgeDeliveries(receiver.arrivals, expected);
      const unexplained = [...verdict.duplicates.keys()].filter((id) => !inProcessingAtKills.has(id));
      const leaks = own.flatMap((p) => leakedSecrets(outputOf(p), secrets));
      const ok =
        verdict.missing.length === 0 &&
        verdict.foreign.length === 0 &&
        verdict.orderViolations.length === 0 &&
        unexplained.length === 0 &&
        leaks.length === 0;
      figures.push({
        scenario: `crash (${n(count)} messages, ${n(keys)} keys)`,
        load: `${rate(count, elapsed)} end to end over ${seconds(elapsed)}, kills and restarts included`,
        faults: `${kills} × kill -9 mid-delivery, ${processingTotal} rows in processing at the kills`,
        lost: verdict.missing.length,
        duplicates: `${verdict.duplicates.size} ids (${verdict.extraArrivals} extra arrivals), all in processing at a kill: ${unexplained.length === 0 ? 'yes' : `no (${unexplained.length})`}`,
        notes: `order violations ${verdict.orderViolations.length}; secrets in output: ${leaks.length}`,
        ok,
      });
    } finally {
      await killAll(own);
      await receiver.close();
    }
  });
}

// ------------------------------------------------------------------------------------------------------------

async function restart(): Promise<void> {
  const { count, keys, outages, downMs } = SIZES.restart;
  let outage: DatabaseOutage | undefined;
  try {
    outage = await databaseOutage(POSTGRES_URL, 'soak: restart');
    const database = outage;
    console.info(
      `[soak] restart: ${n(count)} messages over ${n(keys)} keys + webhooks, ${outages} outages; ${database.how}`,
    );
    await inFreshSchema('restart', database.url, async (schema, pool) => {
      const secrets = {
        databasePassword: `db-pw-${randomBytes(8).toString('hex')}`,
        webhookSecret: `whsec_${randomBytes(24).toString('base64')}`,
      };
      const expected = await enqueueKeyed(pool, { schema, count, keys, topic: 'soak.restart', run: schema });
      const receiver = await startRecordingReceiver();
      const runtime = await startQueueBox({
        yaml: faultConfigYaml({
          database: { url: withPassword(database.url, secrets.databasePassword), schema },
          receiverUrl: receiver.url,
          sourcesYaml: `  hooks:
    type: http
    auth: { scheme: standard-webhooks, secrets: [${JSON.stringify(secrets.webhookSecret)}] }
    eventTypePath: $.type
    aggregateIdPath: $.agg
    topic: "hooks.{{ eventType }}"
`,
        }),
      });
      processes.push(runtime);
      try {
        const base = await baseUrlOf(runtime);
        const health = () => healthStatus(base);
        const started = Date.now();
        const sender = startWebhookSender({
          url: `${base}/inbox/hooks`,
          secret: secrets.webhookSecret,
          keys: 8,
          run: `wh${randomBytes(3).toString('hex')}`,
          gapMs: 50,
          sign: signStandardWebhook,
        });
        const healthSeen = new Set<number>();
        for (let i = 1; i <= outages; i += 1) {
          const target = Math.floor((count * i) / (outages + 1));
          await waitUntil(
            () => receiver.distinct() >= target,
            `${n(target)} deliveries`,
            600_000,
            undefined,
            10,
          );
          await database.down();
          const downAt = Date.now();
          while (Date.now() - downAt < downMs) {
            healthSeen.add(await health());
            await new Promise((resolve) => setTimeout(resolve, 200));
          }
          await database.up();
          await waitUntil(async () => (await health()) === 200, '/health 200', 60_000);
          healthSeen.add(200);
          console.info(`[soak] restart: outage ${i} done after ${n(receiver.distinct())} deliveries`);
        }
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        const sent = await sender.stop();
        await waitUntil(
          async () => {
            const [outbox, inbox] = await Promise.all([
              statesOf(pool, schema, 'outbox'),
              statesOf(pool, schema, 'inbox'),
            ]);
            return outbox.sent === count + sent.accepted.length && inbox.processed === sent.accepted.length;
          },
          'every row sent',
          900_000,
          undefined,
          500,
        );
        const elapsed = Date.now() - started;
        const verdict = judgeDeliveries(
          receiver.arrivals.filter((a) => a.inboxKey === undefined),
          expected as Map<string, Expected>,
        );
        const relayed = new Set(receiver.arrivals.map((a) => a.inboxKey).filter((k) => k !== undefined));
        const webhooksLost = sent.accepted.filter((id) => !relayed.has(id)).length;
        const counts = new Map<string, number>();
        for (const a of receiver.arrivals) counts.set(a.id, (counts.get(a.id) ?? 0) + 1);
        const duplicated = [...counts].filter(([, c]) => c > 1).map(([id]) => id);
        const unexplained = await duplicatesWithoutExpiredLease(pool, schema, duplicated);
        const leaks = leakedSecrets(outputOf(runtime), secrets);
        const sameProcess =
          runtime.child.exitCode === null &&
          runtime.logs.filter((l) => l.message === 'listening').length === 1;
        await runtime.stop('SIGTERM');
        figures.push({
          scenario: `database restart (${n(count)} messages + ${n(sent.accepted.length)} webhooks)`,
          load: `${rate(count + sent.accepted.length, elapsed)} end to end over ${seconds(elapsed)}, outages included`,
          faults: `${outages} × PostgreSQL stopped for ${downMs / 1000} s and started (${database.how.split(',')[0]}); /health answered ${[...healthSeen].sort().join(' and ')}; webhook answers ${JSON.stringify(sent.statuses)}`,
          lost: verdict.missing.length + webhooksLost,
          duplicates: `${duplicated.length} ids, all reclaimed after their lease expired: ${unexplained === 0 ? 'yes' : `no (${unexplained})`}`,
          notes: `same process throughout: ${sameProcess}; order violations ${verdict.orderViolations.length}; secrets in output: ${leaks.length}`,
          ok:
            verdict.missing.length === 0 &&
            webhooksLost === 0 &&
            verdict.orderViolations.length === 0 &&
            unexplained === 0 &&
            sameProcess &&
            healthSeen.has(503) &&
            leaks.length === 0,
        });
      } finally {
        await killAll([runtime]);
        await receiver.close();
      }
    });
  } finally {
    await outage?.dispose();
  }
}

// ------------------------------------------------------------------------------------------------------------

async function concurrency(): Promise<void> {
  const { count, keys, processes: size } = SIZES.concurrency;
  console.info(`[soak] concurrency: ${size} processes, ${n(count)} messages over ${n(keys)} keys`);
  await inFreshSchema('concurrency', POSTGRES_URL, async (schema, pool) => {
    const receiver = await startRecordingReceiver();
    const yaml = faultConfigYaml({
      database: { url: POSTGRES_URL, schema, poolSize: 4 },
      receiverUrl: receiver.url,
      claimTimeoutMs: 120_000,
    });
    const own = await Promise.all(
      Array.from({ length: size }, async () => {
        const runtime = await startQueueBox({ yaml });
        processes.push(runtime);
        await baseUrlOf(runtime);
        return runtime;
      }),
    );
    try {
      const started = Date.now();
      const expected = new Map<string, Expected>();
      const step = 5_000;
      for (let from = 0; from < count; from += step) {
        const batch = await enqueueKeyed(pool, {
          schema,
          count: Math.min(step, count - from),
          keys,
          topic: 'soak.concurrency',
          run: schema,
          perTransaction: 500,
          from,
        });
        for (const [id, message] of batch) expected.set(id, message);
      }
      const enqueuedIn = Date.now() - started;
      await waitUntil(
        async () => (await statesOf(pool, schema, 'outbox')).sent === count,
        'every row sent',
        1_800_000,
        undefined,
        1_000,
      );
      const elapsed = Date.now() - started;
      const verdict = judgeDeliveries(receiver.arrivals, expected);
      const sentBy = own.map((r) =>
        r.logs.filter((l) => l.message === 'outbox drain').reduce((sum, l) => sum + Number(l.sent ?? 0), 0),
      );
      await Promise.all(own.map((r) => r.stop('SIGTERM')));
      figures.push({
        scenario: `concurrency (${size} processes, ${n(count)} messages, ${n(keys)} keys)`,
        load: `${rate(count, elapsed)} delivered over ${seconds(elapsed)} (enqueue of all rows took ${seconds(enqueuedIn)}, while the drains ran)`,
        faults: 'none (concurrent claimers only)',
        lost: verdict.missing.length,
        duplicates: `${verdict.duplicates.size} (must be 0)`,
        notes: `sent per process ${sentBy.map(n).join(' / ')}; order violations ${verdict.orderViolations.length}`,
        ok:
          verdict.missing.length === 0 &&
          verdict.duplicates.size === 0 &&
          verdict.foreign.length === 0 &&
          verdict.orderViolations.length === 0 &&
          sentBy.every((s) => s > 0),
      });
    } finally {
      await killAll(own);
      await receiver.close();
    }
  });
}

// ------------------------------------------------------------------------------------------------------------

async function timing(): Promise<void> {
  const { samples } = SIZES.timing;
  console.info(`[soak] timing: ${n(samples)} forged signatures per group`);
  await inFreshSchema('timing', POSTGRES_URL, async (schema) => {
    const secret = `hm-${randomBytes(16).toString('hex')}`;
    const receiver = await startRecordingReceiver();
    const runtime = await startQueueBox({
      yaml: faultConfigYaml({
        database: { url: POSTGRES_URL, schema },
        receiverUrl: receiver.url,
        sourcesYaml: `  hm:
    type: http
    auth: { scheme: hmac, secrets: [${JSON.stringify(secret)}], header: X-Sig }
    idempotencyKey: { path: $.id }
    eventTypePath: $.type
`,
      }),
    });
    processes.push(runtime);
    try {
      const base = await baseUrlOf(runtime);
      const body = '{"id":"timing","type":"t"}';
      const right = createHmac('sha256', secret).update(body).digest('hex');
      const flip = (c: string) => (c === '0' ? '1' : '0');
      const forged = {
        first: `${flip(right[0] ?? '')}${right.slice(1)}`,
        last: `${right.slice(0, -1)}${flip(right.at(-1) ?? '')}`,
      };
      const times: Record<'first' | 'last', number[]> = { first: [], last: [] };
      const once = async (group: 'first' | 'last') => {
        const start = process.hrtime.bigint();
        const response = await fetch(`${base}/inbox/hm`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-sig': forged[group] },
          body,
        });
        await response.arrayBuffer();
        const took = Number(process.hrtime.bigint() - start) / 1000;
        if (response.status !== 401) throw new Error(`a forged signature got ${response.status}`);
        times[group].push(took);
      };
      for (let i = 0; i < 200; i += 1) await once(i % 2 === 0 ? 'first' : 'last');
      times.first = [];
      times.last = [];
      for (let i = 0; i < samples; i += 1) {
        // Interleaved in a shuffled order, so drift of the machine affects both groups alike.
        const order: ('first' | 'last')[] = Math.random() < 0.5 ? ['first', 'last'] : ['last', 'first'];
        for (const group of order) await once(group);
      }
      const quantile = (values: number[], q: number) => {
        const sorted = [...values].sort((a, b) => a - b);
        return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
      };
      const median = { first: quantile(times.first, 0.5), last: quantile(times.last, 0.5) };
      const p90 = { first: quantile(times.first, 0.9), last: quantile(times.last, 0.9) };
      figures.push({
        scenario: `signature timing (${n(samples)} forged HMAC signatures per group)`,
        load: `401 answer time, median ${median.first.toFixed(0)} µs (first character wrong) vs ${median.last.toFixed(0)} µs (last character wrong); p90 ${p90.first.toFixed(0)} vs ${p90.last.toFixed(0)} µs`,
        faults: 'forged signatures differing from the right one at the start or at the end',
        lost: 0,
        duplicates: '-',
        notes: `median difference ${(median.last - median.first).toFixed(1)} µs, end to end over HTTP (noise of the loopback round trip dominates)`,
        ok: true,
      });
    } finally {
      await killAll([runtime]);
      await receiver.close();
    }
  });
}

// ------------------------------------------------------------------------------------------------------------

const started = Date.now();
try {
  if (ONLY.has('crash')) await crash();
  if (ONLY.has('restart')) await restart();
  if (ONLY.has('concurrency')) await concurrency();
  if (ONLY.has('timing')) await timing();
} finally {
  await killAll(processes);
  await cleanup();
}
console.info(`\n[soak] scale ${SCALE}, ${seconds(Date.now() - started)} in all\n`);
console.info('| scenario | load held | faults survived | lost | duplicates | notes |');
console.info('| --- | --- | --- | ---: | --- | --- |');
for (const f of figures) {
  console.info(`| ${f.scenario} | ${f.load} | ${f.faults} | ${f.lost} | ${f.duplicates} | ${f.notes} |`);
}
const failed = figures.filter((f) => !f.ok);
if (failed.length > 0) {
  console.error(`\n[soak] FAILED: ${failed.map((f) => f.scenario).join('; ')}`);
  process.exitCode = 1;
}
