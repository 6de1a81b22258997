import {
  type InboxRow,
  type InboxStore,
  MessageState,
  type NewInboxMessage,
  type RowId,
  StoreError,
  type StoreResult,
} from '@queuebox/core';
import { isLockTimeout, isUniqueViolation } from './errors.ts';
import type { SqlExecutor } from './executor.ts';
import {
  claimInboxStatement,
  completeInboxStatement,
  getInboxStatement,
  giveUpInboxStatement,
  insertInboxStatement,
  reclaimExpiredInboxStatement,
  retryInboxStatement,
  selectInboxIdStatement,
} from './inbox-sql.ts';
import { insertOutboxRows, lockOutboxKeys, outboxKeysOf } from './outbox-store.ts';
import { inboxState, type RawRow, toInboxRow, toRowId } from './rows.ts';
import { claimRows, DEFAULT_RECLAIM_LIMIT, isRowId, settle, settleable, settleReport } from './settle.ts';

/** What the inbox repository needs. */
export interface SqlServerInboxStoreOptions {
  readonly executor: SqlExecutor;
  /** A schema name already checked by `quoteSchema` (the statements check it again). */
  readonly schema: string;
}

/**
 * How often `store` tries again when the insert met the unique constraint but the existing row was gone by the
 * time it was read (deleted by retention in between).
 */
const STORE_ATTEMPTS = 3;

/**
 * core's `InboxStore` on SQL Server. Every operation is one batch in autocommit — `store` at most two — except
 * `forward`, which is one transaction: the locks of the outbox keys it writes (when any), then two statements.
 * A claim or reclaim that met error 1222 (a lock wait past TAKE_LOCK_TIMEOUT_MS) answers that nothing is
 * claimable now; a claimed row that cannot be read goes dead alone (`unreadable row: …`).
 */
export function createSqlServerInboxStore(options: SqlServerInboxStoreOptions): InboxStore {
  const { executor, schema } = options;

  async function storeAs(
    message: NewInboxMessage,
    state: 'pending' | 'dead',
    lastError: string | null,
  ): Promise<StoreResult> {
    for (let attempt = 1; attempt <= STORE_ATTEMPTS; attempt++) {
      const insert = insertInboxStatement(schema, message, state, lastError);
      try {
        const inserted = await executor.query<{ id: unknown }>(insert.text, insert.values);
        if (inserted.rows[0]) return { status: 'stored', id: toRowId(inserted.rows[0].id) };
        throw new StoreError('The inbox insert answered no id');
      } catch (error) {
        // Error 2627 on inbox_source_idempotency_key_uq: a repeat. Anything else is a real failure.
        if (!isUniqueViolation(error)) throw error;
      }
      const select = selectInboxIdStatement(schema, message.source, message.idempotencyKey);
      const existing = await executor.query<{ id: unknown }>(select.text, select.values);
      if (existing.rows[0]) return { status: 'duplicate', id: toRowId(existing.rows[0].id) };
    }
    throw new StoreError('The inbox row of a repeated message vanished between insert and read, repeatedly', {
      context: { source: message.source },
    });
  }

  return {
    store: (message) => storeAs(message, 'pending', null),
    storeDead: (message, reason) => storeAs(message, 'dead', reason),

    async claim({ sources, batchSize, leaseMs, takeOverExpired }): Promise<InboxRow[]> {
      const n = Math.floor(batchSize);
      if (!(n > 0) || sources.length === 0) return [];
      const statement = claimInboxStatement(schema, {
        sources: [...new Set(sources)],
        batchSize: n,
        leaseMs,
        takeOverExpired: takeOverExpired === true,
      });
      return claimRows(executor, statement, toInboxRow, (unreadable) =>
        giveUpInboxStatement(schema, unreadable),
      );
    },

    complete: (items) =>
      settle(executor, items, (valid) => completeInboxStatement(schema, valid), inboxState),
    retry: (items) => settle(executor, items, (valid) => retryInboxStatement(schema, valid), inboxState),
    giveUp: (items) => settle(executor, items, (valid) => giveUpInboxStatement(schema, valid), inboxState),

    async forward(items) {
      const { unique, valid } = settleable(items);
      let forwarded = new Map<RowId, MessageState>();
      let outboxIds: string[] = [];
      if (valid.length > 0) {
        // T-SQL has no data-modifying CTE to chain UPDATE … OUTPUT into INSERT in one statement as PostgreSQL
        // does, so the two statements share a transaction (run again whole if chosen as a deadlock victim).
        [forwarded, outboxIds] = await executor.transaction(async (tx) => {
          // The outbox rows draw their ids in the insert below, so the key locks come first (stale items' keys
          // are locked too: harmless, and known only once the UPDATE ran).
          const keys = outboxKeysOf(valid.map((i) => i.outbox));
          if (keys.length > 0) await lockOutboxKeys(tx, schema, keys);
          const complete = completeInboxStatement(schema, valid);
          const { rows } = await tx.query<{ id: unknown }>(complete.text, complete.values);
          const done = new Map(rows.map((r) => [toRowId(r.id), MessageState.Sent] as const));
          // Exactly the rows whose claim held get an outbox row, in the order of the items.
          const messages = valid.filter((i) => done.has(i.id)).map((i) => i.outbox);
          return [done, await insertOutboxRows(tx, schema, messages)] as const;
        });
      }
      return { ...settleReport<'Sent'>(unique, forwarded), outboxIds };
    },

    async reclaimExpired(sources, limit = DEFAULT_RECLAIM_LIMIT) {
      const n = Math.max(0, Math.floor(limit));
      if (sources.length === 0 || n === 0) return { returned: 0, dead: 0 };
      const { text, values } = reclaimExpiredInboxStatement(schema, [...new Set(sources)], n);
      try {
        const { rows } = await executor.query(text, values);
        return { returned: rows.length, dead: 0 };
      } catch (error) {
        if (isLockTimeout(error)) return { returned: 0, dead: 0 };
        throw error;
      }
    },

    async get(id: RowId) {
      if (!isRowId(id)) return undefined;
      const { text, values } = getInboxStatement(schema, id);
      const { rows } = await executor.query<RawRow>(text, values);
      return rows[0] ? toInboxRow(rows[0]) : undefined;
    },
  };
}
