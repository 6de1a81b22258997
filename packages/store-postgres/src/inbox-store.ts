import type { ForwardItem, ForwardReport, InboxStore, RowId } from '@queuebox/core';
import { createPreparedGuard, type SqlExecutor } from './executor.ts';
import { createInboxBatcher } from './inbox-batch.ts';
import {
  claimInboxRows,
  forwardAndClaimInboxStatement,
  type InboxClaimParameters,
  inboxClaimParameters,
  readRelayClaim,
} from './inbox-claim.ts';
import { storeInboxRow } from './inbox-dedupe.ts';
import {
  forwardInboxStatement,
  getInboxStatement,
  markInboxDeadStatement,
  markInboxProcessedStatement,
  retryInboxStatement,
} from './inbox-sql.ts';
import { inlineBytesFor, readOutsideColumns } from './large-columns.ts';
import { reclaimExpiredInbox } from './lease.ts';
import { outboxKeysOf, withOutboxKeyLocks } from './outbox-store.ts';
import { compareIds, inboxState, type RawRow, toInboxRow, toRowId } from './rows.ts';
import { isRowId, settle, uniqueClaims } from './settle.ts';

/** What the inbox repository needs. */
export interface PostgresInboxStoreOptions {
  readonly executor: SqlExecutor;
  /** A schema name already checked by `quoteSchema` (the statements check it again). */
  readonly schema: string;
  /** Longest wait of a `store` for its answer, queue and statement (`InboxBatcherOptions.maxWaitMs`). Default 25000. */
  readonly maxWaitMs?: number;
  /** Most `store` calls waiting for a statement (`InboxBatcherOptions.maxQueued`). Default 2000. */
  readonly maxQueued?: number;
}

/**
 * core's `InboxStore` on PostgreSQL / PGlite. Every operation is one statement, `store` at most two, and a
 * `forward` that writes keyed outbox rows one transaction of two: the locks of those keys, then the forward.
 * Concurrent `store` calls are grouped into one statement by `createInboxBatcher` (group commit).
 */
export function createPostgresInboxStore(options: PostgresInboxStoreOptions): InboxStore {
  const { executor, schema } = options;
  const limits = executor.resultLimits;
  // The relay's claim and forward-and-claim run named: their texts are the same at every call (arrays carry the
  // rows), and PostgreSQL spent about 1 ms planning each, longer than a forward of 40 rows took to run. Guarded as the
  // outbox claims are (see `createPreparedGuard`): a generic plan made while the inbox was small is replaced.
  const prepared = createPreparedGuard();

  const storeBatched = createInboxBatcher({
    executor,
    schema,
    storeOne: (item) => storeInboxRow(executor, schema, item),
    ...(options.maxWaitMs === undefined ? {} : { maxWaitMs: options.maxWaitMs }),
    ...(options.maxQueued === undefined ? {} : { maxQueued: options.maxQueued }),
  });

  /**
   * The forward of `items`, with the claim of `claim` in the same statement when given (`answered`: its raw rows;
   * undefined when no item was valid, so nothing ran). The outbox rows draw their ids in the forward, so the key
   * locks come first, in the same transaction (stale items' keys are locked too: harmless, and known only once the
   * forward ran).
   */
  async function forwardWith(
    items: readonly ForwardItem[],
    claim: InboxClaimParameters | undefined,
  ): Promise<{ report: ForwardReport; answered: RawRow[] | undefined }> {
    const unique = uniqueClaims(items);
    const valid = unique.filter((i) => isRowId(i.id));
    let forwarded = new Set<string>();
    let outboxIds: string[] = [];
    let answered: RawRow[] | undefined;
    // How long the key locks waited for other transactions (an application's open transaction that enqueued a row
    // of one of the keys), reported as `keyWaitMs` when it is at least a millisecond.
    let keyWaitMs = 0;
    if (valid.length > 0) {
      const { text, values } = claim
        ? forwardAndClaimInboxStatement(schema, valid, claim)
        : forwardInboxStatement(schema, valid);
      const keys = outboxKeysOf(valid.map((i) => i.outbox));
      // Keyed rows: their key locks first, in the same transaction, never holding some while waiting for another.
      let rows: RawRow[];
      if (keys.length === 0) ({ rows } = await prepared.query<RawRow>(executor, text, values));
      else {
        const locked = await withOutboxKeyLocks(executor, schema, keys, (tx) =>
          prepared.query<RawRow>(tx, text, values, { inTransaction: true }),
        );
        rows = locked.result.rows;
        keyWaitMs = Math.round(locked.waitedMs);
      }
      forwarded = new Set(((rows[0]?.forwarded as unknown[] | null) ?? []).map(toRowId));
      outboxIds = ((rows[0]?.outbox_ids as unknown[] | null) ?? []).map(toRowId).sort(compareIds);
      // A combined statement that claimed nothing answers one row of NULLs (`readRelayClaim` drops it).
      answered = claim ? rows : undefined;
    }
    const settled = unique
      .filter((i) => forwarded.has(i.id))
      .map((i) => ({ id: i.id, state: 'Sent' as const }));
    const stale = unique.filter((i) => !forwarded.has(i.id)).map((i) => i.id);
    return {
      report: { settled, stale, outboxIds, ...(keyWaitMs > 0 ? { keyWaitMs } : {}) },
      answered,
    };
  }

  return {
    store: (message) => storeBatched({ message, state: 'pending', lastError: null }),
    storeDead: (message, reason) => storeBatched({ message, state: 'dead', lastError: reason }),

    claim: (claim) => claimInboxRows(executor, schema, claim),
    claimForRelay: (claim) =>
      claimInboxRows(executor, schema, { ...claim, takeOverExpired: false }, false, prepared),

    markProcessed: (items) =>
      settle(executor, items, (valid) => markInboxProcessedStatement(schema, valid), inboxState),
    retry: (items) => settle(executor, items, (valid) => retryInboxStatement(schema, valid), inboxState),
    markDead: (items) =>
      settle(executor, items, (valid) => markInboxDeadStatement(schema, valid), inboxState),

    forward: async (items) => (await forwardWith(items, undefined)).report,

    async forwardAndClaim(items, claim) {
      const parameters = inboxClaimParameters(executor, { ...claim, takeOverExpired: false }, false);
      const { report, answered } = await forwardWith(items, parameters);
      if (answered === undefined) {
        // Nothing to forward (or to claim): the claim alone.
        const claimed = await claimInboxRows(
          executor,
          schema,
          { ...claim, takeOverExpired: false },
          false,
          prepared,
        );
        return { forwarded: report, claimed };
      }
      return { forwarded: report, claimed: await readRelayClaim(executor, schema, answered) };
    },

    reclaimExpired: (sources, limit) => reclaimExpiredInbox(executor, schema, sources, limit),

    async get(id: RowId) {
      if (!isRowId(id)) return undefined;
      const { text, values } = getInboxStatement(schema, id, inlineBytesFor(limits, 1));
      const { rows } = await executor.query<RawRow>(text, values);
      await readOutsideColumns(executor, schema, 'inbox', rows, limits);
      return rows[0] ? toInboxRow(rows[0]) : undefined;
    },
  };
}
