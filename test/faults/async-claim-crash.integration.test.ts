/**
 * A crash that undoes an asynchronous claim (docs/design.md §5, "Durability of a claim"). The outbox claims commit
 * without waiting for their WAL to be written (`CLAIM_COMMITS_ASYNCHRONOUSLY`); the settles commit synchronously.
 * This test makes the undoing happen on purpose: a private cluster whose WAL writer waits 10 s between rounds
 * (`wal_writer_delay`), no autovacuum, no background writer, no standby snapshots, and a crash (`pg_ctl stop -m immediate`) right after a
 * claim whose commit record is still in the server's WAL buffers (`pg_current_wal_lsn()`, the written position,
 * behind `pg_current_wal_insert_lsn()`). What must hold after recovery:
 *
 * - an undone claim leaves its row exactly as it was before the claim: pending, no attempt counted, no token, due —
 *   nothing is lost, and the next claim takes it (a delivery made under the lost claim is made again: a duplicate,
 *   which at-least-once allows);
 * - the settle of the lost claim, arriving after the restart, is stale and changes nothing;
 * - a claim followed by its settle survives the same crash as sent: the settle's synchronous commit wrote all the
 *   WAL before it, the claim's included.
 *
 * Seen failing with the claims made synchronous (no claim is ever caught unwritten) and with an asynchronous markSent
 * (the settled row comes back pending). Only where initdb/pg_ctl are installed (a proxy cannot crash a server); the
 * reason is printed otherwise.
 */
import { randomUUID } from 'node:crypto';
import type { RowId, Store } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PrivatePostgres, postgresBinaries, startPrivatePostgres } from './support/postgres-cluster.ts';

const binaries = postgresBinaries();
if (!('bindir' in binaries)) {
  console.info(`[faults: asynchronous claim crash] skipped: ${binaries.reason}`);
}

const SCHEMA = 'async_claim_crash';
const LEASE_MS = 300_000;
/** Claims tried before the test gives up on catching one whose commit is not yet written. */
const TRIES = 8;

describe.skipIf(!('bindir' in binaries))('a crash right after an asynchronous claim', () => {
  let server: PrivatePostgres;
  let store: Store;
  let admin: pg.Pool;

  const open = async () => {
    store = await openPostgresStore({ url: server.url, schema: SCHEMA, poolSize: 2 });
    admin = new pg.Pool({ connectionString: server.url, max: 1 });
    admin.on('error', () => {});
  };
  const crashAndRecover = async () => {
    await server.stop('immediate');
    await Promise.allSettled([store.close(), admin.end()]);
    await server.start();
    await open();
  };
  const row = async (id: RowId) =>
    (
      await admin.query<{ state: string; attempt: number; claim_token: string | null; due: boolean }>(
        `SELECT state, attempt, claim_token::text AS claim_token, scheduled_at <= now() AS due
         FROM ${SCHEMA}.outbox WHERE id = $1::bigint`,
        [id],
      )
    ).rows[0];
  /** Whether the WAL inserted so far has all been written (then a crash now would undo nothing). */
  const allWritten = async () =>
    (
      await admin.query<{ written: boolean }>(
        'SELECT pg_current_wal_lsn() >= pg_current_wal_insert_lsn() AS written',
      )
    ).rows[0]?.written === true;

  beforeAll(async () => {
    if (!('bindir' in binaries)) return;
    server = await startPrivatePostgres(binaries, {
      wal_writer_delay: '10s',
      // No standby snapshots written in between (wal_level replica logs one every 15 s).
      wal_level: 'minimal',
      max_wal_senders: '0',
      autovacuum: 'off',
      bgwriter_lru_maxpages: '0',
      checkpoint_timeout: '1h',
    });
    await open();
    await store.migrate();
  });
  afterAll(async () => {
    await Promise.allSettled([store?.close(), admin?.end()]);
    await server?.dispose();
  });

  it('leaves the row pending as before the claim, the lost claim stale, and the next claim takes it', async () => {
    let undone: { id: RowId; token: string } | undefined;
    const tries: string[] = [];
    for (let attempt = 1; attempt <= TRIES && undone === undefined; attempt++) {
      // Prepare: one pending row, committed synchronously (its WAL is written and flushed).
      const [id = ''] = await store.outbox.insert([
        { topic: 'orders.created', payload: { attempt }, maxAttempts: 5 },
      ]);

      // Act: claim it (asynchronous commit), let a WAL writer that was woken do its round, then crash.
      const [claimed] = await store.outbox.claim({ batchSize: 10, leaseMs: LEASE_MS });
      expect(claimed?.id).toBe(id);
      await new Promise((resolve) => setTimeout(resolve, 50));
      if (await allWritten()) {
        // The claim's WAL crossed a page and the WAL writer wrote it: this crash could not undo it. Settle it and
        // try again with a new row.
        tries.push(`try ${attempt}: the claim's WAL was written before the crash could come`);
        await store.outbox.markSent([{ id, claimToken: claimed?.claimToken ?? '', destination: 'x' }]);
        continue;
      }
      await crashAndRecover();
      undone = { id, token: claimed?.claimToken ?? '' };
    }
    console.info(
      `[faults: asynchronous claim crash] ${tries.length} tries skipped${tries.length ? `: ${tries.join('; ')}` : ''}`,
    );
    if (undone === undefined) throw new Error(`no claim was caught unwritten in ${TRIES} tries`);

    // Assert: the claim is gone, nothing else is.
    expect(await row(undone.id)).toEqual({ state: 'pending', attempt: 0, claim_token: null, due: true });
    const late = await store.outbox.markSent([{ id: undone.id, claimToken: undone.token, destination: 'x' }]);
    expect(late).toEqual({ settled: [], stale: [undone.id] });
    expect((await row(undone.id))?.state).toBe('pending');
    const again = await store.outbox.claim({ batchSize: 10, leaseMs: LEASE_MS });
    expect(again.map((r) => r.id)).toEqual([undone.id]);
    expect(again[0]?.claimToken).not.toBe(undone.token);
    await store.outbox.markSent([
      { id: undone.id, claimToken: again[0]?.claimToken ?? '', destination: 'x' },
    ]);
  });

  it('keeps a claim whose settle committed before the crash: the row stays sent', async () => {
    // Prepare
    const [id = ''] = await store.outbox.insert([
      { topic: 'orders.created', payload: { settled: randomUUID() }, maxAttempts: 5 },
    ]);
    const [claimed] = await store.outbox.claim({ batchSize: 10, leaseMs: LEASE_MS });
    expect(claimed?.id).toBe(id);

    // Act: the settle commits synchronously, then the server crashes at once.
    const report = await store.outbox.markSent([
      { id, claimToken: claimed?.claimToken ?? '', destination: 'x' },
    ]);
    expect(report.settled).toEqual([{ id, state: 'Sent' }]);
    await crashAndRecover();

    // Assert
    expect(await row(id)).toMatchObject({ state: 'sent', attempt: 0, claim_token: null });
  });
});
