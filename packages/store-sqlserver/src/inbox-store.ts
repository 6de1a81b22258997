import { type InboxStore, MessageState, type RowId, StoreError } from '@queuebox/core';
import type { SqlExecutor } from './executor.ts';
import { claimInboxRows } from './inbox-claim.ts';
import { storeInboxRow } from './inbox-dedupe.ts';
import {
  completeInboxStatement,
  forwardOutboxStatement,
  getInboxStatement,
  giveUpInboxStatement,
  retryInboxStatement,
} from './inbox-sql.ts';
import { reclaimExpiredInbox } from './lease.ts';
import { MAX_ROWS_PER_STATEMENT } from './outbox-sql.ts';
import { lockOutboxKeys, outboxKeysOf } from './outbox-store.ts';
import { compareIds, inboxState, type RawRow, toInboxRow, toRowId } from './rows.ts';
import { isRowId, settle, settleable, settleReport } from './settle.ts';

/** What the inbox repository needs. */
export interface SqlServerInboxStoreOptions {
  readonly executor: SqlExecutor;
  /** A schema name already checked by `quoteSchema` (the statements check it again). */
  readonly schema: string;
}

/**
 * core's `InboxStore` on SQL Server. Every operation is one batch in autocommit — `store` at most two — except
 * `forward`, which is one transaction: the locks of the outbox keys it writes (when any), then two statements.
 * A claim or reclaim that met error 1222 (a lock wait past TAKE_LOCK_TIMEOUT_MS) answers that nothing is
 * claimable now; a claimed row that cannot be read goes dead alone (`unreadable row: …`).
 */
export function createSqlServerInboxStore(options: SqlServerInboxStoreOptions): InboxStore {
  const { executor, schema } = options;

  const inbox: InboxStore = {
    store: (message) => storeInboxRow(executor, schema, { message, state: 'pending', lastError: null }),
    storeDead: (message, reason) =>
      storeInboxRow(executor, schema, { message, state: 'dead', lastError: reason }),

    claim: (claim) => claimInboxRows(executor, schema, claim),
    claimForRelay: (claim) => claimInboxRows(executor, schema, { ...claim, takeOverExpired: false }, false),

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
          // Exactly the rows whose claim held get an outbox row, in the order of the items (an item without a
          // payload gets its inbox row's, read by the INSERT).
          const held = valid.filter((i) => done.has(i.id));
          const ids: RowId[] = [];
          for (let at = 0; at < held.length; at += MAX_ROWS_PER_STATEMENT) {
            const chunk = held.slice(at, at + MAX_ROWS_PER_STATEMENT);
            const insert = forwardOutboxStatement(schema, chunk);
            const inserted = await tx.query<{ id: unknown }>(insert.text, insert.values);
            if (inserted.rows.length !== chunk.length) {
              throw new StoreError(
                `The forward's outbox insert answered ${inserted.rows.length} ids for ${chunk.length} rows`,
              );
            }
            // Identities grow in insert order, and the statement inserts in the order given.
            ids.push(...inserted.rows.map((r) => toRowId(r.id)).sort(compareIds));
          }
          return [done, ids] as const;
        });
      }
      return { ...settleReport<'Sent'>(unique, forwarded), outboxIds };
    },

    // T-SQL cannot chain the forward's writes and the claim's UPDATE … OUTPUT into one statement as PostgreSQL
    // does: the claim runs right after the forward committed (one round trip more than PostgreSQL's).
    async forwardAndClaim(items, claim) {
      const forwarded = await inbox.forward(items);
      const claimed = await inbox.claimForRelay(claim);
      return { forwarded, claimed };
    },

    reclaimExpired: (sources, limit) => reclaimExpiredInbox(executor, schema, sources, limit),

    async get(id: RowId) {
      if (!isRowId(id)) return undefined;
      const { text, values } = getInboxStatement(schema, id);
      const { rows } = await executor.query<RawRow>(text, values);
      return rows[0] ? toInboxRow(rows[0]) : undefined;
    },
  };
  return inbox;
}
