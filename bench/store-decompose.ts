/**
 * Where the store's claim + settle loses to the simplest claim (issue 16 item 2): pgbench runs variants of the
 * two statements on variants of the table, each on a freshly filled, vacuumed and checkpointed table, and reports
 * rows settled per second, WAL bytes per row (pg_current_wal_lsn before and after) and the CPU of pgbench's own
 * PostgreSQL backends per 1,000 rows (/proc/<pid>/stat, backends found by application_name, sampled every 200 ms
 * so the last fraction of a second is missed alike by every variant). Then EXPLAIN (ANALYZE, BUFFERS) of each
 * variant's claim and settle on a table of the same shape. See bench/README.md, "Session 5: store".
 *
 *   npx tsx bench/store-decompose.ts
 *
 * Environment: QUEUEBOX_BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test),
 * QUEUEBOX_BENCH_SECONDS (per run, default 15), QUEUEBOX_BENCH_WORKERS (pgbench clients, default 4),
 * QUEUEBOX_BENCH_ROUNDS (default 1), QUEUEBOX_BENCH_VARIANTS (comma-separated names, default all),
 * QUEUEBOX_BENCH_PREPARED=1 (pgbench -M prepared: no planning per statement), PGBENCH (default /usr/bin/pgbench).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CLAIM_COMMITS_ASYNCHRONOUSLY,
  claimOutboxStatement,
  claimUnkeyedOutboxStatement,
  createPgExecutor,
  HEAD_CLAIM_EVERY,
  markOutboxSentStatement,
  runMigrations,
} from '@queuebox/store-postgres';
import pg from 'pg';

const POSTGRES_URL = process.env.QUEUEBOX_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SECONDS = Number(process.env.QUEUEBOX_BENCH_SECONDS ?? 15);
const WORKERS = Number(process.env.QUEUEBOX_BENCH_WORKERS ?? 4);
const ROUNDS = Number(process.env.QUEUEBOX_BENCH_ROUNDS ?? 1);
const PGBENCH = process.env.PGBENCH ?? '/usr/bin/pgbench';
const ONLY = process.env.QUEUEBOX_BENCH_VARIANTS?.split(',').map((s) => s.trim());
const ROWS = Number(process.env.QUEUEBOX_BENCH_ROWS ?? 800_000);
const LEASE_MS = 300_000;
const REPEATS = Number(process.env.QUEUEBOX_BENCH_REPEATS ?? 20);
const ZERO = '00000000-0000-4000-8000-000000000000';
/** pgbench's extended protocol with prepared statements (planned once per connection) instead of the simple one. */
const PREPARED = process.env.QUEUEBOX_BENCH_PREPARED === '1';

const schema = `decompose_${randomBytes(4).toString('hex')}`;
const admin = new pg.Client({ connectionString: POSTGRES_URL });
const t = `"${schema}".outbox`;
const simple = `"${schema}".simple_queue`;

type Table = 'simple' | 'ours';
type Index = 'due_unkeyed' | 'active_key' | 'lease' | 'state_updated';
const ALL_INDEXES: readonly Index[] = ['due_unkeyed', 'active_key', 'lease', 'state_updated'];

interface Variant {
  readonly name: string;
  readonly what: string;
  readonly table: Table;
  readonly keyed?: boolean;
  /** Indexes of the outbox beside the primary key (default: all four). */
  readonly indexes?: readonly Index[];
  readonly fillfactor?: number;
  /** pgbench script text: a claim ending in `\gset` of `ids` (and `token`), then a settle. */
  readonly script: () => string;
}

/** Index names of the outbox that migrations/postgres creates, by the short names the variants use. */
const INDEX_NAMES: Record<Index, string> = {
  due_unkeyed: 'outbox_due_unkeyed',
  active_key: 'outbox_active_key',
  lease: 'outbox_lease',
  state_updated: 'outbox_state_updated',
};

/**
 * The outbox as the migrations make it (a fresh schema, `runMigrations`), then without the indexes a variant
 * leaves out and with its fillfactor, so the table measured is the one users get, not a copy of its DDL.
 */
