import {
  ADMIN_DEAD_GROUPS_LIMIT,
  ADMIN_LIST_MAX_LIMIT,
  ADMIN_MAX_BATCH_SIZE,
  type AdminListOptions,
  type AdminPage,
  type AdminStore,
  type AdminTableGauges,
  type AdminTableStats,
  type InboxRow,
  type MessageState,
  type OutboxRow,
  type PurgeOptions,
  QueueBoxError,
  type RedactResult,
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
  /**
   * One row for the gauges, each count from the partial index that holds its rows: `pending`, `processing`, `dead`,
   * `unknown` (state literals this version does not know), and `rows_estimate`, the table's rows by the database's
   * statistics (NULL when it has none). Reads no finished row.
   */
  readonly adminGaugeCountsStatement: (schema: string, table: Table) => Statement<V>;
  /** Dead rows of the table (`n`), read from an index that holds them, not every row. */
  readonly adminDeadCountStatement: (schema: string, table: Table) => Statement<V>;
  readonly adminDeadGroupsStatement: (schema: string, table: Table, limit: number) => Statement<V>;
  readonly adminNextDueStatement: (
    schema: string,
    table: Table,
    sources: readonly string[] | null,
  ) => Statement<V>;
  /**
   * One page in ascending id order after the cursor. A page of one state reads that state's rows from an index that
   * holds them (dead rows and unknown literals in id order; pending ones from the claims' indexes, sorted), not the
   * primary key past the rows of the other states.
   */
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
  /**
   * Outbox: the rows one requeue batch takes, whole keys: the first `batchSize` dead rows a requeue may take (key
   * idle), ascending id, and the other dead rows of their keys that the dialect finds (ahead of them, within a
   * bounded read), at most `maxRows` in all (keys in the order of their first row; the first key alone may fill the
   * batch), locked for its transaction, rows another transaction holds skipped, not waited for. Answers `id`, `key`
   * and `taken`, how many of the first `batchSize` rows were found.
   */
  readonly adminRequeueCandidatesStatement: (
    schema: string,
    filter: AdminFilter,
    batchSize: number,
    maxRows: number,
  ) => Statement<V>;
  /**
   * Outbox: locks the head of each of `keys` (its smallest pending-or-processing id) without waiting; answers
   * `held_key`, one row per key whose head another transaction held (a claim, settle or reclaim of it at that
   * moment) or that changed since the statement began: the requeue leaves that key's rows dead (`key_busy`). Run
   * after the keys' insert locks were obtained (`tryLockOutboxKeys`). A requeue waits for no lock, so it is in no
   * deadlock with the runtime's claims and settles.
   */
  readonly adminLockPendingKeyRowsStatement: (schema: string, keys: readonly string[]) => Statement<V>;
  /**
   * Dead rows of `filter` whose key (outbox) or source and aggregate id (inbox, answered as `key`) has a row
   * processing (`id`, `key`, `processing_id`, `total`).
   */
  readonly adminKeysInFlightStatement: (
    schema: string,
    table: Table,
    filter: AdminFilter,
    limit: number,
  ) => Statement<V>;
  readonly adminReplayStatement: (schema: string, id: RowId) => Statement<V>;
  /** Erases the message data of one final row; answers its `id` when it changed it, no row otherwise. */
  readonly adminRedactStatement: (schema: string, table: Table, id: RowId) => Statement<V>;
  /** The stored `state` literal of one row; no row when there is none. */
  readonly adminRowStateStatement: (schema: string, table: Table, id: RowId) => Statement<V>;
  readonly adminPurgeStatement: (
    schema: string,
    table: Table,
    state: 'Sent' | 'Dead',
    olderThanMs: number,
    batchSize: number,
  ) => Statement<V>;
  /**
   * How many rows `adminPurgeStatement` with the same arguments would delete, all batches together (`n`): a purge's
   * dry run. Optional: a dialect without it offers no `countPurge` (see {@link SqlAdminStore}).
   */
  readonly adminPurgeCountStatement?: (
    schema: string,
    table: Table,
    state: 'Sent' | 'Dead',
    olderThanMs: number,
  ) => Statement<V>;
  /** Selects one outbox row by id (at least its `state` and `key` columns). */
  readonly getOutboxStatement: (schema: string, id: RowId) => Statement<V>;
}

/**
 * core's `AdminStore`, and the dry run of a purge, which the port does not declare: `countPurge`, what `purge` calls
 * with these options would delete, counted, nothing deleted. Present when the dialect gives
 * `adminPurgeCountStatement` (PostgreSQL and PGlite; not SQL Server yet); `@queuebox/admin`'s `purgeCounterOf` finds
 * it on a store's `admin`.
 */
