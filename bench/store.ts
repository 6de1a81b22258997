/**
 * Store benchmark: claim-and-settle throughput of the PostgreSQL store, single-row insert rate, pgbench running
 * the very same claim + markSent SQL, and pgbench running the simplest claim + mark-sent there is (one table, no
 * keys, `FOR UPDATE SKIP LOCKED`, no ordering), side by side, and for unkeyed rows that simplest SQL on QueueBox's
 * own table (the most any claim of the table reaches); then what one `enqueue` adds to an application's
 * transaction against a plain INSERT. See bench/README.md.
 *
 *   npx tsx bench/store.ts
 *
 * Environment: QUEUEBOX_BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test),
 * QUEUEBOX_BENCH_SECONDS (seconds per measured run at batch 100; default 10; smaller batches run half as long),
 * QUEUEBOX_BENCH_WORKERS (concurrent claimers, default 4), PGBENCH (default /usr/bin/pgbench),
 * QUEUEBOX_BENCH_ONLY=side-by-side (only the batch-100 turns of ours, pgbench on our SQL and the simplest claim),
 * QUEUEBOX_BENCH_ONLY=enqueue (only what one `enqueue` adds to a transaction).
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { enqueue } from '@queuebox/client';
import type { OutboxStore } from '@queuebox/core';
import { DEFERRED_PAYLOAD_BYTES } from '@queuebox/outbox';
import {
  CLAIM_COMMITS_ASYNCHRONOUSLY,
  claimOutboxStatement,
  claimUnkeyedOutboxStatement,
  createPgExecutor,
  createPostgresStore,
  HEAD_CLAIM_EVERY,
  markOutboxSentStatement,
  storeTypeParser,
} from '@queuebox/store-postgres';
import pg from 'pg';

const POSTGRES_URL = process.env.QUEUEBOX_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SECONDS = Number(process.env.QUEUEBOX_BENCH_SECONDS ?? 10);
const WORKERS = Number(process.env.QUEUEBOX_BENCH_WORKERS ?? 4);
const PGBENCH = process.env.PGBENCH ?? '/usr/bin/pgbench';
const SIDE_BY_SIDE_ONLY = process.env.QUEUEBOX_BENCH_ONLY === 'side-by-side';
const ENQUEUE_ONLY = process.env.QUEUEBOX_BENCH_ONLY === 'enqueue';
const LEASE_MS = 300_000;
const KEYS = 1000;

type Kind = 'keyed' | 'unkeyed' | 'hot';

const schema = `bench_${randomBytes(4).toString('hex')}`;
const admin = new pg.Pool({ connectionString: POSTGRES_URL, max: 1 });
// The store's pool as openPostgresStore makes it: its own type parsers (json keeping large numbers, timestamptz).
const pool = new pg.Pool({
  connectionString: POSTGRES_URL,
  max: WORKERS,
  types: { getTypeParser: storeTypeParser },
});
const executor = createPgExecutor(pool);
const store = createPostgresStore({ executor, schema });
const t = `"${schema}".outbox`;

/** Empties the table and fills it with `rows` pending rows of the given kind, then vacuums and analyzes. */
async function fill(kind: Kind, rows: number): Promise<void> {
  await admin.query(`TRUNCATE ${t}`);
  const key =
    kind === 'keyed'
      ? `'key-' || lpad((g % ${KEYS})::text, 4, '0')`
      : kind === 'hot'
        ? // One key holds 40% of the rows at the head of the table; fifty others share the rest.
          `CASE WHEN g <= ${Math.floor(rows * 0.4)} THEN 'hot' ELSE 'key-' || lpad((g % 50)::text, 4, '0') END`
        : 'NULL';
  await admin.query(
    `INSERT INTO ${t} (topic, key, payload, headers, max_attempts, scheduled_at)
     SELECT 'orders.created', ${key}, jsonb_build_object('order', g, 'note', 'benchmark payload of modest size'),
            '{"content-type":"application/json"}', 10, now() - interval '1 minute'
     FROM generate_series(1, $1::int) g`,
    [rows],
  );
  await admin.query(`VACUUM ANALYZE ${t}`);
}

const simple = `"${schema}".simple_queue`;

/**
 * The simplest claim's table: an identity, the same JSON payload, a state, and the one index a claim of pending
 * rows needs. No keys, no leases, no attempts.
 */
