import {
  type NewOutboxMessage,
  type OutboxStore,
  type RowId,
  StoreError,
  StoreUnavailableError,
} from '@queuebox/core';
import { APPLOCK_DEADLOCK_STATUS } from './errors.ts';
import type { SqlExecutor } from './executor.ts';
import { checkedKeyLockTimeoutMs } from './key-lock-timeout.ts';
import { reclaimExpiredOutbox } from './lease.ts';
import { createOutboxClaim } from './outbox-claim.ts';
import { outboxKeyLockResource } from './outbox-key-lock.ts';
import {
  getOutboxStatement,
  insertOutboxStatement,
  KEY_LOCK_TIMEOUT_MS,
  LOCKS_PER_BATCH,
  lockOutboxKeysStatement,
  MAX_ROWS_PER_STATEMENT,
  markOutboxDeadStatement,
  markOutboxSentStatement,
  releaseOutboxStatement,
  retryOutboxStatement,
} from './outbox-sql.ts';
import { compareIds, outboxState, type RawRow, toOutboxRow, toRowId } from './rows.ts';
import { isRowId, settle } from './settle.ts';

/** What the outbox repository needs. */
export interface SqlServerOutboxStoreOptions {
  readonly executor: SqlExecutor;
  /** A schema name already checked by `quoteSchema` (the statements check it again). */
  readonly schema: string;
  /**
   * How long an insert of keyed rows waits for each key's lock held by another writer, in milliseconds. Default
   * {@link KEY_LOCK_TIMEOUT_MS} (10 s, below mssql's 15 s request timeout).
   */
  readonly keyLockTimeoutMs?: number;
}

/**
 * Inserts outbox rows through `executor` — the store's pool, or a transaction (the relay's forward, an
 * application's enqueue) — and answers their ids in the order given. At most {@link MAX_ROWS_PER_STATEMENT} rows
 * go into one INSERT, so no statement reaches the 5,000 locks at which SQL Server escalates to a table lock (held
 * until the writer commits); more rows take several statements, so run a larger insert in a transaction to keep
 * it atomic (the store's `insert` does).
 */
export async function insertOutboxRows(
  executor: Pick<SqlExecutor, 'query'>,
  schema: string,
  messages: readonly NewOutboxMessage[],
): Promise<RowId[]> {
  const ids: RowId[] = [];
  for (let i = 0; i < messages.length; i += MAX_ROWS_PER_STATEMENT) {
    const chunk = messages.slice(i, i + MAX_ROWS_PER_STATEMENT);
    const { text, values } = insertOutboxStatement(schema, chunk);
    const { rows } = await executor.query<{ id: unknown }>(text, values);
    if (rows.length !== chunk.length) {
      throw new StoreError(`The outbox insert answered ${rows.length} ids for ${chunk.length} messages`);
    }
    // Identities grow in insert order, and the statement inserts in the order given.
    ids.push(...rows.map((r) => toRowId(r.id)).sort(compareIds));
  }
  return ids;
}

/** The keys of `messages` that will be written (duplicates allowed; the locks drop them). */
export function outboxKeysOf(messages: readonly Pick<NewOutboxMessage, 'key'>[]): string[] {
  return messages.flatMap((m) => (typeof m.key === 'string' ? [m.key] : []));
}

/**
 * Takes the per-key outbox locks of `keys` on `tx`, which must be a transaction (the locks last until it ends):
 * the distinct keys in ascending resource order, {@link LOCKS_PER_BATCH} per batch, so every writer takes them
 * in one order, each waiting at most `lockTimeoutMs` (default {@link KEY_LOCK_TIMEOUT_MS}) for another writer
 * of the key. When SQL Server refuses a lock the transaction must roll back:
 *
 * - -1 (timed out): `StoreUnavailableError` — another transaction holds the key; try again later.
 * - -3 (deadlock victim): `StoreError` with `context.appLockStatus` -3, which `isDeadlock` recognises, so the
 *   store's own transactions run again as after error 1205.
 * - anything else (-2 cancelled, -999 no open transaction or a bad call): `StoreError`.
 */
