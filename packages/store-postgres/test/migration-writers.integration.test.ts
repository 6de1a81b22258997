/**
 * Migrations that lock both tables while the application, the relay and the claims write to them, on a real
 * PostgreSQL. The relay's forward writes inbox then outbox in one transaction; 0002, 0004, 0007 and 0008 took
 * outbox first, and with an application's transaction holding the outbox and a forward queued behind the migration,
 * the two deadlocked and the migration was the victim (found from outside: the start or the deploy failed). Each
 * now locks inbox, then outbox, first, in the strongest mode it takes: a generic weaker lock taken before every
 * migration deadlocked instead with a claim holding its read lock (0004's DROP INDEX asked for more later).
 */
import { randomUUID } from 'node:crypto';
import type { MigrationProgress } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName, testPostgresUrl } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPgExecutor, MIGRATIONS, runMigrations } from '../src/index.ts';

const schemas: string[] = [];
dropSchemasAfterPass(() => schemas);

/** Sessions that check for a deadlock 100 ms into a lock wait (1 s by default), so the test is short. */
const RUN = randomUUID().slice(0, 8);

function session(name: string): pg.ClientConfig {
  return {
    connectionString: testPostgresUrl(),
    application_name: `qb-${name}-${RUN}`,
    options: '-c deadlock_timeout=100',
  };
}

const watcher = new pg.Client(session('watcher'));
beforeAll(() => watcher.connect());
afterAll(() => watcher.end());

/** Resolves once the session named `name` waits for a lock. */
async function waitingForLock(name: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const { rows } = await watcher.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
      [`qb-${name}-${RUN}`],
    );
    if ((rows[0]?.n ?? 0) > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`${name} never waited for a lock`);
}

/** What the second writer does, in one transaction, while the migration waits for the application. */
const WRITERS = {
  // The relay's forward: its inbox row processed, then an outbox row inserted.
  forward: (t: (table: string) => string) => [
    `UPDATE ${t('inbox')} SET state = 'processed', updated_at = now() WHERE idempotency_key = 'k'`,
    `INSERT INTO ${t('outbox')} (topic, payload, max_attempts) VALUES ('forwarded', '{}', 3)`,
  ],
  // A claim as the outbox's and the relay's are: rows read and locked in a CTE, then updated.
  'outbox claim': (t: (table: string) => string) => [
    `WITH c AS (SELECT id FROM ${t('outbox')} WHERE state = 'pending' ORDER BY id LIMIT 5 FOR UPDATE SKIP LOCKED)
     UPDATE ${t('outbox')} o SET state = 'processing' FROM c WHERE o.id = c.id`,
  ],
  'inbox claim': (t: (table: string) => string) => [
    `WITH c AS (SELECT id FROM ${t('inbox')} WHERE state = 'pending' ORDER BY id LIMIT 5 FOR UPDATE SKIP LOCKED)
     UPDATE ${t('inbox')} o SET state = 'processing' FROM c WHERE o.id = c.id`,
  ],
} as const;

const CASES = [1, 3, 6].flatMap((from) =>
  (Object.keys(WRITERS) as (keyof typeof WRITERS)[]).map((writer) => ({ from, writer })),
);

it.each(CASES)(
  'migrates from $from while an application holds the outbox and a $writer waits: no deadlock',
  async ({ from, writer }) => {
    // Prepare: the schema at `from`; a committed pending row in each table for the writers.
    const schema = freshSchemaName(`pg_mig_w${from}`);
    schemas.push(schema);
    const executor = createPgExecutor(new pg.Pool({ ...session('migrator'), max: 2 }));
    const app = new pg.Client(session('app'));
    const second = new pg.Client(session('writer'));
    await Promise.all([app.connect(), second.connect()]);
    try {
      await runMigrations(executor, { schema, migrations: MIGRATIONS.filter((m) => m.version <= from) });
      const t = (table: string) => `"${schema}".${table}`;
      await app.query(
        `INSERT INTO ${t('inbox')} (source, idempotency_key, payload, max_attempts) VALUES ('s', 'k', '{}', 3)`,
      );
      await app.query(
        `INSERT INTO ${t('outbox')} (topic, payload, max_attempts) VALUES ('earlier', '{}', 3)`,
      );
      // An application's transaction writes an outbox row and stays open.
      await app.query('BEGIN');
      await app.query(`INSERT INTO ${t('outbox')} (topic, payload, max_attempts) VALUES ('app', '{}', 3)`);

      // Act: the migration starts and waits for the outbox...
      const events: MigrationProgress[] = [];
      const migrating = runMigrations(executor, { schema, onMigration: (p) => events.push(p) });
      await waitingForLock('migrator');
      // ...the second writer's transaction starts and waits too...
      const writing = (async () => {
        await second.query('BEGIN');
        for (const statement of WRITERS[writer](t)) await second.query(statement);
        await second.query('COMMIT');
      })();
      await waitingForLock('writer');
      // ...past its own deadlock check; then the application commits.
      await new Promise((resolve) => setTimeout(resolve, 300));
      await app.query('COMMIT');
      const report = await migrating;
      await writing;

      // Assess: every migration applied at its first run, and the writer committed after them.
      expect(report.current).toBe(Math.max(...MIGRATIONS.map((m) => m.version)));
      expect(events.filter((e) => e.phase === 'retrying').map((e) => e.name)).toEqual([]);
    } finally {
      await Promise.all([app.end(), second.end()]);
      await executor.close();
    }
  },
  60_000,
);
