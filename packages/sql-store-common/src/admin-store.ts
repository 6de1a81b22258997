import {
  ADMIN_DEAD_GROUPS_LIMIT,
  ADMIN_LIST_MAX_LIMIT,
  ADMIN_MAX_BATCH_SIZE,
  type AdminListOptions,
  type AdminPage,
  type AdminStore,
  type AdminTableStats,
  type InboxRow,
  type MessageState,
  type OutboxRow,
  QueueBoxError,
  type RequeueResult,
  type RequeueSelection,
  type RowId,
  type Table,
} from '@queuebox/core';
import type { ColumnReaders, SqlExecutor, Statement } from './dialect.ts';
import { compareIds, createRowMappers, inboxState, outboxState, type RawRow } from './rows.ts';
import { isRowId } from './settle.ts';

/** Filters of a list or a requeue. */
export interface AdminFilter {
  /** A known state (its literal is a parameter) or `Failed` (every literal this version does not know). */
  readonly state?: MessageState;
  /** Outbox only. */
  readonly topic?: string;
  /** Inbox only. */
  readonly source?: string;
  readonly ids?: readonly RowId[];
}

/**
 * A dialect's admin statements, one function each, named as its admin-sql.ts names them (so that module's
 * functions can be passed as they are), plus the outbox read that replay uses.
 */
export interface AdminStatements<V> {
  readonly adminStateCountsStatement: (schema: string, table: Table) => Statement<V>;
  readonly adminOldestPendingStatement: (schema: string, table: Table) => Statement<V>;
  readonly adminDeadGroupsStatement: (schema: string, table: Table, limit: number) => Statement<V>;
  readonly adminNextDueStatement: (
    schema: string,
    table: Table,
    sources: readonly string[] | null,
  ) => Statement<V>;
  readonly adminListStatement: (
    schema: string,
    table: Table,
    filter: AdminFilter,
    afterId: RowId | null,
    limit: number,
  ) => Statement<V>;
  readonly adminRequeuePreviewStatement: (
    schema: string,
    table: Table,
    filter: AdminFilter,
    limit: number,
  ) => Statement<V>;
  readonly adminRequeueStatement: (
    schema: string,
    table: Table,
    filter: AdminFilter,
    batchSize: number,
  ) => Statement<V>;
  /** Outbox: the first dead rows a requeue may take (key idle), with their keys, locked for its transaction. */
  readonly adminRequeueCandidatesStatement: (
    schema: string,
    filter: AdminFilter,
    batchSize: number,
  ) => Statement<V>;
  /** Outbox: locks the pending rows of `keys`, waiting for a claim that holds one to commit. */
  readonly adminLockPendingKeyRowsStatement: (schema: string, keys: readonly string[]) => Statement<V>;
  /** Outbox: dead rows of `filter` whose key has a row processing (`id`, `key`, `processing_id`, `total`). */
  readonly adminKeysInFlightStatement: (schema: string, filter: AdminFilter, limit: number) => Statement<V>;
  readonly adminReplayStatement: (schema: string, id: RowId) => Statement<V>;
  readonly adminPurgeStatement: (
    schema: string,
    table: Table,
    state: 'Sent' | 'Dead',
    olderThanMs: number,
    batchSize: number,
  ) => Statement<V>;
  /** Selects one outbox row by id (at least its `state` and `key` columns). */
  readonly getOutboxStatement: (schema: string, id: RowId) => Statement<V>;
}

/** Default rows of one requeue call. */
export const DEFAULT_REQUEUE_BATCH_SIZE = 500;

/** Most rows a requeue lists in `skipped.rows` (its `count` covers them all). */
export const KEYS_IN_FLIGHT_REPORTED = 100;

/**
 * core's `RequeueResult`, whose `skipped` the SQL stores fill: the dead outbox rows of the selection a requeue leaves
 * dead because a row of their key is processing (at most {@link KEYS_IN_FLIGHT_REPORTED} listed).
 */
export type SqlRequeueResult = RequeueResult;

