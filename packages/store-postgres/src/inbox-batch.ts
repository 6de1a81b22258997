import { type StoreResult, StoreUnavailableError, storableErrorText } from '@queuebox/core';
import { sqlStateOf } from './errors.ts';
import { createPreparedGuard, type PreparedGuard, type SqlExecutor } from './executor.ts';
import {
  type InboxInsertItem,
  insertInboxBatchStatement,
  type PreparedInboxInsert,
  prepareInboxInsert,
  selectInboxIdsStatement,
} from './inbox-dedupe.ts';
import { toRowId } from './rows.ts';

/** Whether `error` (a translated store error, or its cause) is PostgreSQL's deadlock_detected. */
function isDeadlock(error: unknown): boolean {
  for (let e = error, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth++) {
    if (
      sqlStateOf(e) === '40P01' ||
      (e as { context?: { sqlState?: unknown } }).context?.sqlState === '40P01'
    ) {
      return true;
    }
  }
  return false;
}

/** Options of {@link createInboxBatcher}. */
export interface InboxBatcherOptions {
  readonly executor: SqlExecutor;
  readonly schema: string;
  /** Stores one item on its own (insert, then read a repeat's id): used when a batch could not decide an item. */
  readonly storeOne: (item: InboxInsertItem) => Promise<StoreResult>;
  /** Most messages in one statement. Default 100. */
  readonly maxRows?: number;
  /** Most payload and header bytes (as JSON) in one statement; one larger message goes alone. Default 4 MiB. */
  readonly maxBytes?: number;
  /**
   * Most bytes of one request as the executor sends it (`wireBytes`), the statement's text and the call's other
   * fields included (`REQUEST_MARGIN_BYTES`); one larger message goes alone. Default: the executor's
   * `resultLimits.maxRequestBytes` (the Data API: 4 MiB); absent, no such bound (`pg`, PGlite).
   */
  readonly maxRequestBytes?: number;
  /**
   * When the insert runs as a named prepared statement (parsed and planned once per connection, then a generic plan:
   * PostgreSQL spent about as long planning a 15-row insert as running it). Default `createPreparedGuard()`.
   */
  readonly prepared?: PreparedGuard;
  /** Most statements running at once. Default 2. */
  readonly maxInFlight?: number;
  /**
   * Fewest messages waiting before a statement starts beside one that is already running. Default 16: a second
   * statement only when it carries a batch worth its own commit; smaller groups wait for the running one.
   */
  readonly overlapRows?: number;
  /**
   * Longest time a store waits for its answer, counted from the call: in the queue and then in its statement.
   * Past it the call fails with `StoreUnavailableError` (the ingestion's 503 `store_unavailable`, which its sender
   * retries). A store still queued is taken out of the queue first and is never written; one whose statement is
   * already running is answered at once and its statement goes on: if it commits after all, the sender's retry is
   * answered as a duplicate of that row. 0 waits without limit (up to the statement's own timeout). Default
   * {@link DEFAULT_INBOX_MAX_WAIT_MS}.
   */
  readonly maxWaitMs?: number;
  /**
   * Most stores waiting in the queue (not counting those in a running statement); one more fails at once with
   * `StoreUnavailableError` and is never written. Default {@link DEFAULT_INBOX_MAX_QUEUED}.
   */
  readonly maxQueued?: number;
}

/**
 * Default of {@link InboxBatcherOptions.maxWaitMs}: 25 s. Inserts that block (a lock on the inbox table, a stalled
 * disk) held a sender for a statement timeout in the queue and one more in its own statement (30 s + 30 s); 25 s
 * answers before API Gateway's 29 s integration timeout (so the sender gets the 503 with `Retry-After`, not a 504),
 * and leaves an Aurora Serverless v2 cluster that was paused its 15 to 25 s to resume: a shorter bound (10 s was
 * tried) answered the first webhooks after every idle spell 503.
 */
export const DEFAULT_INBOX_MAX_WAIT_MS = 25_000;

