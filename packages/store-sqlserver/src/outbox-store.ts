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
import { outboxKeyLockResource } from './outbox-key-lock.ts';
import {
  claimOutboxStatement,
  getOutboxStatement,
  insertOutboxStatement,
  LOCKS_PER_BATCH,
  lockOutboxKeysStatement,
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

/** The keys of `messages` that will be written (duplicates allowed; the locks drop them). */
export function outboxKeysOf(messages: readonly Pick<NewOutboxMessage, 'key'>[]): string[] {
  return messages.flatMap((m) => (typeof m.key === 'string' ? [m.key] : []));
}

/**
 * Takes the per-key outbox locks of `keys` on `tx`, which must be a transaction (the locks last until it ends):
 * the distinct keys in ascending resource order, {@link LOCKS_PER_BATCH} per batch, so every writer takes them
 * in one order. Throws a `StoreError` when SQL Server refuses a lock; the transaction must then roll back.
 */
export async function lockOutboxKeys(
  tx: Pick<SqlExecutor, 'query'>,
  schema: string,
  keys: readonly string[],
): Promise<void> {
  const ordered = [...new Set(keys)]
    .map((key) => [outboxKeyLockResource(schema, key), key] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, key]) => key);
  for (let i = 0; i < ordered.length; i += LOCKS_PER_BATCH) {
    const { text, values } = lockOutboxKeysStatement(schema, ordered.slice(i, i + LOCKS_PER_BATCH));
    const { rows } = await tx.query<{ status: unknown }>(text, values);
    const status = rows[0]?.status;
    if (typeof status !== 'number' || status < 0) {
      // -1 timeout, -2 cancelled, -3 deadlock victim, -999 no open transaction or a bad call.
      throw new StoreError(
        `Could not lock the outbox key of a message (sp_getapplock ${String(status)}); roll the transaction back and retry it`,
        { context: { schema, status } },
      );
    }
  }
}

/**
 * core's `OutboxStore` on SQL Server. Every operation is one batch in autocommit and keeps no session state,
 * except an insert of keyed rows: one transaction that takes the locks of its keys, then inserts (see
 * `lockOutboxKeysStatement`), so rows of one key get ids in commit order across concurrent writers.
 */
export function createSqlServerOutboxStore(options: SqlServerOutboxStoreOptions): OutboxStore {
  const { executor, schema } = options;

  return {
    async insert(messages) {
      const keys = outboxKeysOf(messages);
      if (keys.length === 0) return insertOutboxRows(executor, schema, messages);
      return executor.transaction(async (tx) => {
        await lockOutboxKeys(tx, schema, keys);
        return insertOutboxRows(tx, schema, messages);
      });
    },

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