/** What the admin repository needs: the dialect's executor, statements, column readers and key locks. */
export interface SqlAdminStoreOptions<V> {
  readonly executor: SqlExecutor<V>;
  /** A schema name already checked by the dialect's `quoteSchema` (the statements check it again). */
  readonly schema: string;
  readonly statements: AdminStatements<V>;
  readonly readers: ColumnReaders;
  /**
   * Takes the per-key outbox insert locks of `keys` on `tx`, a transaction (the locks last until it ends), as
   * every other keyed outbox write does.
   */
  readonly lockOutboxKeys: (tx: SqlExecutor<V>, keys: readonly string[]) => Promise<void>;
  /**
   * Completes the rows a list answered before they are mapped (a dialect whose executor limits the size of an
   * answer reads large columns in a second step). Default: nothing.
   */
  readonly completeRows?: (table: Table, rows: RawRow[]) => Promise<void>;
}

/** A whole number within [min, max]; NaN and non-numbers become `min`. */
function clamp(value: number, min: number, max: number): number {
  const n = Math.floor(Number(value));
  return Number.isFinite(n) ? Math.min(max, Math.max(min, n)) : min;
}

function count(value: unknown): number {
  const n = Number(value);
  return Number.isFinite(n) ? n : 0;
}

/** The selection as statement filters; an id that cannot name a row cannot be dead, so it is dropped. */
function requeueFilter(selection: RequeueSelection): AdminFilter {
  return {
    ...(selection.ids === undefined ? {} : { ids: selection.ids.filter(isRowId) }),
    ...(selection.topic === undefined ? {} : { topic: selection.topic }),
    ...(selection.source === undefined ? {} : { source: selection.source }),
  };
}

/**
 * core's `AdminStore` on any SQL dialect. Every call is one statement in autocommit (stats: three per table),
 * except a replay of a keyed row (its key lock, then the copy, in one transaction) and an outbox requeue (one
 * short transaction per batch, see `requeueOutbox`, and the report of the rows it left dead); bulk work is one
 * batch per call, so no long transaction ever holds locks. Requeue batches default to
 * {@link DEFAULT_REQUEUE_BATCH_SIZE}; a requeue answers a {@link SqlRequeueResult}.
 */