/**
 * Default of {@link InboxBatcherOptions.maxQueued}: 2,000 waiting stores, under a second of work for a database that
 * answers (20 full statements; the local server stored about 2,400 webhooks/s), and above the 1,000 concurrent
 * senders of the overload audit's normal load, so that only a database that stopped taking inserts fills it.
 */
export const DEFAULT_INBOX_MAX_QUEUED = 2_000;

/** A row of the batch statements: the id stored (or found) for a pair. */
interface DecidedRow {
  readonly id: unknown;
  readonly source: string;
  readonly idempotency_key: string;
  readonly stored?: boolean;
}

interface Waiting extends PreparedInboxInsert {
  readonly bytes: number;
  /** Its values' bytes in a request (`wireBytes`); 0 without a request bound. */
  readonly wire: number;
  /** Answers the call; after its first answer (a result, an error or its deadline) the others are dropped. */
  readonly resolve: (result: StoreResult) => void;
  readonly reject: (error: unknown) => void;
  /** Whether the call was answered already (its deadline passed while its statement ran). */
  readonly answered: () => boolean;
  /**
   * When the call is answered `StoreUnavailableError` at the latest (`performance.now()` ms; see `maxWaitMs`). A
   * monotonic clock: a wall clock stepped forward (NTP, a resumed VM) answered waiting stores 503 at once.
   */
  readonly deadline: number;
}

/**
 * Bytes of a request bounded by `maxRequestBytes` kept for what is not the rows' values: the statement's text
 * (about 1.5 KB), the ARNs, the parameters' names and the JSON around them.
 */
const REQUEST_MARGIN_BYTES = 64 * 1024;

/**
 * Bytes one value of an array parameter takes in a Data API request: the array travels as one JSON text
 * (`toDataApiStatement`) inside the request's JSON, so a string is escaped twice — a quote of a payload's JSON is
 * 4 bytes, a quote or backslash inside one of its strings 8 — and counted in UTF-8; and its comma. (Counted on the
 * JSON alone, 60 webhooks of 38 KB, 2.3 MB, made a 5.2 MB request, refused.)
 */
function wireBytes(value: string | number | null): number {
  if (value === null) return 5;
  if (typeof value === 'number') return String(value).length + 1;
  return Buffer.byteLength(JSON.stringify(JSON.stringify(value))) - 1;
}

/** A rank as large as any batch's, to count its bytes. */
const MAX_CALL_RANK = 99_999;

/** The bytes of `prepared`'s values in a Data API request of `insertInboxBatchStatement`. */
function requestBytes({ item, payload, headers }: PreparedInboxInsert): number {
  const { message, state, lastError } = item;
  return [
    message.source,
    message.idempotencyKey,
    message.eventType ?? null,
    message.aggregateId ?? null,
    message.correlationId ?? null,
    payload,
    headers,
    state,
    message.maxAttempts,
    lastError === null ? null : storableErrorText(lastError),
    // Its rank among the calls (`callOrder`): at most the batch's size.
    MAX_CALL_RANK,
  ].reduce<number>((sum, value) => sum + wireBytes(value), 0);
}

