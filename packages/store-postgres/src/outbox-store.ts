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
  tryOutboxKeysStatement,
  waitForOutboxKeyStatement,
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
 * How many times `withOutboxKeyLocks` waits for a busy key alone before it takes the keys in one go. Each try
 * needs every key free at once: under steady writes to several of a batch's keys that moment may never come (an
 * outside crash soak: six application writers, each holding its key up to 1.5 s, kept a forward from going through
 * for as long as they wrote, 45 s).
 */
export const KEY_LOCK_ROUNDS = 3;

/**
 * Runs `write` in a transaction that holds the per-key outbox locks of `keys` (those of `lockOutboxKeysStatement`),
 * without waiting for one of them while it holds another, `rounds` times at most. The locks are tried without
 * waiting; when another transaction holds one, this transaction ends at once (giving back what it took) and waits
 * for that lock alone in a transaction of its own, then tries again. Taken in one go, as `lockOutboxKeysStatement`
 * takes them, the relay's forward held the keys it had while it waited behind an application transaction that held
 * another: writers of those keys, whose transactions had nothing to do with that one, waited as long (an outside DBA
 * audit: an enqueue of another key took 12.9 s behind a transaction open for 15 s, 28 s behind one open for 42 s).
 * After `rounds` waits the keys are taken in one go after all, in key order, waiting for each: that always goes
 * through, once each holder in turn has ended.
 *
 * Answers `write`'s result and `waitedMs`: how long it waited for keys that other transactions held, the lock
 * statements of the waits for one key and the in-order lock statement when it comes to that, not the try without
 * waiting (0 when every key was free at the first try). An application transaction that enqueued a row of one of
 * the keys and stays open holds the forward that long; the relay reports it (`keyWaitMs`).
 */
export async function withOutboxKeyLocks<T>(
  executor: Pick<SqlExecutor, 'transaction'>,
  schema: string,
  keys: readonly string[],
  write: (tx: SqlExecutor) => Promise<T>,
  rounds = KEY_LOCK_ROUNDS,
): Promise<{ readonly result: T; readonly waitedMs: number }> {
  const attempt = tryOutboxKeysStatement(schema, keys);
  let waitedMs = 0;
  /** Runs a lock statement that may wait, adding how long it took to `waitedMs`. */
  const timed = async (tx: SqlExecutor, text: string, values: readonly unknown[]) => {
    const started = performance.now();
    try {
      await tx.query(text, values);
    } finally {
      waitedMs += performance.now() - started;
    }
  };
  for (let round = 0; round < rounds; round++) {
    const outcome = await executor.transaction(async (tx): Promise<{ busy: string } | { done: T }> => {
      const { rows } = await tx.query<{ busy: string[] | null }>(attempt.text, attempt.values);
      const busy = rows[0]?.busy?.[0];
      return busy === undefined ? { done: await write(tx) } : { busy };
    });
    if ('done' in outcome) return { result: outcome.done, waitedMs };
    const wait = waitForOutboxKeyStatement(outcome.busy);
    await executor.transaction((tx) => timed(tx, wait.text, wait.values));
  }
  const inOrder = lockOutboxKeysStatement(schema, keys);
  const result = await executor.transaction(async (tx) => {
    await timed(tx, inOrder.text, inOrder.values);
    return write(tx);
  });
  return { result, waitedMs };
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
