/**
 * A repeat is answered "duplicate" only once its row could survive a failover (an outside failover audit). On a
 * private cluster whose commits wait for a synchronous standby that never connects (`synchronous_standby_names`), a
 * webhook whose first store was committed on the primary alone (here with `synchronous_commit = local`, as a
 * cancelled wait for the standby leaves it) used to be answered duplicate at once when its sender retried: a
 * statement that meets only repeats wrote no WAL, and such a commit does not wait for the standby. Promoted, the
 * standby would not have the row, and the sender had stopped retrying. Now every statement that answers a repeat
 * writes one WAL record (a logical-decoding message): its answer waits for the standby like a new row's, and the
 * store gives up at its `inboxMaxWaitMs` with StoreUnavailableError (the ingestion's 503), through the group commit's
 * statement and through the one-message path a failed batch falls back to.
 */
import type { Store } from '@queuebox/core';
import { StoreUnavailableError } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type PrivatePostgres, postgresBinaries, startPrivatePostgres } from './support/postgres-cluster.ts';

const binaries = postgresBinaries();
if (!('bindir' in binaries)) {
  console.info(`[faults: synchronous standby, repeats] skipped: ${binaries.reason}`);
}

const SCHEMA = 'sync_repeat';

describe.skipIf(!('bindir' in binaries))('a repeat under synchronous replication', () => {
  let server: PrivatePostgres;
  /** Commits without waiting for the standby: migrations, and the first store of each message. */
  let local: Store;
  /** QueueBox as configured: its commits wait for the standby. */
  let synchronous: Store;
  let admin: pg.Client;

  beforeAll(async () => {
    if (!('bindir' in binaries)) return;
    server = await startPrivatePostgres(binaries, { synchronous_standby_names: 'standby_that_never_comes' });
    const localUrl = new URL(server.url);
    localUrl.searchParams.set('options', '-c synchronous_commit=local');
    local = await openPostgresStore({ url: localUrl.toString(), schema: SCHEMA, poolSize: 1 });
    await local.migrate();
    synchronous = await openPostgresStore({
      url: server.url,
      schema: SCHEMA,
      poolSize: 4,
      inboxMaxWaitMs: 1500,
    });
    admin = new pg.Client({ connectionString: localUrl.toString() });
    await admin.connect();
  }, 60_000);

  /** The statements still waiting for the standby hold their sessions: ended, so each test has the pool's others. */
  const endWaiting = () =>
    admin
      ?.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND pid <> pg_backend_pid()`,
      )
      .catch(() => undefined);
  afterEach(async () => {
    if ('bindir' in binaries) await endWaiting();
  });

  afterAll(async () => {
    if (!('bindir' in binaries)) return;
    await endWaiting();
    await Promise.allSettled([synchronous?.close(), local?.close(), admin?.end()]);
    await server?.dispose();
  });

  const message = (key: string) => ({
    source: 'hooks',
    idempotencyKey: key,
    payload: { key },
    maxAttempts: 3,
  });

  it('sanity: a new message waits for the standby (503), and is on the primary alone afterwards', async () => {
    await expect(synchronous.inbox.store(message('new-1'))).rejects.toBeInstanceOf(StoreUnavailableError);
  });

  it('answers a retry of a message stored on the primary alone with 503, not duplicate, while the standby is away', async () => {
    // Prepare: the first store committed locally only.
    const first = await local.inbox.store(message('retried-1'));
    expect(first.status).toBe('stored');

    // Act: the sender's retry, as the ingestion stores it (the group commit).
    const started = performance.now();
    const retry = synchronous.inbox.store(message('retried-1'));

    // Assess: it waits for the standby, and gives up as unavailable, never "duplicate".
    await expect(retry).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(performance.now() - started).toBeGreaterThanOrEqual(1400);
    const { rows } = await admin.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event = 'SyncRep'`,
    );
    expect(rows[0]?.n).toBeGreaterThanOrEqual(1);
  });

  it('waits for the standby on a batch of two repeats', async () => {
    await local.inbox.store(message('retried-2'));
    await local.inbox.store(message('retried-3'));
    const results = await Promise.allSettled([
      synchronous.inbox.store(message('retried-2')),
      synchronous.inbox.store(message('retried-3')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    for (const r of results) {
      if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(StoreUnavailableError);
    }
  });

  it('waits for the standby on the one-message path too (a batch that failed on another message is stored message by message)', async () => {
    await local.inbox.store(message('retried-4'));
    // Same turn of the event loop, so one batch: PostgreSQL refuses the first message's NUL (jsonb), the batch fails,
    // and each message is stored alone; the repeat goes through the single insert and the read of its id.
    const [bad, retry] = await Promise.allSettled([
      synchronous.inbox.store({ ...message('bad-1'), payload: { text: 'a\u0000b' } }),
      synchronous.inbox.store(message('retried-4')),
    ]);
    expect(bad.status).toBe('rejected');
    expect(retry.status).toBe('rejected');
    if (retry.status === 'rejected') expect(retry.reason).toBeInstanceOf(StoreUnavailableError);
  });
});