/**
 * Group commit for inbox stores: messages stored while earlier statements are still running wait and go together
 * in one `INSERT … SELECT FROM unnest(…) ON CONFLICT DO NOTHING` that also reads the ids of repeats — one
 * statement and one commit (one WAL flush) for many webhooks, instead of one or two each. (A second statement reads
 * a repeat only when its row was committed by another transaction while the first ran.) A message that finds a
 * statement slot free goes after at most one turn of the event loop, so a lone webhook is not held back; under
 * load the batches grow by themselves. While one statement runs, a second starts only once `overlapRows` (16)
 * messages wait: under a closed loop of a few dozen senders the waiting ones then go together when the first
 * commits, one statement and one WAL flush for the lot instead of two half-sized ones (on two shared cores this cut
 * the database's CPU per webhook by a third, bench/README.md "Session 6: the inbox"), and a database that falls
 * behind still gets two statements at once. A statement that fails as unavailable fails all its messages (503: the
 * senders retry, and a row that was committed after all answers their retry as a duplicate).
 *
 * Each message gets the answer it would have got alone: `stored` with its new id, or `duplicate` with the id of
 * the row already there. Within a batch a repeated (source, idempotency key) is inserted once and its repeats
 * answer `duplicate`. Rows are inserted, and their ids drawn, in call order, so the deliveries of one aggregate id
 * that a broker source hands over together keep their order. Two batches in flight (of this process or another)
 * that share keys in crossing orders can therefore deadlock; PostgreSQL ends one after `deadlock_timeout`, and that
 * batch runs once more as one statement (the other has committed by then). A batch that fails for another reason
 * than an unavailable database is retried message by message, one after another in call order, so one bad message
 * fails alone and the others keep their order.
 *
 * A batch holds at most `maxRows` messages and `maxBytes` of payload and header JSON, and, on an executor with a
 * request limit (the Data API's 4 MiB), at most that request as the executor sends it (`wireBytes`): there a
 * `text[]` value's text is escaped twice, so JSON under 4 MiB could make a request the service refuses, and the
 * batch then went message by message.
 *
 * The queue is bounded (overload audit: with inserts blocked by a lock on the inbox table, webhooks piled up without
 * limit and were answered after 44 s at the median, 60 s at most): at most `maxQueued` stores wait, one more fails
 * at once, and each store is answered within `maxWaitMs` of its call, `StoreUnavailableError` past it. A store that
 * times out in the queue is taken out and never written; one already in a running statement is answered and its
 * statement goes on (see `maxWaitMs`). A group already answered that a batch could not decide is not stored alone.
 */