export type SqlAdminStore = AdminStore & {
  countPurge?(options: Omit<PurgeOptions, 'batchSize'>): Promise<number>;
};

/** Default rows of one requeue call. */
export const DEFAULT_REQUEUE_BATCH_SIZE = 500;

/**
 * Most rows one outbox requeue batch takes when it completes the keys of its first `batchSize` rows (whole keys:
 * `AdminStatements.adminRequeueCandidatesStatement`): `ADMIN_MAX_BATCH_SIZE`, the largest batch an operator may ask
 * for, and never more than the dialect's `maxRowsPerStatement` (SQL Server: 4,000). A key with more dead rows than
 * this goes in several batches.
 */
export const REQUEUE_WHOLE_KEYS_MAX_ROWS = ADMIN_MAX_BATCH_SIZE;

/** Most rows a requeue lists in `skipped.rows` (its `count` covers them all). */
export const KEYS_IN_FLIGHT_REPORTED = 100;

/**
 * core's `RequeueResult`, whose `skipped` and `keyBusy` the SQL stores fill: the dead rows of the selection a requeue
 * leaves dead because a row of their key (outbox) or of their source and aggregate id (inbox) is processing
 * (`key_in_flight`), or, outbox only, because another transaction held their key's insert lock (`key_busy`), at most
 * {@link KEYS_IN_FLIGHT_REPORTED} of each listed.
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
   * Takes the per-key outbox insert locks of `keys` (the ones every keyed outbox write takes) on `tx` without
   * waiting: answers the keys whose lock it obtained (they last until the transaction ends) and leaves out a key
   * another transaction holds. A requeue and a replay take their keys' this way (see `createSqlAdminStore`).
   * Throws for anything but obtained or held elsewhere.
   */
  readonly tryLockOutboxKeys: (tx: SqlExecutor<V>, keys: readonly string[]) => Promise<ReadonlySet<string>>;
  /**
   * Most rows one requeue or purge statement may take: a larger batch runs as several statements of at most this
   * many (an outbox requeue: several short transactions), answered as one call of the whole size. Default: no limit,
   * one statement per batch.
   */
  readonly maxRowsPerStatement?: number;
  /**
   * Completes the rows a list answered before they are mapped (a dialect whose executor limits the size of an
   * answer reads large columns in a second step). Default: nothing.
   */
  readonly completeRows?: (table: Table, rows: RawRow[]) => Promise<void>;
}

/** One dead outbox row a requeue batch chose. */
interface Candidate {
  readonly id: RowId;
  readonly key: string | null;
}

/**
 * What one outbox requeue transaction did: how many of the first rows it asked for it found (`taken`; the whole keys
 * it took may be more rows), the ids it requeued, and the candidates it left dead because another transaction held
 * their key or its head (`busy`).
 */