export function createSqlAdminStore<V>(options: SqlAdminStoreOptions<V>): AdminStore {
  const { executor, schema, statements, readers, lockOutboxKeys, completeRows } = options;
  const {
    adminStateCountsStatement,
    adminOldestPendingStatement,
    adminDeadGroupsStatement,
    adminNextDueStatement,
    adminListStatement,
    adminRequeuePreviewStatement,
    adminRequeueStatement,
    adminRequeueCandidatesStatement,
    adminLockPendingKeyRowsStatement,
    adminKeysInFlightStatement,
    adminReplayStatement,
    adminPurgeStatement,
    getOutboxStatement,
  } = statements;
  const { toRowId, toDate } = readers;
  const { toOutboxRow, toInboxRow } = createRowMappers(readers);

  async function tableStats(table: Table): Promise<AdminTableStats & { dead: Record<string, number> }> {
    const stateOf = table === 'outbox' ? outboxState : inboxState;
    const counts: Record<MessageState, number> = { Pending: 0, Processing: 0, Sent: 0, Dead: 0, Failed: 0 };
    const byState = adminStateCountsStatement(schema, table);
    for (const row of (await executor.query<{ state: unknown; n: unknown }>(byState.text, byState.values))
      .rows) {
      counts[stateOf(row.state)] += count(row.n);
    }
    const oldest = adminOldestPendingStatement(schema, table);
    const age = (await executor.query<{ age_ms: unknown }>(oldest.text, oldest.values)).rows[0]?.age_ms;
    const groups = adminDeadGroupsStatement(schema, table, ADMIN_DEAD_GROUPS_LIMIT);
    const dead: Record<string, number> = {};
    for (const row of (await executor.query<{ name: unknown; n: unknown }>(groups.text, groups.values))
      .rows) {
      dead[String(row.name)] = count(row.n);
    }
    return {
      counts,
      oldestPendingAgeMs: age === null || age === undefined ? null : Math.max(0, count(age)),
      dead,
    };
  }

  async function list(table: Table, options: AdminListOptions): Promise<AdminPage<OutboxRow | InboxRow>> {
    const limit = clamp(options.limit, 1, ADMIN_LIST_MAX_LIMIT);
    const cursor = options.cursor ?? null;
    if (cursor !== null && !isRowId(cursor)) {
      throw new QueueBoxError(`The cursor ${JSON.stringify(cursor)} is not one this store handed out`, {
        context: { table },
      });
    }
    const filter: AdminFilter = {
      ...(options.state === undefined ? {} : { state: options.state }),
      ...(options.topic === undefined ? {} : { topic: options.topic }),
      ...(options.source === undefined ? {} : { source: options.source }),
    };
    // One row more than asked tells whether another page exists without a second query.
    const { text, values } = adminListStatement(schema, table, filter, cursor, limit + 1);
    const { rows } = await executor.query<RawRow>(text, values);
    await completeRows?.(table, rows);
    const toRow: (row: RawRow) => OutboxRow | InboxRow = table === 'outbox' ? toOutboxRow : toInboxRow;
    const page = rows.slice(0, limit).map(toRow);
    const last = page[page.length - 1];
    return { rows: page, nextCursor: rows.length > limit && last ? last.id : null };
  }

  /**
   * One outbox requeue batch in `tx`: the candidates (dead, key idle) locked; their keys' insert locks, so no
   * keyed insert of those keys commits meanwhile (its row could be claimed before the requeue commits); the
   * keys' pending rows locked, waiting for a claim that holds one; then the update, which checks the keys again
   * with what those claims committed. Answers how many candidates there were and the ids requeued.
   */
  async function requeueOutbox(
    tx: SqlExecutor<V>,
    filter: AdminFilter,
    batchSize: number,
  ): Promise<{ taken: number; ids: RowId[] }> {
    const chosen = adminRequeueCandidatesStatement(schema, filter, batchSize);
    const candidates = (await tx.query<{ id: unknown; key: unknown }>(chosen.text, chosen.values)).rows;
    if (candidates.length === 0) return { taken: 0, ids: [] };
    const keys = [...new Set(candidates.flatMap((r) => (typeof r.key === 'string' ? [r.key] : [])))];
    if (keys.length > 0) {
      await lockOutboxKeys(tx, keys);
      const pending = adminLockPendingKeyRowsStatement(schema, keys);
      await tx.query(pending.text, pending.values);
    }
    const ids = candidates.map((r) => toRowId(r.id));
    const { text, values } = adminRequeueStatement(schema, 'outbox', { ids }, ids.length);
    const { rows } = await tx.query<{ id: unknown }>(text, values);
    return { taken: candidates.length, ids: rows.map((r) => toRowId(r.id)).sort(compareIds) };
  }

  /** `result` with the dead rows of `filter` whose key has a row processing, when there are any. */
  async function withKeysInFlight(result: RequeueResult, filter: AdminFilter): Promise<SqlRequeueResult> {
    const { text, values } = adminKeysInFlightStatement(schema, filter, KEYS_IN_FLIGHT_REPORTED);
    const { rows } = await executor.query<{
      id: unknown;
      key: unknown;
      processing_id: unknown;
      total: unknown;
    }>(text, values);
    if (rows.length === 0) return result;
    return {
      ...result,
      skipped: {
        reason: 'key_in_flight',
        count: count(rows[0]?.total),
        rows: rows.map((r) => ({
          id: toRowId(r.id),
          key: String(r.key),
          processingId: toRowId(r.processing_id),
        })),
      },
    };
  }

  return {
    async stats() {
      const { dead: deadByTopic, ...outbox } = await tableStats('outbox');
      const { dead: deadBySource, ...inbox } = await tableStats('inbox');
      return { outbox: { ...outbox, deadByTopic }, inbox: { ...inbox, deadBySource } };
    },

    list: list as AdminStore['list'],

    async requeue(table, selection, options = {}): Promise<SqlRequeueResult> {
      const batchSize = clamp(options.batchSize ?? DEFAULT_REQUEUE_BATCH_SIZE, 1, ADMIN_MAX_BATCH_SIZE);
      const filter = requeueFilter(selection);
      if (filter.ids !== undefined && filter.ids.length === 0) {
        return { dryRun: options.dryRun === true, count: 0, ids: [], more: false };
      }
      if (options.dryRun === true) {
        const { text, values } = adminRequeuePreviewStatement(schema, table, filter, batchSize);
        const { rows } = await executor.query<{ id: unknown; total: unknown }>(text, values);
        const total = count(rows[0]?.total);
        const preview = {
          dryRun: true,
          count: total,
          ids: rows.map((r) => toRowId(r.id)),
          more: total > rows.length,
        };
        return table === 'outbox' ? withKeysInFlight(preview, filter) : preview;
      }
      if (table === 'inbox') {
        const { text, values } = adminRequeueStatement(schema, table, filter, batchSize);
        const { rows } = await executor.query<{ id: unknown }>(text, values);
        const ids = rows.map((r) => toRowId(r.id)).sort(compareIds);
        return { dryRun: false, count: ids.length, ids, more: ids.length === batchSize };
      }
      const { taken, ids } = await executor.transaction((tx) => requeueOutbox(tx, filter, batchSize));
      const result = { dryRun: false, count: ids.length, ids, more: taken === batchSize };
      // A full batch is followed by another call, whose answer reports the rows left dead.
      return result.more ? result : withKeysInFlight(result, filter);
    },

    async replay(outboxId) {
      if (!isRowId(outboxId)) return { status: 'not_found' };
      const get = getOutboxStatement(schema, outboxId);
      const readState = async () =>
        (await executor.query<{ state: unknown; key: unknown }>(get.text, get.values)).rows[0];
      const original = await readState();
      if (original === undefined) return { status: 'not_found' };
      const { text, values } = adminReplayStatement(schema, outboxId);
      // A keyed copy takes the key's insert lock like every other outbox write, so its id follows commit order.
      const key = typeof original.key === 'string' ? original.key : null;
      const rows =
        key === null
          ? (await executor.query<{ id: unknown }>(text, values)).rows
          : await executor.transaction(async (tx) => {
              await lockOutboxKeys(tx, [key]);
              return (await tx.query<{ id: unknown }>(text, values)).rows;
            });
      if (rows[0]) return { status: 'replayed', id: toRowId(rows[0].id) };
      // Nothing copied: tell a missing row from one that is not sent (a race with retention reads as either).
      const state = (await readState())?.state;
      return state === undefined
        ? { status: 'not_found' }
        : { status: 'not_sent', state: outboxState(state) };
    },

    async purge({ table, state, olderThanMs, batchSize }) {
      // A bad age or state must never widen a delete: refuse it rather than guess.
      if (state !== 'Sent' && state !== 'Dead') {
        throw new QueueBoxError(`A purge deletes Sent or Dead rows, not ${String(state)}`, {
          context: { table },
        });
      }
      if (!(Number.isFinite(olderThanMs) && olderThanMs >= 0)) {
        throw new QueueBoxError(`A purge needs an age of 0 ms or more, not ${olderThanMs}`, {
          context: { table, state },
        });
      }
      const { text, values } = adminPurgeStatement(
        schema,
        table,
        state,
        olderThanMs,
        clamp(batchSize, 1, ADMIN_MAX_BATCH_SIZE),
      );
      return (await executor.query(text, values)).rowCount;
    },

    async nextDue(table, options = {}) {
      const sources = table === 'inbox' && options.sources !== undefined ? options.sources : null;
      if (sources !== null && sources.length === 0) return null;
      const { text, values } = adminNextDueStatement(schema, table, sources);
      const due = (await executor.query<{ next_due: unknown }>(text, values)).rows[0]?.next_due;
      return due === null || due === undefined ? null : toDate(due);
    },
  };
}