async function createOutbox(indexes: readonly Index[], fillfactor?: number): Promise<void> {
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 1 });
  try {
    await runMigrations(createPgExecutor(pool), { schema });
  } finally {
    await pool.end();
  }
  for (const index of ALL_INDEXES) {
    if (!indexes.includes(index)) await admin.query(`DROP INDEX "${schema}".${INDEX_NAMES[index]}`);
  }
  if (fillfactor) await admin.query(`ALTER TABLE ${t} SET (fillfactor = ${fillfactor})`);
}

async function fill(v: Variant): Promise<void> {
  if (v.table === 'simple') {
    await admin.query(`DROP TABLE IF EXISTS ${simple}`);
    await admin.query(`CREATE TABLE ${simple} (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, payload jsonb NOT NULL, state text NOT NULL DEFAULT 'pending')`);
    await admin.query(`CREATE INDEX ON ${simple} (id) WHERE state = 'pending'`);
    await admin.query(
      `INSERT INTO ${simple} (payload)
       SELECT jsonb_build_object('order', g, 'note', 'benchmark payload of modest size') FROM generate_series(1, $1::int) g`,
      [ROWS],
    );
    await admin.query(`VACUUM ANALYZE ${simple}`);
    return;
  }
  await createOutbox(v.indexes ?? ALL_INDEXES, v.fillfactor);
  const key = v.keyed ? `'key-' || lpad((g % 1000)::text, 4, '0')` : 'NULL';
  await admin.query(
    `INSERT INTO ${t} (topic, key, payload, headers, max_attempts, scheduled_at)
     SELECT 'orders.created', ${key}, jsonb_build_object('order', g, 'note', 'benchmark payload of modest size'),
            '{"content-type":"application/json"}', 10, now() - interval '1 minute'
     FROM generate_series(1, $1::int) g`,
    [ROWS],
  );
  await admin.query(`VACUUM ANALYZE ${t}`);
}

const oneLine = (sql: string) => sql.replace(/\s+/g, ' ').trim();

function inline(text: string, values: Record<number, string>): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => {
    const value = values[Number(n)];
    if (value === undefined) throw new Error(`No value for $${n}`);
    return value;
  });
}

/** The simplest claim on `table` (`where` narrows the pending rows; `order` orders them). */
function simpleClaim(table: string, where = '', order = ''): string {
  return `WITH c AS (SELECT id FROM ${table} WHERE state = 'pending'${where}${order} LIMIT 100 FOR UPDATE SKIP LOCKED), u AS (UPDATE ${table} q SET state = 'processing' FROM c WHERE q.id = c.id RETURNING q.id, q.payload) SELECT coalesce(array_agg(id), '{}') AS ids, '${ZERO}' AS token FROM u \\gset`;
}

function simpleSent(table: string): string {
  return `UPDATE ${table} SET state = 'sent' WHERE id = ANY (':ids'::bigint[]) AND state = 'processing';`;
}

/** Our claim statement, its final SELECT folded into one row for `\gset`. */
function ourClaim(): string {
  const claim = claimOutboxStatement(schema, {
    batchSize: 100,
    unkeyedReserve: 50,
    leaseMs: LEASE_MS,
    startAfterKey: null,
    keyScanLimit: 1000,
    claimToken: '00000000-0000-4000-8000-000000000000',
  });
  const finalSelect = claim.text.lastIndexOf('SELECT claimed.*');
  const text = `${inline(claim.text.slice(0, finalSelect), {
    1: '100',
    2: '50',
    3: `nullif(':start', '-')::text`,
    4: '1000',
    5: String(LEASE_MS),
    6: '(SELECT gen_random_uuid())',
  })}SELECT coalesce(max(cursor.next_key), '-') AS start,
       coalesce(array_agg(claimed.id) FILTER (WHERE claimed.id IS NOT NULL), '{}') AS ids,
       coalesce(min(claimed.claim_token::text), '${ZERO}') AS token
FROM cursor LEFT JOIN claimed ON true ${CLAIM_COMMITS_ASYNCHRONOUSLY}`;
  return `${oneLine(text)} \\gset`;
}