export async function lockOutboxKeys(
  tx: Pick<SqlExecutor, 'query'>,
  schema: string,
  keys: readonly string[],
  lockTimeoutMs: number = KEY_LOCK_TIMEOUT_MS,
): Promise<void> {
  const ordered = [...new Set(keys)]
    .map((key) => [outboxKeyLockResource(schema, key), key] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, key]) => key);
  for (let i = 0; i < ordered.length; i += LOCKS_PER_BATCH) {
    const { text, values } = lockOutboxKeysStatement(
      schema,
      ordered.slice(i, i + LOCKS_PER_BATCH),
      lockTimeoutMs,
    );
    const { rows } = await tx.query<{ status: unknown }>(text, values);
    const status = rows[0]?.status;
    if (typeof status === 'number' && status >= 0) continue;
    const context = { schema, appLockStatus: status, lockTimeoutMs };
    if (status === -1) {
      throw new StoreUnavailableError(
        `Timed out after ${lockTimeoutMs} ms waiting for the outbox key lock of a message (sp_getapplock -1): another transaction is writing rows of the same key; roll back and retry later`,
        { context },
      );
    }
    if (status === APPLOCK_DEADLOCK_STATUS) {
      throw new StoreError(
        'The outbox key lock of a message was chosen as a deadlock victim (sp_getapplock -3); roll the transaction back and run it again',
        { context },
      );
    }
    throw new StoreError(
      `Could not lock the outbox key of a message (sp_getapplock ${String(status)}); roll the transaction back and retry it`,
      { context },
    );
  }
}

/**
 * core's `OutboxStore` on SQL Server. Every operation is one batch in autocommit, except an insert of keyed rows
 * (one transaction that takes the locks of its keys, then inserts; see `lockOutboxKeysStatement`), so rows of one
 * key get ids in commit order across concurrent writers, and an insert of more rows than one statement takes
 * (one transaction of several statements). A claim or reclaim that met error 1222 (a lock wait past
 * TAKE_LOCK_TIMEOUT_MS) answers that nothing is claimable now. A claimed row that cannot be read goes dead alone,
 * with `unreadable row: …` as its error; the other rows are answered.
 */
export function createSqlServerOutboxStore(options: SqlServerOutboxStoreOptions): OutboxStore {
  const { executor, schema } = options;
  // Checked here too: an insert without keys never builds the lock statement, which checks it.
  const keyLockTimeoutMs = checkedKeyLockTimeoutMs(options.keyLockTimeoutMs ?? KEY_LOCK_TIMEOUT_MS);

  return {
    async insert(messages) {
      const keys = outboxKeysOf(messages);
      if (keys.length === 0 && messages.length <= MAX_ROWS_PER_STATEMENT) {
        return insertOutboxRows(executor, schema, messages);
      }
      return executor.transaction(async (tx) => {
        await lockOutboxKeys(tx, schema, keys, keyLockTimeoutMs);
        return insertOutboxRows(tx, schema, messages);
      });
    },

    claim: createOutboxClaim(options),

    markSent: (items) =>
      settle(executor, items, (valid) => markOutboxSentStatement(schema, valid), outboxState),
    retry: (items) => settle(executor, items, (valid) => retryOutboxStatement(schema, valid), outboxState),
    markDead: (items) =>
      settle(executor, items, (valid) => markOutboxDeadStatement(schema, valid), outboxState),
    release: (items) =>
      settle(executor, items, (valid) => releaseOutboxStatement(schema, valid), outboxState),

    reclaimExpired: (limit) => reclaimExpiredOutbox(executor, schema, limit),

    async get(id: RowId) {
      if (!isRowId(id)) return undefined;
      const { text, values } = getOutboxStatement(schema, id);
      const { rows } = await executor.query<RawRow>(text, values);
      return rows[0] ? toOutboxRow(rows[0]) : undefined;
    },
  };
}