interface OutboxBatch {
  readonly taken: number;
  readonly ids: RowId[];
  readonly busy: Candidate[];
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
 * Runs `step` with parts of at most `maxRows` rows until `total` rows are taken or a part comes back short (or, with
 * `stop`, a part says so); answers what the parts did, in order. One part when `total` fits.
 */
async function inParts<R extends { readonly taken: number }>(
  total: number,
  maxRows: number,
  step: (rows: number) => Promise<R>,
  stop: (part: R) => boolean = () => false,
): Promise<R[]> {
  const parts: R[] = [];
  for (let left = total; left > 0; ) {
    const rows = Math.min(left, maxRows);
    const part = await step(rows);
    parts.push(part);
    left -= part.taken;
    if (part.taken < rows || stop(part)) break;
  }
  return parts;
}

/** Refuses a purge (or its count) whose state or age is not one it takes. */
function checkPurge(table: Table, state: 'Sent' | 'Dead', olderThanMs: number): void {
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
}

/** The `keyBusy` part of a requeue's answer, when rows were left dead for it. */
function busyReport(busy: readonly Candidate[]): Pick<RequeueResult, 'keyBusy'> {
  if (busy.length === 0) return {};
  const rows = [...busy]
    .sort((a, b) => compareIds(a.id, b.id))
    .slice(0, KEYS_IN_FLIGHT_REPORTED)
    .map((c) => ({ id: c.id, key: c.key ?? '' }));
  return { keyBusy: { reason: 'key_busy', count: busy.length, rows } };
}

/**
 * core's `AdminStore` on any SQL dialect. Every call is one statement in autocommit (stats: three per table), except
 * a replay of a keyed row (its key lock, then the copy, in one transaction), an outbox requeue (one short transaction
 * per batch, see `requeueOutboxBatch`, and the report of the rows it left dead) and a batch larger than
 * `maxRowsPerStatement` (several statements); bulk work is one batch per call, so no long transaction ever holds
 * locks. Requeue batches default to {@link DEFAULT_REQUEUE_BATCH_SIZE}; a requeue answers a {@link SqlRequeueResult}.
 */
export function createSqlAdminStore<V>(options: SqlAdminStoreOptions<V>): SqlAdminStore {
  const { executor, schema, statements, readers, tryLockOutboxKeys, completeRows } = options;
  const maxRows = options.maxRowsPerStatement ?? Number.POSITIVE_INFINITY;
  const {
    adminStateCountsStatement,
    adminOldestPendingStatement,
    adminGaugeCountsStatement,
    adminDeadCountStatement,
    adminDeadGroupsStatement,
    adminNextDueStatement,
    adminListStatement,
    adminRequeuePreviewStatement,
    adminRequeueStatement,
    adminRequeueCandidatesStatement,
    adminLockPendingKeyRowsStatement,
    adminKeysInFlightStatement,
    adminReplayStatement,
    adminRedactStatement,
    adminRowStateStatement,
    adminPurgeStatement,
    adminPurgeCountStatement,
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
    const age = await oldestPendingAgeMs(table);
    const groups = adminDeadGroupsStatement(schema, table, ADMIN_DEAD_GROUPS_LIMIT);
    const dead: Record<string, number> = {};
    for (const row of (await executor.query<{ name: unknown; n: unknown }>(groups.text, groups.values))
      .rows) {
      dead[String(row.name)] = count(row.n);
    }
    return { counts, oldestPendingAgeMs: age, dead };
  }

  async function tableGauges(table: Table): Promise<AdminTableGauges> {
    const { text, values } = adminGaugeCountsStatement(schema, table);
    const row = (
      await executor.query<{
        pending: unknown;
        processing: unknown;
        dead: unknown;
        unknown: unknown;
        rows_estimate: unknown;
      }>(text, values)
    ).rows[0];
    const counts = {
      Pending: count(row?.pending),
      Processing: count(row?.processing),
      Dead: count(row?.dead),
      Failed: count(row?.unknown),
    };
    const estimate = row?.rows_estimate;
    const finishedEstimate =
      estimate === null || estimate === undefined || !Number.isFinite(Number(estimate))
        ? null
        : Math.max(
            0,
            Math.round(Number(estimate)) - counts.Pending - counts.Processing - counts.Dead - counts.Failed,
          );
    return { counts, finishedEstimate, oldestPendingAgeMs: await oldestPendingAgeMs(table) };
  }

  async function oldestPendingAgeMs(table: Table): Promise<number | null> {
    const oldest = adminOldestPendingStatement(schema, table);
    const age = (await executor.query<{ age_ms: unknown }>(oldest.text, oldest.values)).rows[0]?.age_ms;
    return age === null || age === undefined ? null : Math.max(0, count(age));
  }

  async function deadRows(table: Table): Promise<number> {
    const dead = adminDeadCountStatement(schema, table);
    return count((await executor.query<{ n: unknown }>(dead.text, dead.values)).rows[0]?.n ?? 0);
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
   * One outbox requeue batch in `tx`: the candidates (dead, key idle; whole keys) locked; their keys' insert locks
   * taken without waiting (`tryLockOutboxKeys`), so no keyed insert of those keys commits meanwhile (its row could be
   * claimed before the requeue commits) and no writer of them waits behind a key this batch could not have; the head
   * of each key obtained locked without waiting; then the update of the candidates whose key is free or absent, which
   * checks the keys again. The candidates of keys another transaction holds, or whose head it holds, stay dead
   * (`busy`). No step waits for a lock, so the batch is in no deadlock with claims and settles.
   */
  async function requeueOutboxBatch(
    tx: SqlExecutor<V>,
    filter: AdminFilter,
    batchSize: number,
  ): Promise<OutboxBatch> {
    const chosen = adminRequeueCandidatesStatement(schema, filter, batchSize, wholeKeysMaxRows(batchSize));
    const found = (await tx.query<{ id: unknown; key: unknown; taken?: unknown }>(chosen.text, chosen.values))
      .rows;
    const candidates: Candidate[] = found.map((r) => ({
      id: toRowId(r.id),
      key: typeof r.key === 'string' ? r.key : null,
    }));
    // Without `taken` (a dialect that takes no whole keys) the candidates are the first rows.
    const taken = found[0]?.taken === undefined ? candidates.length : count(found[0].taken);
    const keys = [...new Set(candidates.flatMap((c) => (c.key === null ? [] : [c.key])))];
    const obtained = new Set(keys.length > 0 ? await tryLockOutboxKeys(tx, keys) : []);
    if (obtained.size > 0) {
      const heads = adminLockPendingKeyRowsStatement(schema, [...obtained]);
      for (const row of (await tx.query<{ held_key?: unknown }>(heads.text, heads.values)).rows) {
        if (typeof row.held_key === 'string') obtained.delete(row.held_key);
      }
    }
    const free = candidates.filter((c) => c.key === null || obtained.has(c.key));
    const busy = candidates.filter((c) => c.key !== null && !obtained.has(c.key));
    if (free.length === 0) return { taken, ids: [], busy };
    const ids = free.map((c) => c.id);
    const { text, values } = adminRequeueStatement(schema, 'outbox', { ids }, ids.length);
    const { rows } = await tx.query<{ id: unknown }>(text, values);
    return { taken, ids: rows.map((r) => toRowId(r.id)).sort(compareIds), busy };
  }

  /** The most rows a batch of `batchSize` takes with its keys' other dead rows (see REQUEUE_WHOLE_KEYS_MAX_ROWS). */
  function wholeKeysMaxRows(batchSize: number): number {
    return Math.max(batchSize, Math.min(REQUEUE_WHOLE_KEYS_MAX_ROWS, maxRows));
  }

  /**
   * An outbox requeue of up to `batchSize` rows: one {@link requeueOutboxBatch} transaction per part of at most
   * `maxRowsPerStatement` rows, until the rows are taken, a part comes back short or a part requeued nothing (the
   * next would choose the same rows). Answered as one batch: each busy row once, and none a later part requeued
   * after all (a later part chooses the rows an earlier one left dead again, first); `more` when the last part chose
   * as many rows as it asked for. The last batch of a run, and one that requeued nothing (a caller stops after
   * either), report the keys in flight too.
   */
  async function requeueOutbox(filter: AdminFilter, batchSize: number): Promise<SqlRequeueResult> {
    const parts = await inParts(
      batchSize,
      maxRows,
      async (rows) => {
        const batch = await executor.transaction((tx) => requeueOutboxBatch(tx, filter, rows));
        return { ...batch, full: batch.taken === rows };
      },
      (part) => part.ids.length === 0,
    );
    const ids = parts.flatMap((part) => part.ids).sort(compareIds);
    const requeued = new Set(ids);
    const busy = [...new Map(parts.flatMap((part) => part.busy).map((c) => [c.id, c])).values()].filter(
      (c) => !requeued.has(c.id),
    );
    const result: RequeueResult = {
      dryRun: false,
      count: ids.length,
      ids,
      more: parts.at(-1)?.full === true,
      ...busyReport(busy),
    };
    return result.more && result.count > 0 ? result : withKeysInFlight(result, 'outbox', filter);
  }

  /**
   * `result` with the dead rows of `filter` whose key (outbox) or source and aggregate id (inbox) has a row
   * processing, when there are any.
   */
  async function withKeysInFlight(
    result: RequeueResult,
    table: Table,
    filter: AdminFilter,
  ): Promise<SqlRequeueResult> {
    const { text, values } = adminKeysInFlightStatement(schema, table, filter, KEYS_IN_FLIGHT_REPORTED);
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

  /** The purge's dry run (`SqlAdminStore.countPurge`), refusing what `purge` refuses. */
  async function countPurge({ table, state, olderThanMs }: Omit<PurgeOptions, 'batchSize'>): Promise<number> {
    if (adminPurgeCountStatement === undefined) throw new QueueBoxError('This store cannot count a purge');
    checkPurge(table, state, olderThanMs);
    const { text, values } = adminPurgeCountStatement(schema, table, state, olderThanMs);
    return count((await executor.query<{ n: unknown }>(text, values)).rows[0]?.n ?? 0);
  }

  return {
    ...(adminPurgeCountStatement === undefined ? {} : { countPurge }),

    async stats() {
      const { dead: deadByTopic, ...outbox } = await tableStats('outbox');
      const { dead: deadBySource, ...inbox } = await tableStats('inbox');
      return { outbox: { ...outbox, deadByTopic }, inbox: { ...inbox, deadBySource } };
    },

    async gauges() {
      return { outbox: await tableGauges('outbox'), inbox: await tableGauges('inbox') };
    },

    oldestPendingAgeMs,

    deadRows,

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
        return withKeysInFlight(preview, table, filter);
      }
      if (table === 'outbox') return requeueOutbox(filter, batchSize);
      // The inbox: no insert lock to take (a row stored meanwhile has a larger id, so it goes after the requeued
      // one); rows whose source and aggregate id has a row processing stay dead, as the statement reads them.
      const parts = await inParts(batchSize, maxRows, async (rows) => {
        const { text, values } = adminRequeueStatement(schema, table, filter, rows);
        const ids = (await executor.query<{ id: unknown }>(text, values)).rows.map((r) => toRowId(r.id));
        return { taken: ids.length, ids };
      });
      const ids = parts.flatMap((part) => part.ids).sort(compareIds);
      const result = { dryRun: false, count: ids.length, ids, more: ids.length === batchSize };
      return result.more ? result : withKeysInFlight(result, table, filter);
    },

    async replay(outboxId) {
      if (!isRowId(outboxId)) return { status: 'not_found' };
      const get = getOutboxStatement(schema, outboxId);
      const readState = async () =>
        (await executor.query<{ state: unknown; key: unknown }>(get.text, get.values)).rows[0];
      const original = await readState();
      if (original === undefined) return { status: 'not_found' };
      // A row that is not sent is never copied: say so before trying its key's lock, not "try again".
      const state = outboxState(original.state);
      if (state !== 'Sent') return { status: 'not_sent', state };
      const { text, values } = adminReplayStatement(schema, outboxId);
      // A keyed copy takes the key's insert lock like every other outbox write, so its id follows commit order.
      const key = typeof original.key === 'string' ? original.key : null;
      // Taken without waiting, as a requeue takes it: an application's transaction that enqueued the key and has
      // not committed would otherwise hold the operator until the statement timeout, answered as an outage.
      const copy = async (on: SqlExecutor<V>) => (await on.query<{ id: unknown }>(text, values)).rows;
      const rows =
        key === null
          ? await copy(executor)
          : await executor.transaction(async (tx) =>
              (await tryLockOutboxKeys(tx, [key])).has(key) ? copy(tx) : undefined,
            );
      if (rows === undefined) return { status: 'key_busy', key: key ?? '' };
      if (rows[0]) return { status: 'replayed', id: toRowId(rows[0].id) };
      // Nothing copied: tell a missing row from one that is not sent (a race with retention reads as either).
      const now = (await readState())?.state;
      return now === undefined ? { status: 'not_found' } : { status: 'not_sent', state: outboxState(now) };
    },

    async redact(table, id): Promise<RedactResult> {
      if (!isRowId(id)) return { status: 'not_found' };
      const change = adminRedactStatement(schema, table, id);
      const read = adminRowStateStatement(schema, table, id);
      const stateOf = table === 'outbox' ? outboxState : inboxState;
      for (let attempt = 0; ; attempt++) {
        // One statement that checks the state on the row it changes: a row being delivered is never touched.
        if ((await executor.query(change.text, change.values)).rows.length > 0) return { status: 'redacted' };
        // Nothing changed: tell a missing row from one that is not final (a race with retention reads as either).
        const row = (await executor.query<{ state: unknown }>(read.text, read.values)).rows[0];
        if (row === undefined) return { status: 'not_found' };
        const state = stateOf(row.state);
        // A row that settled between the two statements is final now: the change is tried again, once.
        if ((state !== 'Sent' && state !== 'Dead') || attempt > 0) return { status: 'not_final', state };
      }
    },

    async purge({ table, state, olderThanMs, batchSize }) {
      checkPurge(table, state, olderThanMs);
      const parts = await inParts(clamp(batchSize, 1, ADMIN_MAX_BATCH_SIZE), maxRows, async (rows) => {
        const { text, values } = adminPurgeStatement(schema, table, state, olderThanMs, rows);
        return { taken: (await executor.query(text, values)).rowCount };
      });
      return parts.reduce((sum, part) => sum + part.taken, 0);
    },

    async nextDue(table, options = {}) {
      const sources = table === 'inbox' && options.sources !== undefined ? options.sources : null;
      if (sources !== null && sources.length === 0) return null;
      const { text, values } = adminNextDueStatement(schema, table, sources);
      const before = Date.now();
      const row = (await executor.query<{ next_due: unknown; db_now: unknown }>(text, values)).rows[0];
      // The database read its clock somewhere between the question and the answer (a connection opened, an Aurora
      // cluster resumed): the middle of the two is the best guess.
      const asked = (before + Date.now()) / 2;
      const due = row?.next_due;
      if (due === null || due === undefined) return null;
      // On this process's clock: the database's time plus how far this clock is ahead of it.
      const skew =
        row?.db_now === undefined || row.db_now === null ? 0 : asked - toDate(row.db_now).getTime();
      return new Date(toDate(due).getTime() + skew);
    },
  };
}