async function fillSimple(rows: number): Promise<void> {
  await admin.query(`CREATE TABLE IF NOT EXISTS ${simple} (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    payload jsonb NOT NULL,
    state text NOT NULL DEFAULT 'pending')`);
  await admin.query(
    `CREATE INDEX IF NOT EXISTS simple_queue_pending ON ${simple} (id) WHERE state = 'pending'`,
  );
  await admin.query(`TRUNCATE ${simple}`);
  await admin.query(
    `INSERT INTO ${simple} (payload)
     SELECT jsonb_build_object('order', g, 'note', 'benchmark payload of modest size') FROM generate_series(1, $1::int) g`,
    [rows],
  );
  await admin.query(`VACUUM ANALYZE ${simple}`);
}

/**
 * The simplest claim + mark-sent as a pgbench script: 100 pending rows, any order, skip locked; then sent. On
 * `table` (default the simplest table), with `where` added to the claim's filter.
 */
function simplePgbenchScript(batchSize: number, table = simple, where = ''): string {
  return `WITH c AS (SELECT id FROM ${table} WHERE state = 'pending'${where} LIMIT ${batchSize} FOR UPDATE SKIP LOCKED), u AS (UPDATE ${table} q SET state = 'processing' FROM c WHERE q.id = c.id RETURNING q.id, q.payload) SELECT coalesce(array_agg(id), '{}') AS ids FROM u \\gset
UPDATE ${table} SET state = 'sent' WHERE id = ANY (':ids'::bigint[]) AND state = 'processing';
`;
}

