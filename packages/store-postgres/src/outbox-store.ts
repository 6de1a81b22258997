import { randomUUID } from 'node:crypto';
import type { ClaimOptions, NewOutboxMessage, OutboxRow, OutboxStore, RowId } from '@queuebox/core';
import { readClaimedRows, type UnreadableClaim } from '@queuebox/sql-store-common';
import type { SqlExecutor } from './executor.ts';
import { inlineBytesFor, readOutsideColumns } from './large-columns.ts';
import {
  claimOutboxStatement,
  enqueueOutboxStatement,
  getOutboxStatement,
  lockOutboxKeysStatement,
  markOutboxDeadStatement,
  markOutboxSentStatement,
  reclaimExpiredOutboxStatement,
  releaseOutboxStatement,
  retryOutboxStatement,
} from './outbox-sql.ts';
import { compareIds, outboxState, POSTGRES_READERS, type RawRow, toOutboxRow, toRowId } from './rows.ts';
import { DEFAULT_RECLAIM_LIMIT, isRowId, settle } from './settle.ts';

/**
 * How often one claim runs its statement again when candidate heads were lost to concurrent claimers and the
 * batch is not full.
 */
const CONTENDED_RETRIES = 2;

/** Default most distinct keys one claim visits before it gives up for this call. */
export const DEFAULT_KEY_SCAN_LIMIT = 1000;

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
 * ids in commit order across concurrent writers. The only state is where the
 * next claim's key walk starts (the last key this instance claimed or visited): it spreads claims over the keys
 * and lets a claim get past a long run of blocked keys; correctness never depends on it.
 */
export function createPostgresOutboxStore(options: PostgresOutboxStoreOptions): OutboxStore {
  const { executor, schema } = options;
  const keyScanLimit = Math.max(1, Math.floor(options.keyScanLimit ?? DEFAULT_KEY_SCAN_LIMIT));
  const limits = executor.resultLimits;
  let startAfterKey: string | null = null;
  let claims = 0;

  return {
    async insert(messages) {
      if (messages.length === 0) return [];
      // One statement, locks of the keys included: its own transaction holds them until it commits.
      const { text, values } = enqueueOutboxStatement(schema, messages);
      const { rows } = await executor.query<{ id: unknown }>(text, values);
      // Identities grow in insert order, and the statement inserts in the order given.
      return rows.map((r) => toRowId(r.id)).sort(compareIds);
    },

    async claim({ batchSize, leaseMs }: ClaimOptions): Promise<OutboxRow[]> {
      const n = Math.floor(batchSize);
      if (!(n > 0)) return [];
      // One token for the whole claim, also when a contended statement is run again.
      const claimToken = randomUUID();
      const claimed: OutboxRow[] = [];
      const unreadable: UnreadableClaim[] = [];
      for (let round = 0; round <= CONTENDED_RETRIES && claimed.length < n; round++) {
        const places = n - claimed.length;
        // Alternate ⌊n/2⌋ and ⌈n/2⌉ places for unkeyed rows, so at batch size 1 both kinds take turns.
        const unkeyedReserve = claims++ % 2 === 0 ? Math.floor(places / 2) : Math.ceil(places / 2);
        const { text, values } = claimOutboxStatement(schema, {
          batchSize: places,
          unkeyedReserve,
          leaseMs,
          startAfterKey,
          keyScanLimit,
          claimToken,
          ...(limits === undefined ? {} : { inlineBytes: inlineBytesFor(limits, places) }),
        });
        const { rows } = await executor.query<RawRow & { next_key: unknown; contended: unknown }>(
          text,
          values,
        );
        await readOutsideColumns(
          executor,
          schema,
          'outbox',
          rows.filter((r) => r.id !== null && r.id !== undefined),
          limits,
        );
        const first = rows[0];
        if (first) startAfterKey = typeof first.next_key === 'string' ? first.next_key : null;
        const read = readClaimedRows(
          rows.filter((row) => row.id !== null && row.id !== undefined),
          toOutboxRow,
          POSTGRES_READERS,
        );
        claimed.push(...read.rows);
        unreadable.push(...read.unreadable);
        // Heads lost to concurrent claimers were seen in a snapshot that is already old; a new statement sees
        // the heads behind them. Without contention a short answer means there is no more to claim.
        if (first?.contended !== true) break;
      }
      if (unreadable.length > 0) {
        // A row this reader cannot map goes dead alone; best effort, or its lease expires as after a crash.
        const dead = markOutboxDeadStatement(schema, unreadable);
        await executor.query(dead.text, dead.values).catch(() => undefined);
      }
      return claimed.sort((a, b) => compareIds(a.id, b.id));
    },

    markSent: (items) =>
      settle(executor, items, (valid) => markOutboxSentStatement(schema, valid), outboxState),
    retry: (items) => settle(executor, items, (valid) => retryOutboxStatement(schema, valid), outboxState),
    markDead: (items) =>
      settle(executor, items, (valid) => markOutboxDeadStatement(schema, valid), outboxState),
    release: (items) =>
      settle(executor, items, (valid) => releaseOutboxStatement(schema, valid), outboxState),

    async reclaimExpired(limit = DEFAULT_RECLAIM_LIMIT) {
      const { text, values } = reclaimExpiredOutboxStatement(schema, Math.max(0, Math.floor(limit)));
      const { rows } = await executor.query<{ returned: number; dead: number }>(text, values);
      return { returned: Number(rows[0]?.returned ?? 0), dead: Number(rows[0]?.dead ?? 0) };
    },

    async get(id: RowId) {
      if (!isRowId(id)) return undefined;
      const { text, values } = getOutboxStatement(schema, id, inlineBytesFor(limits, 1));
      const { rows } = await executor.query<RawRow>(text, values);
      await readOutsideColumns(executor, schema, 'outbox', rows, limits);
      return rows[0] ? toOutboxRow(rows[0]) : undefined;
    },
  };
}