/**
 * The claim of a table without active keys (`claimUnkeyedOutboxStatement`): no key walk, reserve or cursor. `head`
 * starts every claim at the oldest due row (the store's claim until session 7, variant (c)); `store` starts as the
 * store does, every `HEAD_CLAIM_EVERY`-th claim at the oldest row and the others at a random point (variant (r);
 * before session 7 a separate `spreadUnkeyedClaim` measured the same idea).
 */
function ourUnkeyedClaim(start: 'head' | 'store'): string {
  // The statement from the oldest row (start 0) and the one from a random point (any other start).
  const line = (from: number, at: string) => {
    const claim = claimUnkeyedOutboxStatement(schema, {
      batchSize: 100,
      leaseMs: LEASE_MS,
      claimToken: ZERO,
      start: from,
    });
    const finalSelect = claim.text.lastIndexOf('SELECT claimed.*');
    const text = `${inline(claim.text.slice(0, finalSelect), {
      1: String(LEASE_MS),
      2: '(SELECT gen_random_uuid())',
      3: at,
    })}SELECT coalesce(array_agg(claimed.id) FILTER (WHERE claimed.id IS NOT NULL), '{}') AS ids,
       coalesce(min(claimed.claim_token::text), '${ZERO}') AS token
FROM active LEFT JOIN claimed ON true ${CLAIM_COMMITS_ASYNCHRONOUSLY}`;
    return `${oneLine(text)} \\gset`;
  };
  if (start === 'head') return line(0, '0');
  return [
    `\\set head random(0, ${HEAD_CLAIM_EVERY - 1})`,
    '\\set r random(1, 999999)',
    '\\if :head = 0',
    line(0, '0'),
    '\\else',
    line(0.5, ':r / 1000000.0'),
    '\\endif',
  ].join('\n');
}

function ourSent(): string {
  const sent = markOutboxSentStatement(schema, [
    { id: '1', claimToken: '00000000-0000-4000-8000-000000000000', destination: 'bench' },
  ]);
  return `${oneLine(inline(sent.text, { 1: `':ids'::bigint[]`, 2: `':token'::uuid`, 3: `'bench'` }))};`;
}

