/**
 * A migration that builds indexes on both tables while the application and the relay write to them, on a real
 * PostgreSQL. The relay's forward writes inbox then outbox in one transaction; 0007 and 0008 built an outbox index
 * and then an inbox one. With an application's transaction holding the outbox and a forward queued behind the
 * migration, the two deadlocked and the migration was the victim (found from outside: the start or the deploy
 * failed). The migrator now locks inbox, then outbox, before each migration's SQL: the forward waits instead.
 */
import type { MigrationProgress } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName, testPostgresUrl } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, expect, it } from 'vitest';
import { createPgExecutor, MIGRATIONS, runMigrations } from '../src/index.ts';

const schema = freshSchemaName('pg_mig_writers');
dropSchemasAfterPass(() => [schema]);

/** Sessions that check for a deadlock 100 ms into a lock wait (1 s by default), so the test is short. */
function session(name: string): pg.ClientConfig {
  return {
    connectionString: testPostgresUrl(),
    application_name: `${name}-${schema}`.slice(0, 63),
    options: '-c deadlock_timeout=100',
  };
}

const pool = new pg.Pool({ ...session('migrator'), max: 2 });
const executor = createPgExecutor(pool);
const app = new pg.Client(session('app'));
const relay = new pg.Client(session('relay'));
const watcher = new pg.Client(session('watcher'));
afterAll(async () => {
  await Promise.all([app.end(), relay.end(), watcher.end()]);
  await executor.close();
});

/** Resolves once the session named `name` waits for a lock. */
async function waitingForLock(name: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const { rows } = await watcher.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
      [`${name}-${schema}`.slice(0, 63)],
    );
    if ((rows[0]?.n ?? 0) > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`${name} never waited for a lock`);
}

it('migrates while an application holds the outbox and a forward writes inbox then outbox: no deadlock', async () => {
  // Prepare: the schema at 0006; one inbox row for the forward to mark.
  await Promise.all([app.connect(), relay.connect(), watcher.connect()]);
  const before = MIGRATIONS.filter((m) => m.version <= 6);
  await runMigrations(executor, { schema, migrations: before });
  const t = (table: string) => `"${schema}".${table}`;
  const {
    rows: [row],
  } = await app.query<{ id: string }>(
    `INSERT INTO ${t('inbox')} (source, idempotency_key, payload, max_attempts) VALUES ('s', 'k', '{}', 3) RETURNING id::text AS id`,
  );
  // An application's transaction writes an outbox row and stays open.
  await app.query('BEGIN');
  await app.query(`INSERT INTO ${t('outbox')} (topic, payload, max_attempts) VALUES ('app', '{}', 3)`);

  // Act: the migration starts and waits for the outbox...
  const events: MigrationProgress[] = [];
  const migrating = runMigrations(executor, { schema, onMigration: (p) => events.push(p) });
  await waitingForLock('migrator');
  // ...a forward marks its inbox row and inserts into the outbox, as the relay's does in one transaction...
  const forwarding = (async () => {
    await relay.query('BEGIN');
    await relay.query(`UPDATE ${t('inbox')} SET state = 'processed', updated_at = now() WHERE id = $1`, [
      row?.id,
    ]);
    await relay.query(
      `INSERT INTO ${t('outbox')} (topic, payload, max_attempts) VALUES ('forwarded', '{}', 3)`,
    );
    await relay.query('COMMIT');
  })();
  await waitingForLock('relay');
  // ...past its own deadlock check, then the application commits.
  await new Promise((resolve) => setTimeout(resolve, 300));
  await app.query('COMMIT');
  const report = await migrating;
  await forwarding;

  // Assess: both migrations applied at the first run, and the forward committed after them.
  expect(report.current).toBe(Math.max(...MIGRATIONS.map((m) => m.version)));
  expect(events.filter((e) => e.phase === 'retrying')).toEqual([]);
  const { rows: topics } = await watcher.query<{ topic: string }>(
    `SELECT topic FROM ${t('outbox')} ORDER BY id`,
  );
  expect(topics.map((r) => r.topic)).toEqual(['app', 'forwarded']);
}, 60_000);
