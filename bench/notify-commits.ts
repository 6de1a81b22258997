/**
 * What the outbox's insert trigger costs the application's commits (migrations 0011 and 0012): transactions that each insert
 * a business row and `enqueue` one message, from many connections at once, on PostgreSQL.
 *
 *   ./node_modules/.bin/node bench/notify-commits.ts
 *
 * A notifying transaction commits only after every other notifying one, server-wide (PostgreSQL's async.c takes a
 * lock on "database 0" in PreCommit_Notify and holds it across the WAL flush), so commits that could share a WAL
 * flush go one by one. Three modes on one fresh schema, taking turns (QUEUEBOX_BENCH_ROUNDS rounds, default 3, of
 * QUEUEBOX_BENCH_SECONDS each, default 5):
 * - `always`: the trigger as before 0011, a notification on every insert (0010's function, put back for the turn);
 * - `nobody`: the current trigger (0012) with no listener, as on AWS (nothing listens there), and as a local runtime
 *   whose listener stepped aside under load (`bench/enqueue-beside-runtime.ts` measures that with a runtime);
 * - `listener`: the current trigger while a session holds the outbox channel's wake-up lock, as a local runtime's
 *   does while it is not busy.
 * Prints transactions/s and the p50 / p99 of a transaction (BEGIN … COMMIT) per mode and round.
 * QUEUEBOX_BENCH_CONNECTIONS (default 10) connections; QUEUEBOX_BENCH_POSTGRES_URL (default
 * postgres://postgres@127.0.0.1:5432/test).
 */
import pg from 'pg';
import { enqueue } from '../packages/client/src/index.ts';
import { openPostgresStore } from '../packages/store-postgres/src/index.ts';
import { MIGRATIONS as migrations } from '../packages/store-postgres/src/migrations.generated.ts';
import { OUTBOX_CHANNEL, wakeUpLockName } from '../packages/store-postgres/src/wake-up-channels.ts';

const url = process.env.QUEUEBOX_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const connections = Math.max(1, Math.floor(Number(process.env.QUEUEBOX_BENCH_CONNECTIONS ?? 10)));
const seconds = Math.max(1, Number(process.env.QUEUEBOX_BENCH_SECONDS ?? 5));
const rounds = Math.max(1, Math.floor(Number(process.env.QUEUEBOX_BENCH_ROUNDS ?? 3)));
const schema = `bench_notify_${process.pid}`;

const before = migrations.find((m) => m.version === 10);
// 0012 replaced 0011's function (an insert that notifies nobody keeps the lock shared until it commits).
const current = migrations.find((m) => m.version === 12);
if (!before || !current) throw new Error('migrations 0010 and 0012 are needed');

const admin = new pg.Client(url);
await admin.connect();
const store = await openPostgresStore({ url, schema });
const pool = new pg.Pool({ connectionString: url, max: connections });
const holder = new pg.Client(url);
await holder.connect();
try {
  await store.migrate();
  await admin.query(`CREATE TABLE "${schema}".orders (id bigserial PRIMARY KEY, body text NOT NULL)`);
  /** The trigger function of `sql` (a migration that only replaces it), installed in the bench schema. */
  const install = async (sql: string) => {
    await admin.query(`SET search_path = "${schema}"`);
    await admin.query(sql);
    await admin.query('RESET search_path');
  };
  const lockName = wakeUpLockName(schema, OUTBOX_CHANNEL);
  const results: Record<string, unknown>[] = [];
  const modes = ['always', 'nobody', 'listener'] as const;
  for (let round = 1; round <= rounds; round++) {
    for (const mode of round % 2 === 0 ? [...modes].reverse() : modes) {
      await install(mode === 'always' ? before.sql : current.sql);
      if (mode === 'listener') {
        await holder.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [lockName]);
      }
      const latencies: number[] = [];
      const end = performance.now() + seconds * 1000;
      await Promise.all(
        Array.from({ length: connections }, async (_, worker) => {
          const client = await pool.connect();
          try {
            for (let n = 0; performance.now() < end; n++) {
              const started = performance.now();
              await client.query('BEGIN');
              await client.query(`INSERT INTO "${schema}".orders (body) VALUES ($1)`, [
                `order ${worker}-${n}`,
              ]);
              await enqueue(client, { topic: 'orders.created', payload: { worker, n } }, { schema });
              await client.query('COMMIT');
              latencies.push(performance.now() - started);
            }
          } finally {
            client.release();
          }
        }),
      );
      if (mode === 'listener') {
        await holder.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [lockName]);
      }
      latencies.sort((a, b) => a - b);
      const at = (q: number) =>
        latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
      results.push({
        round,
        mode,
        connections,
        txPerSecond: Math.round(latencies.length / seconds),
        p50ms: Number(at(0.5).toFixed(2)),
        p99ms: Number(at(0.99).toFixed(2)),
      });
      console.log(JSON.stringify(results.at(-1)));
    }
  }
  for (const mode of modes) {
    const rates = results.filter((r) => r.mode === mode).map((r) => r.txPerSecond as number);
    console.log(
      JSON.stringify({ mode, meanTxPerSecond: Math.round(rates.reduce((a, b) => a + b, 0) / rates.length) }),
    );
  }
} finally {
  await holder.end();
  await pool.end();
  await store.close();
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
}
