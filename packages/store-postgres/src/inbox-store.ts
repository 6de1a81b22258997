import { type InboxRow, type InboxStore, type RowId, StoreError, type StoreResult } from '@queuebox/core';
import { readClaimedRows } from '@queuebox/sql-store-common';
import type { SqlExecutor } from './executor.ts';
import { createInboxBatcher } from './inbox-batch.ts';
import {
  claimInboxStatement,
  completeInboxStatement,
  forwardInboxStatement,
  getInboxStatement,
  giveUpInboxStatement,
  type InboxInsertItem,
  insertInboxStatement,
  reclaimExpiredInboxStatement,
  retryInboxStatement,
  selectInboxIdStatement,
} from './inbox-sql.ts';
import { inlineBytesFor, readOutsideColumns } from './large-columns.ts';
import { lockOutboxKeys, outboxKeysOf } from './outbox-store.ts';
import { compareIds, inboxState, POSTGRES_READERS, type RawRow, toInboxRow, toRowId } from './rows.ts';
import { DEFAULT_RECLAIM_LIMIT, isRowId, settle, uniqueClaims } from './settle.ts';

/** What the inbox repository needs. */
export interface PostgresInboxStoreOptions {
  readonly executor: SqlExecutor;
  /** A schema name already checked by `quoteSchema` (the statements check it again). */
  readonly schema: string;
}

/**
 * How often `store` tries again when the insert met a conflict but the existing row was gone by the time it
 * was read (deleted by retention in between).
 */
const STORE_ATTEMPTS = 3;

/**
 * core's `InboxStore` on PostgreSQL / PGlite. Every operation is one statement, `store` at most two, and a
 * `forward` that writes keyed outbox rows one transaction of two: the locks of those keys, then the forward.
 * Concurrent `store` calls are grouped into one statement by `createInboxBatcher` (group commit).
 */
export function createPostgresInboxStore(options: PostgresInboxStoreOptions): InboxStore {
  const { executor, schema } = options;
  const limits = executor.resultLimits;

  async function storeAlone({ message, state, lastError }: InboxInsertItem): Promise<StoreResult> {
    for (let attempt = 1; attempt <= STORE_ATTEMPTS; attempt++) {
      const insert = insertInboxStatement(schema, message, state, lastError);
      const inserted = await executor.query<{ id: unknown }>(insert.text, insert.values);
      if (inserted.rows[0]) return { status: 'stored', id: toRowId(inserted.rows[0].id) };
      // A separate statement: its fresh snapshot sees the row a concurrent store committed while we waited on it.
      const select = selectInboxIdStatement(schema, message.source, message.idempotencyKey);
      const existing = await executor.query<{ id: unknown }>(select.text, select.values);
      if (existing.rows[0]) return { status: 'duplicate', id: toRowId(existing.rows[0].id) };
    }
    throw new StoreError('The inbox row of a repeated message vanished between insert and read, repeatedly', {
      context: { source: message.source },
    });
  }

  const storeBatched = createInboxBatcher({ executor, schema, storeOne: storeAlone });

  return {
    store: (message) => storeBatched({ message, state: 'pending', lastError: null }),
    storeDead: (message, reason) => storeBatched({ message, state: 'dead', lastError: reason }),

    async claim({ sources, batchSize, leaseMs, takeOverExpired }): Promise<InboxRow[]> {
      const n = Math.floor(batchSize);
      if (!(n > 0) || sources.length === 0) return [];
      const { text, values } = claimInboxStatement(schema, {
        sources: [...new Set(sources)],
        batchSize: n,
        leaseMs,
        takeOverExpired: takeOverExpired === true,
        ...(limits === undefined ? {} : { inlineBytes: inlineBytesFor(limits, n) }),
      });
      const answered = (await executor.query<RawRow>(text, values)).rows;
      await readOutsideColumns(executor, schema, 'inbox', answered, limits);
      const { rows, unreadable } = readClaimedRows(answered, toInboxRow, POSTGRES_READERS);
      if (unreadable.length > 0) {
        // A row this reader cannot map goes dead alone; best effort, or its lease expires as after a crash.
        const dead = giveUpInboxStatement(schema, unreadable);
        await executor.query(dead.text, dead.values).catch(() => undefined);
      }
      return rows;
    },

    complete: (items) =>
      settle(executor, items, (valid) => completeInboxStatement(schema, valid), inboxState),
    retry: (items) => settle(executor, items, (valid) => retryInboxStatement(schema, valid), inboxState),
    giveUp: (items) => settle(executor, items, (valid) => giveUpInboxStatement(schema, valid), inboxState),

    async forward(items) {
      const unique = uniqueClaims(items);
      const valid = unique.filter((i) => isRowId(i.id));
      let forwarded = new Set<string>();
      let outboxIds: string[] = [];
      if (valid.length > 0) {
        const { text, values } = forwardInboxStatement(schema, valid);
        const run = (on: SqlExecutor) =>
          on.query<{ forwarded: unknown[]; outbox_ids: unknown[] }>(text, values);
        // The outbox rows draw their ids in the forward, so the key locks come first, in the same transaction
        // (stale items' keys are locked too: harmless, and known only once the forward ran).
        const keys = outboxKeysOf(valid.map((i) => i.outbox));
        const { rows } =
          keys.length === 0
            ? await run(executor)
            : await executor.transaction(async (tx) => {
                await lockOutboxKeys(tx, schema, keys);
                return run(tx);
              });
        forwarded = new Set((rows[0]?.forwarded ?? []).map(toRowId));
        outboxIds = (rows[0]?.outbox_ids ?? []).map(toRowId).sort(compareIds);
      }
      const settled = unique
        .filter((i) => forwarded.has(i.id))
        .map((i) => ({ id: i.id, state: 'Sent' as const }));
      const stale = unique.filter((i) => !forwarded.has(i.id)).map((i) => i.id);
      return { settled, stale, outboxIds };
    },

    async reclaimExpired(sources, limit = DEFAULT_RECLAIM_LIMIT) {
      if (sources.length === 0) return { returned: 0, dead: 0 };
      const { text, values } = reclaimExpiredInboxStatement(
        schema,
        [...new Set(sources)],
        Math.max(0, Math.floor(limit)),
      );
      const { rows } = await executor.query<{ returned: number }>(text, values);
      return { returned: Number(rows[0]?.returned ?? 0), dead: 0 };
    },

    async get(id: RowId) {
      if (!isRowId(id)) return undefined;
      const { text, values } = getInboxStatement(schema, id, inlineBytesFor(limits, 1));
      const { rows } = await executor.query<RawRow>(text, values);
      await readOutsideColumns(executor, schema, 'inbox', rows, limits);
      return rows[0] ? toInboxRow(rows[0]) : undefined;
    },
  };
}
