import {
  type ClaimOptions,
  MessageState,
  type NewOutboxMessage,
  type OutboxRow,
  type OutboxStore,
  type RowId,
  StoreError,
} from '@queuebox/core';
import type { SqlExecutor } from './executor.ts';
import {
  claimOutboxStatement,
  getOutboxStatement,
  insertOutboxStatement,
  markOutboxDeadStatement,
  markOutboxSentStatement,
  reclaimExpiredOutboxStatement,
  releaseOutboxStatement,
  retryOutboxStatement,
} from './outbox-sql.ts';
import { compareIds, outboxState, type RawRow, toOutboxRow, toRowId } from './rows.ts';
import { DEFAULT_RECLAIM_LIMIT, isRowId, settle } from './settle.ts';

/** What the outbox repository needs. */
export interface SqlServerOutboxStoreOptions {
  readonly executor: SqlExecutor;
  /** A schema name already checked by `quoteSchema` (the statements check it again). */
  readonly schema: string;
}

/**
 * Inserts outbox rows through `executor` — the store's pool, or a transaction (the relay's forward) — and
 * answers their ids in the order given.
 */
export async function insertOutboxRows(
  executor: SqlExecutor,
  schema: string,
  messages: readonly NewOutboxMessage[],
): Promise<RowId[]> {
  if (messages.length === 0) return [];
  const { text, values } = insertOutboxStatement(schema, messages);
  const { rows } = await executor.query<{ id: unknown }>(text, values);
  if (rows.length !== messages.length) {
    throw new StoreError(`The outbox insert answered ${rows.length} ids for ${messages.length} messages`);
  }
  // Identities grow in insert order, and the statement inserts in the order given.
  return rows.map((r) => toRowId(r.id)).sort(compareIds);
}

/** core's `OutboxStore` on SQL Server. Every operation is one batch in autocommit and keeps no session state. */
export function createSqlServerOutboxStore(options: SqlServerOutboxStoreOptions): OutboxStore {
  const { executor, schema } = options;

  return {
    insert: (messages) => insertOutboxRows(executor, schema, messages),

    async claim({ batchSize, leaseMs }: ClaimOptions): Promise<OutboxRow[]> {
      const n = Math.floor(batchSize);
      if (!(n > 0)) return [];
      const { text, values } = claimOutboxStatement(schema, { batchSize: n, leaseMs });
      const { rows } = await executor.query<RawRow>(text, values);
      // OUTPUT answers in no promised order; PostgreSQL's claim answers by id.
      return rows.map(toOutboxRow).sort((a, b) => compareIds(a.id, b.id));
    },

    markSent: (items) =>
      settle(executor, items, (valid) => markOutboxSentStatement(schema, valid), outboxState),
    retry: (items) => settle(executor, items, (valid) => retryOutboxStatement(schema, valid), outboxState),
    markDead: (items) =>
      settle(executor, items, (valid) => markOutboxDeadStatement(schema, valid), outboxState),
    release: (items) =>
      settle(executor, items, (valid) => releaseOutboxStatement(schema, valid), outboxState),

    async reclaimExpired(limit = DEFAULT_RECLAIM_LIMIT) {
      const n = Math.max(0, Math.floor(limit));
      if (n === 0) return { returned: 0, dead: 0 };
      const { text, values } = reclaimExpiredOutboxStatement(schema, n);
      const { rows } = await executor.query<{ state: unknown }>(text, values);
      const dead = rows.filter((r) => outboxState(r.state) === MessageState.Dead).length;
      return { returned: rows.length - dead, dead };
    },

    async get(id: RowId) {
      if (!isRowId(id)) return undefined;
      const { text, values } = getOutboxStatement(schema, id);
      const { rows } = await executor.query<RawRow>(text, values);
      return rows[0] ? toOutboxRow(rows[0]) : undefined;
    },
  };
}
