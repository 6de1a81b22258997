/**
 * A new keyed row beside many keys whose head is not due (docs/design.md §5, "Beyond the walk"): how many claims
 * (polls) it takes before the row is claimed, and what one claim costs, on PostgreSQL.
 *
 *   ./node_modules/.bin/node bench/keyed-walk.ts
 *
 * Fills a fresh schema with QUEUEBOX_BENCH_KEYS keys (default 100000) whose one row is scheduled an hour ahead, then
 * 20 times writes a row of a new key and claims (batch 200) until it comes back. Each claim stands for one poll of
 * the outbox loop (100 ms by default), so polls × 100 ms is the row's wait. Prints the polls' median and maximum and
 * the claims' median time. Environment: QUEUEBOX_BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test).
 */
import pg from 'pg';
import { openPostgresStore } from '../packages/store-postgres/src/index.ts';

const url = process.env.QUEUEBOX_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const keys = Math.max(1, Math.floor(Number(process.env.QUEUEBOX_BENCH_KEYS ?? 100_000)));
const schema = `bench_keyed_walk_${process.pid}`;
const admin = new pg.Client(url);
await admin.connect();
const store = await openPostgresStore({ url, schema });
try {
  await store.migrate();
  await admin.query(
    `INSERT INTO "${schema}".outbox (topic, key, payload, max_attempts, scheduled_at)
     SELECT 't', 'later-' || lpad(g::text, 7, '0'), '{}', 3, now() + interval '1 hour' FROM generate_series(1, $1) g`,
    [keys],
  );
  await admin.query(`VACUUM ANALYZE "${schema}".outbox`);
  const polls: number[] = [];
  const claimMs: number[] = [];
  for (let i = 0; i < 20; i++) {
    // A key that sorts among the others at a random place.
    const key = `later-${String(Math.floor(Math.random() * keys)).padStart(7, '0')}x`;
    await store.outbox.insert([{ topic: 't', key, payload: { i }, maxAttempts: 3 }]);
    for (let n = 1; ; n++) {
      const started = performance.now();
      const rows = await store.outbox.claim({ batchSize: 200, leaseMs: 60_000 });
      claimMs.push(performance.now() - started);
      if (rows.length > 0 || n >= 1_000) {
        await store.outbox.markSent(
          rows.map((r) => ({ id: r.id, claimToken: r.claimToken ?? '', destination: 'd' })),
        );
        polls.push(n);
        break;
      }
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
  console.log(
    JSON.stringify({
      keys,
      pollsMedian: median(polls),
      pollsMax: Math.max(...polls),
      claimMsMedian: Number(median(claimMs).toFixed(2)),
      claims: claimMs.length,
    }),
  );
} finally {
  await store.close();
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
}