const VARIANTS: readonly Variant[] = [
  {
    name: 'simplest',
    what: 'simplest claim + mark-sent, simplest table (3 columns; PK + pending index)',
    table: 'simple',
    script: () => `${simpleClaim(simple)}\n${simpleSent(simple)}\n`,
  },
  {
    name: 'a',
    what: '(a) simplest SQL on our table, all 4 indexes',
    table: 'ours',
    script: () => `${simpleClaim(t, ' AND key IS NULL')}\n${simpleSent(t)}\n`,
  },
  {
    name: 'b-lease',
    what: '(b) same, without outbox_lease',
    table: 'ours',
    indexes: ['due_unkeyed', 'active_key', 'state_updated'],
    script: () => `${simpleClaim(t, ' AND key IS NULL')}\n${simpleSent(t)}\n`,
  },
  {
    name: 'b-state',
    what: '(b) same, without outbox_state_updated',
    table: 'ours',
    indexes: ['due_unkeyed', 'active_key', 'lease'],
    script: () => `${simpleClaim(t, ' AND key IS NULL')}\n${simpleSent(t)}\n`,
  },
  {
    name: 'b-key',
    what: '(b) same, without outbox_active_key',
    table: 'ours',
    indexes: ['due_unkeyed', 'lease', 'state_updated'],
    script: () => `${simpleClaim(t, ' AND key IS NULL')}\n${simpleSent(t)}\n`,
  },
  {
    name: 'b-both',
    what: '(b) same, PK + outbox_due_unkeyed only (the simplest index set, our row width)',
    table: 'ours',
    indexes: ['due_unkeyed'],
    script: () => `${simpleClaim(t, ' AND key IS NULL')}\n${simpleSent(t)}\n`,
  },
  {
    name: 'g',
    what: '(g) as (a), ORDER BY scheduled_at, id',
    table: 'ours',
    script: () => `${simpleClaim(t, ' AND key IS NULL', ' ORDER BY scheduled_at, id')}\n${simpleSent(t)}\n`,
  },
  {
    name: 'c',
    what: '(c) our claim without key walk/reserve/cursor (claimUnkeyedOutboxStatement), from the oldest row + our markSent',
    table: 'ours',
    script: () => `${ourUnkeyedClaim('head')}\n${ourSent()}\n`,
  },
  {
    name: 'r',
    what: '(r) as (c), started as the store starts it (random point, every 4th from the oldest row) + our markSent',
    table: 'ours',
    script: () => `${ourUnkeyedClaim('store')}\n${ourSent()}\n`,
  },
  {
    name: 'c-ff70',
    what: '(c) with the table at fillfactor 70',
    table: 'ours',
    fillfactor: 70,
    script: () => `${ourUnkeyedClaim('head')}\n${ourSent()}\n`,
  },
  {
    name: 'ours',
    what: 'our claim + our markSent (one token), unkeyed',
    table: 'ours',
    script: () => `${ourClaim()}\n${ourSent()}\n`,
  },
  {
    name: 'ours-ff70',
    what: 'our claim + our markSent, unkeyed, table fillfactor 70',
    table: 'ours',
    fillfactor: 70,
    script: () => `${ourClaim()}\n${ourSent()}\n`,
  },
  {
    name: 'd',
    what: '(d) our claim + the simplest mark-sent (state only)',
    table: 'ours',
    script: () => `${ourClaim()}\n${simpleSent(t)}\n`,
  },
  {
    name: 'ours-keyed',
    what: 'our claim + our markSent, 1,000 keys',
    table: 'ours',
    keyed: true,
    script: () => `${ourClaim()}\n${ourSent()}\n`,
  },
];

function readCpuTicks(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return undefined;
  }
}