export function createInboxBatcher(
  options: InboxBatcherOptions,
): (item: InboxInsertItem) => Promise<StoreResult> {
  const { executor, schema, storeOne } = options;
  const maxRows = options.maxRows ?? 100;
  const maxBytes = options.maxBytes ?? 4 * 2 ** 20;
  const maxRequestBytes = options.maxRequestBytes ?? executor.resultLimits?.maxRequestBytes;
  const maxWire =
    maxRequestBytes === undefined ? Number.POSITIVE_INFINITY : maxRequestBytes - REQUEST_MARGIN_BYTES;
  const prepared = options.prepared ?? createPreparedGuard();
  const maxInFlight = options.maxInFlight ?? 2;
  const overlapRows = options.overlapRows ?? 16;
  const maxWaitMs = Math.max(0, options.maxWaitMs ?? DEFAULT_INBOX_MAX_WAIT_MS);
  const maxQueued = Math.max(1, options.maxQueued ?? DEFAULT_INBOX_MAX_QUEUED);
  const queue: Waiting[] = [];
  let inFlight = 0;
  let scheduled = false;

  /** Whether a statement may start now: none is running, or a slot is free and enough messages wait. */
  const canStart = () => inFlight === 0 || (inFlight < maxInFlight && queue.length >= overlapRows);

  const take = (): Waiting[] => {
    if (maxWaitMs > 0) {
      // Stores past their deadline that the sweep (every quarter of maxWaitMs) has not answered yet: answered now and
      // never written, as the sweep would. They queue in deadline order, so they are at the head. One clock read per
      // statement: a store still queued at its deadline is never written, not up to a sweep's interval later.
      const now = performance.now();
      while (queue.length > 0 && (queue[0] as Waiting).deadline <= now) {
        (queue.shift() as Waiting).reject(deadlineError(true));
      }
    }
    const batch: Waiting[] = [];
    let bytes = 0;
    let wire = 0;
    while (queue.length > 0 && batch.length < maxRows) {
      const next = queue[0] as Waiting;
      if (batch.length > 0 && (bytes + next.bytes > maxBytes || wire + next.wire > maxWire)) break;
      batch.push(next);
      bytes += next.bytes;
      wire += next.wire;
      queue.shift();
    }
    return batch;
  };

  const flush = () => {
    while (queue.length > 0 && canStart()) {
      const batch = take();
      if (batch.length === 0) return;
      inFlight++;
      void run(batch).finally(() => {
        inFlight--;
        flush();
      });
    }
  };

  const schedule = () => {
    if (scheduled || !canStart()) return;
    scheduled = true;
    // One turn of the event loop: the requests already read in this turn join the same statement.
    setImmediate(() => {
      scheduled = false;
      flush();
    });
  };

  /** Stores a group of the same (source, key) on its own: the first decides, the others are its repeats. */
  const storeAlone = async (group: readonly Waiting[]) => {
    // Every sender of the group was answered 503 already (its deadline): writing the row now would gain nothing.
    if (group.every((waiting) => waiting.answered())) return;
    const [first, ...repeats] = group as [Waiting, ...Waiting[]];
    try {
      const result = await storeOne(first.item);
      first.resolve(result);
      for (const repeat of repeats) repeat.resolve({ status: 'duplicate', id: result.id });
    } catch (error) {
      for (const waiting of group) waiting.reject(error);
    }
  };

  const run = async (batch: readonly Waiting[], afterDeadlock = false): Promise<void> => {
    const groups = new Map<string, Map<string, Waiting[]>>();
    for (const waiting of batch) {
      const { source, idempotencyKey } = waiting.item.message;
      const bySource = groups.get(source) ?? new Map<string, Waiting[]>();
      groups.set(source, bySource);
      const group = bySource.get(idempotencyKey);
      if (group) group.push(waiting);
      else bySource.set(idempotencyKey, [waiting]);
    }
    const ordered = [...groups.entries()]
      .sort(([a], [b]) => compareText(a, b))
      .flatMap(([, bySource]) =>
        [...bySource.entries()].sort(([a], [b]) => compareText(a, b)).map(([, g]) => g),
      );
    const ids = new Map<Waiting, { id: string; stored: boolean }>();
    const idOf = (rows: readonly DecidedRow[]) => {
      for (const row of rows) {
        const first = groups.get(row.source)?.get(row.idempotency_key)?.[0];
        if (first && !ids.has(first)) ids.set(first, { id: toRowId(row.id), stored: row.stored === true });
      }
    };
    // Inserted, ids drawn, in call order: the stores of one aggregate id that a broker source hands over together
    // keep its order (see insertInboxBatchStatement).
    const called = new Map<Waiting, number>();
    batch.forEach((waiting, at) => {
      called.set(waiting, at);
    });
    try {
      const insert = insertInboxBatchStatement(
        schema,
        ordered.map((g) => g[0] as Waiting),
        ordered.map((g) => called.get(g[0] as Waiting) ?? 0),
      );
      idOf((await prepared.query<DecidedRow>(executor, insert.text, insert.values)).rows);
      const unseen = ordered
        .filter((g) => !ids.has(g[0] as Waiting))
        .map((g) => (g[0] as Waiting).item.message);
      if (unseen.length > 0) {
        // A separate statement: its fresh snapshot sees the rows concurrent stores committed while we waited.
        const select = selectInboxIdsStatement(schema, unseen);
        idOf((await executor.query<DecidedRow>(select.text, select.values)).rows);
      }
    } catch (error) {
      if (error instanceof StoreUnavailableError) {
        for (const waiting of batch) waiting.reject(error);
        return;
      }
      // A batch in flight beside this one inserted some of the same keys in a crossing order (an outside review: two
      // stores' batches of repeats stalled 1 s, then went message by message out of order). That batch has
      // committed now, so one statement goes through.
      if (!afterDeadlock && isDeadlock(error)) return run(batch, true);
      // Something in one message: let each message find out alone, one after another in call order (at once, the
      // stores of one aggregate id took ids in whatever order their statements ran).
      const inCallOrder = [...ordered].sort(
        (a, b) => (called.get(a[0] as Waiting) ?? 0) - (called.get(b[0] as Waiting) ?? 0),
      );
      for (const group of inCallOrder) await storeAlone(group);
      return;
    }
    const undecided: Waiting[][] = [];
    for (const group of ordered) {
      const [first, ...repeats] = group as [Waiting, ...Waiting[]];
      const found = ids.get(first);
      // Found neither inserted nor existing: the row was deleted (retention) between the two statements.
      if (found === undefined) {
        undecided.push(group);
        continue;
      }
      first.resolve(
        found.stored ? { status: 'stored', id: found.id } : { status: 'duplicate', id: found.id },
      );
      for (const repeat of repeats) repeat.resolve({ status: 'duplicate', id: found.id });
    }
    await Promise.all(undecided.map(storeAlone));
  };

  /** The error of a store past its deadline: still `queued` (taken out, never written), or in a running statement. */
  const deadlineError = (queued: boolean) =>
    new StoreUnavailableError(
      queued
        ? `The inbox store waited ${maxWaitMs} ms for a statement (the database is not taking inserts: a lock on the inbox table, a slow disk?); nothing was stored`
        : `The inbox store's statement did not answer within ${maxWaitMs} ms (a lock on the inbox table, a slow disk?); it may still commit, and a retry of the message is then a duplicate`,
      { context: { inboxMaxWaitMs: maxWaitMs, queued } },
    );

  // The stores not answered yet, in call order: with one maxWaitMs for all, also in deadline order.
  const unanswered = new Set<Waiting>();
  let sweeper: ReturnType<typeof setInterval> | undefined;
  const sweep = () => {
    const now = performance.now();
    for (const waiting of unanswered) {
      if (waiting.deadline > now) break;
      // Still queued: out of the queue before the answer, so that no statement takes it afterwards. Stores expire in
      // call order, as they queue, so a queued one is at the head (not a search and a splice per store of 2,000).
      const at = queue[0] === waiting ? 0 : queue.indexOf(waiting);
      if (at === 0) queue.shift();
      else if (at !== -1) queue.splice(at, 1);
      waiting.reject(deadlineError(at !== -1));
    }
    if (unanswered.size === 0 && sweeper !== undefined) {
      clearInterval(sweeper);
      sweeper = undefined;
    }
  };
  const startSweeper = () => {
    // Deadlines are kept to within a quarter of maxWaitMs (at most 1 s) of their time.
    const timer = setInterval(sweep, Math.max(10, Math.min(1_000, Math.floor(maxWaitMs / 4))));
    // Never what keeps a process alive: a running statement holds its connection open anyway.
    timer.unref?.();
    return timer;
  };

  return (item) =>
    new Promise<StoreResult>((resolve, reject) => {
      if (queue.length >= maxQueued) {
        reject(
          new StoreUnavailableError(
            `${queue.length} inbox stores are already waiting for the database (the most that may wait); nothing was stored`,
            { context: { inboxMaxQueued: maxQueued, queueFull: true } },
          ),
        );
        return;
      }
      const prepared = prepareInboxInsert(item);
      const bytes = (prepared.payload?.length ?? 0) + (prepared.headers?.length ?? 0);
      const wire = maxRequestBytes === undefined ? 0 : requestBytes(prepared);
      let done = false;
      const waiting: Waiting = {
        ...prepared,
        bytes,
        wire,
        deadline: performance.now() + maxWaitMs,
        resolve: (result) => {
          if (done) return;
          done = true;
          unanswered.delete(waiting);
          resolve(result);
        },
        reject: (error) => {
          if (done) return;
          done = true;
          unanswered.delete(waiting);
          reject(error);
        },
        answered: () => done,
      };
      if (maxWaitMs > 0) {
        // One sweep for all (not a timer per store: this runs once per webhook on the ingestion's hot path).
        unanswered.add(waiting);
        sweeper ??= startSweeper();
      }
      queue.push(waiting);
      schedule();
    });
}

/** Code-unit order, the same in every process (no locale). */
function compareText(a: string, b: string): number {
  if (a === b) return 0;
  return a < b ? -1 : 1;
}
