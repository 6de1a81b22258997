// AUDIT (temporary, deleted at the end): requeue of a dead head row vs a concurrent claim with an older snapshot.
import { openPostgresStore } from '@queuebox/store-postgres';
import pg from 'pg';

const URL = 'postgres://postgres@127.0.0.1:5432/test';
const schema = process.env.S ?? 'audit_order_1';
const ITER = Number(process.env.ITER ?? 200);
const FILLER = Number(process.env.FILLER ?? 900);
const t = `"${schema}".outbox`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const store = await openPostgresStore({ url: URL, schema, poolSize: 4 });
await store.migrate();
const db = new pg.Pool({ connectionString: URL, max: 4 });
await db.query(`TRUNCATE ${t}`);
// Filler keys: pending but not due, so every claim's walk visits them (no lock) before reaching the 'z' keys.
await db.query(
  `INSERT INTO ${t} (topic, key, payload, headers, max_attempts, scheduled_at)
   SELECT 'o.x', 'a' || lpad(g::text, 5, '0'), '{}', '{}', 10, now() + interval '1 day' FROM generate_series(1, $1::int) g`,
  [FILLER],
);
await db.query(`VACUUM ANALYZE ${t}`);

// time one claim that finds nothing claimable
{
  const s = performance.now();
  await store.outbox.claim({ batchSize: 10, leaseMs: 60000 });
  await store.outbox.claim({ batchSize: 10, leaseMs: 60000 });
  console.log('empty claim ms', (performance.now() - s) / 2);
}

let violations = 0;
let bothInFlight = 0;
const examples: string[] = [];
for (let i = 0; i < ITER; i++) {
  const key = `z${String(i).padStart(5, '0')}`;
  const x = await db.query(
    `INSERT INTO ${t} (topic, key, payload, headers, max_attempts) VALUES ('o.x', $1, '{"n":1}', '{}', 10) RETURNING id::text`,
    [key],
  );
  const y = await db.query(
    `INSERT INTO ${t} (topic, key, payload, headers, max_attempts) VALUES ('o.x', $1, '{"n":2}', '{}', 10) RETURNING id::text`,
    [key],
  );
  const X = x.rows[0].id as string;
  const Y = y.rows[0].id as string;
  await db.query(`UPDATE ${t} SET state='dead', attempt=10, last_error='x' WHERE id=$1`, [X]);
  const delay = Math.random() * 12;
  const [claimed, rq] = await Promise.all([
    store.outbox.claim({ batchSize: 10, leaseMs: 60000 }),
    (async () => {
      await sleep(delay);
      return store.admin.requeue('outbox', { ids: [X] });
    })(),
  ]);
  const gotY = claimed.some((r) => r.id === Y);
  const xs = (await db.query(`SELECT state FROM ${t} WHERE id=$1`, [X])).rows[0].state;
  if (gotY && xs === 'pending') {
    violations++;
    // The next claim now takes X while Y (the later row) is still processing.
    const next = await store.outbox.claim({ batchSize: 10, leaseMs: 60000 });
    const st = (await db.query(`SELECT id::text, state FROM ${t} WHERE key=$1 ORDER BY id`, [key])).rows;
    if (next.some((r) => r.id === X)) bothInFlight++;
    if (examples.length < 3)
      examples.push(
        `key ${key}: X=${X} requeued ${JSON.stringify(rq.ids)}, claim#1 took Y=${Y} while X pending; claim#2 took ${JSON.stringify(next.map((r) => r.id))}; states ${JSON.stringify(st)}`,
      );
  }
  // clean this key: everything to sent
  await db.query(`UPDATE ${t} SET state='sent', claim_token=NULL, lease_until=NULL WHERE key=$1`, [key]);
}
console.log(JSON.stringify({ ITER, violations, bothInFlight, examples }, null, 1));
await store.close();
await db.end();
