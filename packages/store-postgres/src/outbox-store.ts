import type { NewOutboxMessage, OutboxStore, RowId } from '@queuebox/core';
import { createPreparedGuard, type SqlExecutor } from './executor.ts';
import { inlineBytesFor, readOutsideColumns } from './large-columns.ts';
import { reclaimExpiredOutbox } from './lease.ts';
import { createOutboxClaim } from './outbox-claim.ts';
import {
  enqueueOutboxStatement,
  getOutboxStatement,
  lockOutboxKeysStatement,
  markOutboxDeadStatement,
  markOutboxSentStatement,
  releaseOutboxStatement,
  retryOutboxStatement,
} from './outbox-sql.ts';
import { compareIds, outboxState, type RawRow, toOutboxRow, toRowId } from './rows.ts';
import { isRowId, settle } from './settle.ts';

/** What the outbox repository needs. */
export interface PostgresOutboxStoreOptions {
  readonly executor: SqlExecutor;
  /** A schema name already checked by `quoteSchema` (the statements check it again). */
  readonly schema: string;
  /** Most distinct keys one claim visits. Default 1000. */
  readonly keyScanLimit?: number;
}

/** The keys of `messages` that will be written (duplicates allowed; the lock statement drops them). */
export function outboxKeysOf(messages: readonly Pick<NewOutboxMessage, 'key'>[]): string[] {
  return messages.flatMap((m) => (typeof m.key === 'string' ? [m.key] : []));
}

/**
 * Takes the per-key outbox locks of `keys` (see `lockOutboxKeysStatement`) on `tx`, which must be a
 * transaction: the locks last until it ends.
 */
export async function lockOutboxKeys(
  tx: Pick<SqlExecutor, 'query'>,
  schema: string,
  keys: readonly string[],
): Promise<void> {
  const { text, values } = lockOutboxKeysStatement(schema, keys);
  await tx.query(text, values);
}

/**
 * core's `OutboxStore` on PostgreSQL / PGlite. Every operation is one statement; an insert of keyed rows takes the
 * locks of its keys in that statement before it draws ids (see `enqueueOutboxStatement`), so rows of one key get
 * ids in commit order across concurrent writers. The claim is outbox-claim.ts's, the reclaim of
 * expired leases lease.ts's.
 */
export function createPostgresOutboxStore(options: PostgresOutboxStoreOptions): OutboxStore {
  const { executor, schema } = options;
  const limits = executor.resultLimits;
  // markSent, the settle of almost every delivered row, runs named (its two texts are the same at every call):
  // planning it took about a fifth of its execution. Guarded as the claims are (see `createPreparedGuard`).
  const prepared = createPreparedGuard();
  const namedExecutor: SqlExecutor = {
    ...(limits === undefined ? {} : { resultLimits: limits }),
    query: (text, values, queryOptions) =>
      queryOptions === undefined && values !== undefined && values.length > 0
        ? prepared.query(executor, text, values)
        : executor.query(text, values, queryOptions),
    transaction: (fn) => executor.transaction(fn),
    close: () => executor.close(),
  };

  return {
    async insert(messages) {
      if (messages.length === 0) return [];
      // One statement, locks of the keys included: its own transaction holds them until it commits.
      const { text, values } = enqueueOutboxStatement(schema, messages);
      const { rows } = await executor.query<{ id: unknown }>(text, values);
      // Identities grow in insert order, and the statement inserts in the order given.
      return rows.map((r) => toRowId(r.id)).sort(compareIds);
    },

    claim: createOutboxClaim(options),

    markSent: (items) =>
      settle(namedExecutor, items, (valid) => markOutboxSentStatement(schema, valid), outboxState),
    retry: (items) => settle(executor, items, (valid) => retryOutboxStatement(schema, valid), outboxState),
    markDead: (items) =>
      settle(executor, items, (valid) => markOutboxDeadStatement(schema, valid), outboxState),
    release: (items) =>
      settle(executor, items, (valid) => releaseOutboxStatement(schema, valid), outboxState),

    reclaimExpired: (limit) => reclaimExpiredOutbox(executor, schema, limit),

    async get(id: RowId) {
      if (!isRowId(id)) return undefined;
      const { text, values } = getOutboxStatement(schema, id, inlineBytesFor(limits, 1));
      const { rows } = await executor.query<RawRow>(text, values);
      await readOutsideColumns(executor, schema, 'outbox', rows, limits);
      return rows[0] ? toOutboxRow(rows[0]) : undefined;
    },
  };
}