async function countSent(): Promise<number> {
  const { rows } = await admin.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${t} WHERE state = 'sent'`,
  );
  return rows[0]?.n ?? 0;
}

/** WORKERS loops of claim(batch) then markSent(batch), for `seconds`; answers settled rows per second. */
async function claimAndSettle(
  batchSize: number,
  seconds: number,
): Promise<{ rate: number; drained: boolean; nodeCpuMsPer1000: number }> {
  // One store per worker: each keeps its own rotating start key, as separate processes would.
  const outboxes: OutboxStore[] = Array.from(
    { length: WORKERS },
    () => createPostgresStore({ executor, schema }).outbox,
  );
  let settled = 0;
  let drained = false;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    outboxes.map(async (outbox) => {
      while (performance.now() < deadline) {
        // As the poller claims: payloads over DEFERRED_PAYLOAD_BYTES left out (none here; the test is what counts).
        const claim = { batchSize, leaseMs: LEASE_MS, deferPayloadsOverBytes: DEFERRED_PAYLOAD_BYTES };
        const rows = await outbox.claim(claim);
        if (rows.length === 0) {
          // Nothing claimable right now (other claimers hold every head) is not the same as nothing left.
          const { rows: left } = await admin.query(`SELECT 1 FROM ${t} WHERE state <> 'sent' LIMIT 1`);
          if (left.length === 0) {
            drained = true;
            return;
          }
          await new Promise((resolve) => setTimeout(resolve, 1));
          continue;
        }
        const report = await outbox.markSent(
          rows.map((r) => ({ id: r.id, claimToken: r.claimToken ?? '', destination: 'bench' })),
        );
        settled += report.settled.length;
      }
    }),
  );
  const cpu = process.cpuUsage(cpuBefore);
  return {
    rate: settled / ((performance.now() - started) / 1000),
    drained,
    // This process's CPU (the store, pg's protocol work, the socket writes) per 1,000 settled rows.
    nodeCpuMsPer1000: ((cpu.user + cpu.system) / 1000 / Math.max(1, settled)) * 1000,
  };
}

/** WORKERS loops of single-row inserts for `seconds`; answers rows per second. */
async function insertRate(seconds: number): Promise<number> {
  let inserted = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: WORKERS }, async (_, w) => {
      while (performance.now() < deadline) {
        await store.outbox.insert([
          {
            topic: 'orders.created',
            key: `key-${w}-${inserted % KEYS}`,
            payload: { order: inserted },
            maxAttempts: 10,
          },
        ]);
        inserted++;
      }
    }),
  );
  return inserted / ((performance.now() - started) / 1000);
}

/** `$n` → the given SQL text, for pgbench's simple protocol (variables are substituted as text). */
function inline(text: string, values: Record<number, string>): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => {
    const value = values[Number(n)];
    if (value === undefined) throw new Error(`No value for $${n}`);
    return value;
  });
}

/**
 * The pgbench script: the claim statement the store runs (on a table without keys, after its first claim, the
 * store runs `claimUnkeyedOutboxStatement`; with keys `claimOutboxStatement`, the rotating key carried by `:start`),
 * its final SELECT folded into one row for `\gset`, and the store's markSent of one claim to one destination, with
 * pgbench variables in place of the parameters.
 */
function pgbenchScript(batchSize: number, kind: Kind): string {
  const token = '(SELECT gen_random_uuid())';
  const folded = `coalesce(array_agg(claimed.id) FILTER (WHERE claimed.id IS NOT NULL), '{}') AS ids,
       coalesce(min(claimed.claim_token::text), '00000000-0000-4000-8000-000000000000') AS token`;
  const oneLine = (sql: string) => sql.replace(/\s+/g, ' ').trim();
  let claimLines: string;
  if (kind === 'unkeyed') {
    // The store's start: every HEAD_CLAIM_EVERY-th claim (and one after a short claim) from the oldest due row, with
    // its own statement; the others from a random point.
    const unkeyed = (start: number, at: string) => {
      const claim = claimUnkeyedOutboxStatement(schema, {
        batchSize,
        leaseMs: LEASE_MS,
        claimToken: token,
        start,
        deferBytes: DEFERRED_PAYLOAD_BYTES,
      });
      const finalSelect = claim.text.lastIndexOf('SELECT claimed.*');
      if (finalSelect < 0) throw new Error('The claim statement changed shape; update the benchmark');
      const text = `${inline(claim.text.slice(0, finalSelect), {
        1: String(LEASE_MS),
        2: token,
        3: at,
      })}SELECT ${folded} FROM active LEFT JOIN claimed ON true ${CLAIM_COMMITS_ASYNCHRONOUSLY}`;
      return `${oneLine(text)} \\gset`;
    };
    claimLines = [
      `\\set head random(0, ${HEAD_CLAIM_EVERY - 1})`,
      '\\set r random(1, 999999)',
      '\\if :head = 0',
      unkeyed(0, '0'),
      '\\else',
      unkeyed(0.5, ':r / 1000000.0'),
      '\\endif',
    ].join('\n');
  } else {
    const claim = claimOutboxStatement(schema, {
      batchSize,
      unkeyedReserve: Math.floor(batchSize / 2),
      leaseMs: LEASE_MS,
      startAfterKey: null,
      keyScanLimit: 1000,
      claimToken: token,
      deferBytes: DEFERRED_PAYLOAD_BYTES,
    });
    const finalSelect = claim.text.lastIndexOf('SELECT claimed.*');
    if (finalSelect < 0) throw new Error('The claim statement changed shape; update the benchmark');
    const claimText = `${inline(claim.text.slice(0, finalSelect), {
      1: String(batchSize),
      2: String(Math.floor(batchSize / 2)),
      3: `nullif(':start', '-')::text`,
      4: '1000',
      5: String(LEASE_MS),
      6: token,
    })}SELECT coalesce(max(cursor.next_key), '-') AS start, ${folded} FROM cursor LEFT JOIN claimed ON true ${CLAIM_COMMITS_ASYNCHRONOUSLY}`;
    claimLines = `${oneLine(claimText)} \\gset`;
  }
  const sent = markOutboxSentStatement(schema, [
    { id: '1', claimToken: '00000000-0000-4000-8000-000000000000', destination: 'bench' },
  ]);
  const sentText = inline(sent.text, { 1: `':ids'::bigint[]`, 2: `':token'::uuid`, 3: `'bench'` });
  return `${claimLines}\n${oneLine(sentText)};\n`;
}

/** pgbench -c WORKERS -T seconds with `text`; answers rows per second that `count` finds settled. */
function runPgbench(text: string, seconds: number, count: () => Promise<number>): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'queuebox-bench-'));
  try {
    const script = join(dir, 'claim-settle.sql');
    writeFileSync(script, text);
    const url = new URL(POSTGRES_URL);
    const result = spawnSync(
      PGBENCH,
      [
        '-n',
        '-f',
        script,
        '-c',
        String(WORKERS),
        '-j',
        '2',
        '-T',
        String(seconds),
        '-D',
        'start=-',
        '-h',
        url.hostname,
        '-p',
        url.port || '5432',
        '-U',
        decodeURIComponent(url.username || 'postgres'),
        url.pathname.slice(1) || 'postgres',
      ],
      { encoding: 'utf8', env: { ...process.env, PGPASSWORD: decodeURIComponent(url.password) } },
    );
    if (result.status !== 0) throw new Error(`pgbench failed: ${result.stderr || result.stdout}`);
    const failed = /number of failed transactions: (\d+)/.exec(result.stdout)?.[1];
    if (failed && failed !== '0') throw new Error(`pgbench had ${failed} failed transactions`);
    return count().then((settled) => settled / seconds);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function format(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] ?? 0)
    : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
}

function line(label: string, batch: number, rate: number, note = ''): void {
  console.log(
    `claim+settle  ${label.padEnd(18)} batch ${String(batch).padStart(3)}  ${format(rate).padStart(8)} rows/s${note}`,
  );
}

async function main(): Promise<void> {
  const { rows: version } = await admin.query<{ v: string }>("SELECT current_setting('server_version') AS v");
  console.log(`PostgreSQL ${version[0]?.v} at ${new URL(POSTGRES_URL).host}, schema ${schema}`);
  console.log(`${WORKERS} concurrent claimers; each claim is followed by markSent of the claimed rows.\n`);
  await store.migrate();
  if (ENQUEUE_ONLY) return enqueueCost();

  const short = Math.max(1, SECONDS / 2);
  const rowsFor = (seconds: number, batch: number) =>
    Math.min(800_000, Math.ceil(seconds * batch * 900 + 20_000));
  // The pgbench turns of the side by side: room for 150,000 rows/s (the simplest claim passed 80,000 on a quiet
  // day, when the 800,000 rows above ran out before its 10 s and it was reported at the rows it had, 80,000).
  const pgbenchRows = Math.ceil(SECONDS * 150_000 + 20_000);
  const scenarios: { kind: Kind; label: string }[] = [
    { kind: 'keyed', label: `${KEYS} keys` },
    { kind: 'unkeyed', label: 'unkeyed' },
  ];
  for (const { kind, label } of SIDE_BY_SIDE_ONLY ? [] : scenarios) {
    for (const batch of [1, 10]) {
      await fill(kind, rowsFor(short, batch));
      const { rate, drained } = await claimAndSettle(batch, short);
      line(label, batch, rate, drained ? '  (table drained early)' : '');
    }
  }
  if (!SIDE_BY_SIDE_ONLY) {
    await fill('hot', rowsFor(short, 100));
    const hot = await claimAndSettle(100, short);
    line('hot key + 50 keys', 100, hot.rate, hot.drained ? '  (table drained early)' : '');

    await admin.query(`TRUNCATE ${t}`);
    const inserts = await insertRate(short);
    console.log(`insert        single row, ${WORKERS} writers        ${format(inserts).padStart(8)} rows/s`);
  }

  // Ours, pgbench on our SQL and pgbench on the simplest claim take turns on fresh tables, three rounds each, so a
  // change in the machine's load between runs does not decide the ratios; the medians are compared.
  console.log(
    `\nbatch 100, ${WORKERS} clients, ${SECONDS} s per run, in turns: ours (the store through Node), pgbench on our ` +
      'claim + markSent SQL, pgbench on the simplest claim + mark-sent (one table, no keys, skip locked, no order):',
  );
  const countSimple = async () =>
    (await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${simple} WHERE state = 'sent'`))
      .rows[0]?.n ?? 0;
  for (const { kind, label } of scenarios) {
    const ours: number[] = [];
    const oursCpu: number[] = [];
    const ourSql: number[] = [];
    const simplest: number[] = [];
    // Unkeyed only: the simplest claim's SQL on QueueBox's own table (its 17 columns and 4 indexes), the most any
    // claim of this table reaches in pgbench (no order, no lease, no token).
    const simplestOnOurs: number[] = [];
    // A turn that settled every row it was given ran out before its time: its rate is a floor, marked "≥".
    const ranOut = new Set<number>();
    const turn = (rate: number, rows: number) => {
      if (rate * SECONDS >= rows) ranOut.add(rate);
      return rate;
    };
    for (let round = 0; round < 3; round++) {
      await fill(kind, rowsFor(SECONDS, 100));
      const run = await claimAndSettle(100, SECONDS);
      ours.push(run.rate);
      if (run.drained) ranOut.add(run.rate);
      oursCpu.push(run.nodeCpuMsPer1000);
      await fill(kind, pgbenchRows);
      ourSql.push(turn(await runPgbench(pgbenchScript(100, kind), SECONDS, countSent), pgbenchRows));
      await fillSimple(pgbenchRows);
      simplest.push(turn(await runPgbench(simplePgbenchScript(100), SECONDS, countSimple), pgbenchRows));
      if (kind === 'unkeyed') {
        await fill(kind, pgbenchRows);
        simplestOnOurs.push(
          turn(
            await runPgbench(simplePgbenchScript(100, t, ' AND key IS NULL'), SECONDS, countSent),
            pgbenchRows,
          ),
        );
      }
    }
    const target = kind === 'keyed' ? 0.6 : 0.7;
    const ratio = median(ours) / median(simplest);
    const list = (values: number[]) =>
      `${values.map((v) => (ranOut.has(v) ? '≥ ' : '') + format(v)).join(' / ')} (median ${format(median(values))})`;
    console.log(
      `${label.padEnd(10)} ours ${list(ours)}   pgbench our SQL ${list(ourSql)}   simplest ${list(simplest)} rows/s\n` +
        `${''.padEnd(10)} ours ÷ simplest ${ratio.toFixed(2)} (target ≥ ${target}: ${ratio >= target ? 'met' : 'not met'}), ` +
        `our SQL ÷ simplest ${(median(ourSql) / median(simplest)).toFixed(2)}, ours ÷ our SQL ${(median(ours) / median(ourSql)).toFixed(2)}; ` +
        `Node's own CPU in ours ${median(oursCpu).toFixed(1)} ms per 1,000 rows` +
        (simplestOnOurs.length > 0
          ? `\n${''.padEnd(10)} the simplest SQL on QueueBox's table (the table's own limit) ${list(simplestOnOurs)} rows/s, ` +
            `÷ simplest ${(median(simplestOnOurs) / median(simplest)).toFixed(2)}`
          : ''),
    );
  }
  await admin.query(`DROP TABLE IF EXISTS ${simple}`);

  if (!SIDE_BY_SIDE_ONLY) await enqueueCost();
}