async function countSettled(v: Variant): Promise<number> {
  const table = v.table === 'simple' ? simple : t;
  const { rows } = await admin.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${table} WHERE state = 'sent'`,
  );
  return rows[0]?.n ?? 0;
}

interface Rate {
  rate: number;
  cpuMsPer1000: number;
  /** Index entries the run's scans returned per settled row, over all the table's indexes (pg_stat_user_indexes). */
  indexReadsPerRow: number;
}

/** Index entries returned by scans of `table`'s indexes so far (the backends report theirs when they exit). */
async function indexReads(table: string): Promise<number> {
  await new Promise((r) => setTimeout(r, 700));
  const { rows } = await admin.query<{ n: string }>(
    `SELECT coalesce(sum(idx_tup_read), 0)::text AS n FROM pg_stat_user_indexes WHERE relid = $1::regclass`,
    [table],
  );
  return Number(rows[0]?.n ?? 0);
}

/** pgbench with `clients` on a fresh table: settled rows per second and its backends' CPU per 1,000 rows. */
async function run(v: Variant, clients: number): Promise<Rate> {
  await fill(v);
  await admin.query('CHECKPOINT');
  const table = v.table === 'simple' ? simple : t;
  const readsBefore = await indexReads(table);
  const appName = `decompose-${randomBytes(3).toString('hex')}`;
  const dir = mkdtempSync(join(tmpdir(), 'queuebox-decompose-'));
  const script = join(dir, 'script.sql');
  // In prepared mode pgbench turns each :variable into a parameter, so the quotes around the text ones go.
  const text = PREPARED ? v.script().replace(/'(:ids|:token|:start)'/g, '$1') : v.script();
  writeFileSync(script, text);
  const url = new URL(POSTGRES_URL);
  const cpu = new Map<number, number>();
  const child = spawn(
    PGBENCH,
    [
      '-n',
      ...(PREPARED ? ['-M', 'prepared'] : []),
      '-f',
      script,
      '-c',
      String(clients),
      '-j',
      String(Math.min(2, clients)),
      '-T',
      String(SECONDS),
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
    { env: { ...process.env, PGAPPNAME: appName } },
  );
  let out = '';
  child.stdout.on('data', (d) => {
    out += String(d);
  });
  child.stderr.on('data', (d) => {
    out += String(d);
  });
  const sampler = new pg.Client({ connectionString: POSTGRES_URL });
  await sampler.connect();
  let done = false;
  const exited = new Promise<number>((resolve) => child.on('exit', (code) => resolve(code ?? 1)));
  void exited.then(() => {
    done = true;
  });
  while (!done) {
    const { rows } = await sampler.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE application_name = $1',
      [appName],
    );
    for (const { pid } of rows) {
      const ticks = readCpuTicks(pid);
      if (ticks !== undefined) cpu.set(pid, ticks);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  await sampler.end();
  const code = await exited;
  rmSync(dir, { recursive: true, force: true });
  if (code !== 0) throw new Error(`pgbench failed (${v.name}): ${out}`);
  const failed = /number of failed transactions: (\d+)/.exec(out)?.[1];
  if (failed && failed !== '0') throw new Error(`pgbench had ${failed} failed transactions (${v.name})`);
  const settled = await countSettled(v);
  if (settled >= ROWS) console.log(`  (${v.name}: table drained, rate is a lower bound)`);
  const ticks = [...cpu.values()].reduce((a, b) => a + b, 0);
  const reads = (await indexReads(table)) - readsBefore;
  return {
    rate: settled / SECONDS,
    cpuMsPer1000: ((ticks * 10) / Math.max(1, settled)) * 1000,
    indexReadsPerRow: reads / Math.max(1, settled),
  };
}

interface Work {
  rows: number;
  wal: number;
  fpi: number;
  hit: number;
  dirtied: number;
  claimPlanMs: number[];
  claimExecMs: number[];
  settlePlanMs: number[];
  settleExecMs: number[];
}

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

/**
 * One client, `REPEATS` claims of 100 and their settles, each under EXPLAIN (ANALYZE, BUFFERS, WAL, FORMAT JSON):
 * WAL bytes, full-page images and buffers of the statements themselves (not the cluster's), and planning and
 * execution times.
 */
async function measure(v: Variant): Promise<Work> {
  await fill(v);
  // The statements, with the `\else` branch of an `\if` (the store's claim from a random point: halfway here).
  let branch: 'none' | 'if' | 'else' = 'none';
  const [claim = '', settle = ''] = v
    .script()
    .split('\n')
    .filter((l) => {
      if (l.startsWith('\\if')) branch = 'if';
      else if (l.startsWith('\\else')) branch = 'else';
      else if (l.startsWith('\\endif')) branch = 'none';
      else return l.trim() !== '' && !l.startsWith('\\set') && branch !== 'if';
      return false;
    })
    .map((l) => l.replace(/(?<!:):r\b/g, '500000').replace(/(?<!:):head\b/g, '1'));
  const table = v.table === 'simple' ? simple : t;
  const work: Work = {
    rows: 0,
    wal: 0,
    fpi: 0,
    hit: 0,
    dirtied: 0,
    claimPlanMs: [],
    claimExecMs: [],
    settlePlanMs: [],
    settleExecMs: [],
  };
  const explain = async (sql: string) => {
    const { rows } = await admin.query<{ 'QUERY PLAN': [Record<string, unknown>] }>(
      `EXPLAIN (ANALYZE, BUFFERS, WAL, FORMAT JSON) ${sql}`,
    );
    const top = rows[0]?.['QUERY PLAN'][0] ?? {};
    const plan = (top.Plan ?? {}) as Record<string, number>;
    work.wal += plan['WAL Bytes'] ?? 0;
    work.fpi += plan['WAL FPI'] ?? 0;
    work.hit += (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0);
    work.dirtied += plan['Shared Dirtied Blocks'] ?? 0;
    return { plan: Number(top['Planning Time'] ?? 0), exec: Number(top['Execution Time'] ?? 0) };
  };
  for (let i = 0; i < REPEATS + 1; i++) {
    const c = await explain(claim.replace(/\s*\\gset$/, '').replace(/:start/g, '-'));
    const { rows } = await admin.query<{ ids: string; token: string; n: number }>(
      `SELECT coalesce(array_agg(id), '{}')::text AS ids, count(*)::int AS n,
              coalesce(min(${v.table === 'simple' ? 'NULL' : 'claim_token::text'}), '${ZERO}') AS token
       FROM ${table} WHERE state = 'processing'`,
    );
    const s = await explain(
      settle
        .replace(/;$/, '')
        .replace(/:ids/g, rows[0]?.ids ?? '{}')
        .replace(/:token/g, rows[0]?.token ?? ZERO),
    );
    if (i === 0) {
      // The first statements on a new table load its catalog entries; they are not counted.
      Object.assign(work, { rows: 0, wal: 0, fpi: 0, hit: 0, dirtied: 0 });
      continue;
    }
    work.rows += rows[0]?.n ?? 0;
    work.claimPlanMs.push(c.plan);
    work.claimExecMs.push(c.exec);
    work.settlePlanMs.push(s.plan);
    work.settleExecMs.push(s.exec);
  }
  return work;
}

async function main(): Promise<void> {
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  const variants = VARIANTS.filter((v) => !ONLY || ONLY.includes(v.name));
  try {
    console.log(
      `Per row, one client, ${REPEATS} claims of 100 + settles under EXPLAIN (ANALYZE, BUFFERS, WAL); ` +
        `then pgbench ${SECONDS} s with 1 and ${WORKERS} clients, ${ROUNDS} round(s), ${ROWS} rows per fill.`,
    );
    console.log(
      'variant      WAL B/row  FPI/1k  buffers/row  dirtied/row  claim plan / exec ms  settle plan / exec ms',
    );
    for (const v of variants) {
      const w = await measure(v);
      const per = (x: number) => x / Math.max(1, w.rows);
      console.log(
        `${v.name.padEnd(11)} ${Math.round(per(w.wal)).toString().padStart(10)} ${(per(w.fpi) * 1000).toFixed(0).padStart(7)} ` +
          `${per(w.hit).toFixed(1).padStart(12)} ${per(w.dirtied).toFixed(2).padStart(12)} ` +
          `${median(w.claimPlanMs).toFixed(3).padStart(10)} / ${median(w.claimExecMs).toFixed(3).padStart(6)}  ` +
          `${median(w.settlePlanMs).toFixed(3).padStart(10)} / ${median(w.settleExecMs).toFixed(3).padStart(6)}  ${v.what}`,
      );
    }
    if (SECONDS > 0) {
      console.log(
        `\nvariant      1 client: rows/s, PG CPU ms/1k rows, index reads/row   ${WORKERS} clients: the same   load` +
          (PREPARED ? '   (pgbench -M prepared)' : ''),
      );
      for (let round = 0; round < ROUNDS; round++) {
        for (const v of variants) {
          const load = readFileSync('/proc/loadavg', 'utf8').split(' ')[0];
          const one = await run(v, 1);
          const many = await run(v, WORKERS);
          console.log(
            `${v.name.padEnd(11)} ${Math.round(one.rate).toLocaleString('en-US').padStart(8)} ${one.cpuMsPer1000.toFixed(1).padStart(8)} ${one.indexReadsPerRow.toFixed(2).padStart(6)}` +
              `            ${Math.round(many.rate).toLocaleString('en-US').padStart(8)} ${many.cpuMsPer1000.toFixed(1).padStart(8)} ${many.indexReadsPerRow.toFixed(2).padStart(6)}            ${load}`,
          );
        }
      }
    }
  } finally {
    await admin.query(`DROP SCHEMA ${schema} CASCADE`);
    await admin.end();
  }
}

await main();
