/** Retention on the real PostgreSQL store: ages, batches, the deadline, and the configuration's hours. */
import type { Clock, RowId } from '@queuebox/core';
import { requireServices, useTestStore } from '@queuebox/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { type RetentionBatch, retentionPolicyOf, runRetention } from '../src/retention.ts';
import { inboxRows, outboxRows } from './fixtures.ts';

const postgres = await requireServices('admin tests', ['postgres']);

const HOUR_MS = 3_600_000;
const FAR = Number.MAX_SAFE_INTEGER;

describe('retentionPolicyOf', () => {
  it('turns the configuration hours into milliseconds', () => {
    expect(retentionPolicyOf({ keepSentHours: 168, keepDeadHours: 0, batchSize: 500 })).toEqual({
      keepSentMs: 168 * HOUR_MS,
      keepDeadMs: 0,
      batchSize: 500,
    });
  });
});

describe.skipIf(postgres.skipReason)('runRetention on PostgreSQL', () => {
  const db = useTestStore('admin_retention', { url: postgres.url.postgres, storePoolSize: 4 });
  afterEach(async () => {
    await db.clear();
  });

  /** Old and young rows of every kind; returns the old ones. */
  async function arrange() {
    const oldSent = await outboxRows(db.store, 3, 'sent');
    const oldDead = await outboxRows(db.store, 1, 'dead');
    const oldPending = await outboxRows(db.store, 1, 'pending');
    const oldProcessed = await inboxRows(db.store, 2, 'processed');
    const oldInboxDead = await inboxRows(db.store, 1, 'dead', 'github');
    const young = {
      sent: await outboxRows(db.store, 1, 'sent'),
      dead: await outboxRows(db.store, 1, 'dead'),
      processed: await inboxRows(db.store, 1, 'processed', 'young'),
    };
    // Backdated once every row exists: making the young rows claims every due row, the old pending one included,
    // and gives it back, which made it young again (an outside mutation audit: a purge of old pending rows passed).
    await db.backdate('outbox', [...oldSent, ...oldDead, ...oldPending], 3 * HOUR_MS);
    await db.backdate('inbox', [...oldProcessed, ...oldInboxDead], 3 * HOUR_MS);
    return { oldSent, oldDead, oldPending, oldProcessed, oldInboxDead, young };
  }

  it('deletes old finished and dead rows of both tables in batches, and keeps young and pending rows', async () => {
    const rows = await arrange();
    const batches: RetentionBatch[] = [];

    const report = await runRetention(db.store.admin, {
      keepSentMs: HOUR_MS,
      keepDeadMs: 2 * HOUR_MS,
      batchSize: 2,
      deadline: FAR,
      onBatch: (b) => batches.push(b),
    });

    expect(report).toEqual({
      deleted: { outbox: { sent: 3, dead: 1 }, inbox: { processed: 2, dead: 1 } },
      total: 7,
      batches: 6,
      complete: true,
      unfinished: [],
    });
    // Round robin: one batch of each kind per round; a kind that deleted a full batch goes round again.
    expect(batches.map((b) => `${b.table}.${b.state}=${b.deleted}`)).toEqual([
      'outbox.Sent=2',
      'inbox.Sent=2',
      'outbox.Dead=1',
      'inbox.Dead=1',
      'outbox.Sent=1',
      'inbox.Sent=0',
    ]);
    for (const id of [...rows.oldSent, ...rows.oldDead])
      expect(await db.store.outbox.get(id)).toBeUndefined();
    for (const id of [...rows.oldProcessed, ...rows.oldInboxDead])
      expect(await db.store.inbox.get(id)).toBeUndefined();
    for (const id of [...rows.oldPending, ...rows.young.sent, ...rows.young.dead]) {
      expect(await db.store.outbox.get(id)).toBeDefined();
    }
    expect(await db.store.inbox.get(rows.young.processed[0] as RowId)).toBeDefined();
  });

  it('ages processed inbox rows by keepSentMs and dead rows by keepDeadMs, on both tables', async () => {
    // Prepare: every old row is 3 h old; finished rows are kept 1 h, dead rows 5 h.
    const rows = await arrange();

    // Act
    const report = await runRetention(db.store.admin, {
      keepSentMs: HOUR_MS,
      keepDeadMs: 5 * HOUR_MS,
      batchSize: 100,
      deadline: FAR,
    });

    // Assess
    expect(report.deleted).toEqual({ outbox: { sent: 3, dead: 0 }, inbox: { processed: 2, dead: 0 } });
    for (const id of rows.oldProcessed) expect(await db.store.inbox.get(id)).toBeUndefined();
    for (const id of rows.oldInboxDead) expect(await db.store.inbox.get(id)).toBeDefined();
    for (const id of rows.oldDead) expect(await db.store.outbox.get(id)).toBeDefined();
  });

  it('keeps a kind whose age is 0', async () => {
    const rows = await arrange();

    const report = await runRetention(db.store.admin, {
      keepSentMs: 0,
      keepDeadMs: HOUR_MS,
      batchSize: 100,
      deadline: FAR,
    });

    expect(report.deleted).toEqual({ outbox: { sent: 0, dead: 1 }, inbox: { processed: 0, dead: 1 } });
    expect(report.complete).toBe(true);
    expect(await db.store.outbox.get(rows.oldSent[0] as RowId)).toBeDefined();
  });

  it('starts no batch after the deadline, reports incomplete, and the next run finishes', async () => {
    await arrange();
    let now = 0;
    // Each reading of the clock is 10 ms later: readings 20 and 30 start a batch, 40 is past the deadline.
    const clock: Clock = { now: () => (now += 10) };
    const policy = { keepSentMs: HOUR_MS, keepDeadMs: HOUR_MS, batchSize: 1 };

    const late = await runRetention(db.store.admin, { ...policy, deadline: 0 });
    const cut = await runRetention(db.store.admin, { ...policy, deadline: 35, clock });
    const rest = await runRetention(db.store.admin, { ...policy, deadline: FAR });

    expect(late).toMatchObject({ total: 0, batches: 0, complete: false });
    expect(cut).toMatchObject({ total: 2, batches: 2, complete: false });
    expect(cut.deleted).toEqual({ outbox: { sent: 1, dead: 0 }, inbox: { processed: 1, dead: 0 } });
    // The two kinds whose batch came back full, and the two that had no turn before the deadline.
    expect(cut.unfinished).toEqual([
      { table: 'outbox', state: 'Sent' },
      { table: 'inbox', state: 'Sent' },
      { table: 'outbox', state: 'Dead' },
      { table: 'inbox', state: 'Dead' },
    ]);
    expect(rest.unfinished).toEqual([]);
    expect(rest.complete).toBe(true);
    expect(cut.total + rest.total).toBe(7);
  });
});