/**
 * What `enqueue` adds to an application's transaction: on one connection, BEGIN; the write; COMMIT, many times.
 * Timed is the write alone (from sending it to its answer), for a plain single-row INSERT into the outbox and for
 * enqueue() with and without a key (a keyed enqueue takes the key's lock first: two statements).
 */
async function enqueueCost(): Promise<void> {
  const client = await pool.connect();
  const rounds = Math.max(500, Math.round(SECONDS * 100));
  const plain = `INSERT INTO ${t} (topic, key, payload, max_attempts) VALUES ($1, $2, $3::jsonb, 10)`;
  const ways: Record<string, (i: number) => Promise<unknown>> = {
    'plain INSERT': (i) =>
      client.query(plain, ['orders.created', `key-${i % KEYS}`, JSON.stringify({ order: i })]),
    'enqueue, unkeyed': (i) =>
      enqueue(client, { topic: 'orders.created', payload: { order: i } }, { schema }),
    'enqueue, keyed': (i) =>
      enqueue(client, { topic: 'orders.created', key: `key-${i % KEYS}`, payload: { order: i } }, { schema }),
  };
  const times = new Map<string, number[]>(Object.keys(ways).map((name) => [name, []]));
  try {
    await admin.query(`TRUNCATE ${t}`);
    // Interleaved, so the three see the same load; the first rounds warm up the connection and the JIT.
    for (let i = 0; i < rounds + 100; i++) {
      for (const [name, write] of Object.entries(ways)) {
        await client.query('BEGIN');
        const started = performance.now();
        await write(i);
        const took = performance.now() - started;
        await client.query('COMMIT');
        if (i >= 100) times.get(name)?.push(took);
      }
    }
  } finally {
    client.release();
  }
  const quantile = (values: number[], q: number) => {
    const sorted = [...values].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  };
  const base = median(times.get('plain INSERT') ?? []);
  console.log(
    `\ntime one write adds to a transaction (${rounds} transactions each, interleaved, one connection):`,
  );
  for (const [name, values] of times) {
    const m = median(values);
    console.log(
      `${name.padEnd(18)} median ${m.toFixed(3)} ms  p90 ${quantile(values, 0.9).toFixed(3)} ms  p99 ${quantile(values, 0.99).toFixed(3)} ms  ` +
        `× plain ${(m / base).toFixed(2)}${name === 'plain INSERT' ? '' : m / base <= 2 ? ' (within 2×)' : ' (over 2×)'}`,
    );
  }
}

main()
  .catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  })
  .finally(async () => {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await store.close();
    await admin.end();
  });
