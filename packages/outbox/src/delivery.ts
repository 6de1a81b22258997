import {
  CONFIG_DEFAULTS,
  claimedMessageId,
  type JsonValue,
  type OutboxRow,
  type Publisher,
  type RowId,
} from '@queuebox/core';
import { type Random, retryDelay } from './backoff.ts';
import { DEFAULT_HTTP_TIMEOUT_MS } from './options.ts';
import { type ByteBudget, createByteBudget } from './semaphore.ts';
import type { Target, TargetLookup } from './targets.ts';

/** Finds the publisher of a destination: a function, or anything with `get` (a `Map`, a `PublisherSet`). */
export type PublisherLookup =
  | ((destination: string) => Publisher | undefined)
  | { get(destination: string): Publisher | undefined };

/** What became of one row's delivery, before it is settled. */
export type Verdict =
  | { readonly kind: 'sent'; readonly destination: string }
  | { readonly kind: 'retry'; readonly error: string; readonly delayMs: number; readonly destination: string }
  | {
      readonly kind: 'dead';
      readonly reason: string;
      readonly destination: string | null;
      readonly attempted: boolean;
      /** A destination's lower max_attempts, written to the row (see core's `OutboxDeadItem.maxAttempts`). */
      readonly maxAttempts?: number;
    }
  | {
      readonly kind: 'release';
      /** Due again this long from now (a destination whose connections are all busy); default at once. */
      readonly delayMs?: number;
    };

/** What {@link createDelivery} works with. */
export interface DeliveryDeps {
  readonly targetOf: TargetLookup;
  readonly publishers: PublisherLookup;
  /** Jitter source of retry delays. */
  readonly random: Random;
  /** Now, in epoch milliseconds, for the start check of {@link DeliveryWindow}. Default `Date.now`. */
  readonly now?: () => number;
  /**
   * Reads a claimed row whose payload the claim left out (see {@link deferredPayloadBytes}) just before its
   * delivery: the outbox store's `get`. Without it such a row is retried with that reason.
   */
  readonly loadRow?: (id: RowId) => Promise<OutboxRow | undefined>;
  /** Largest payload delivered, in bytes (see {@link deferredPayloadBytes}). Default {@link DEFAULT_MAX_PAYLOAD_BYTES}. */
  readonly maxPayloadBytes?: number;
  /** Bytes of left-out payloads read and held at once. Default {@link DEFAULT_LARGE_PAYLOAD_BUDGET_BYTES}. */
  readonly largePayloadBudgetBytes?: number;
}

/**
 * The registered symbol under which a store's claim marks a row whose payload it left out of its answer (the
 * PostgreSQL store: payloads over 64 KiB), with the payload's size in bytes. The row's `payload` is then `null`
 * and the delivery reads the row (`loadRow`) just before publishing it, within {@link DeliveryDeps}'s
 * `largePayloadBudgetBytes`, so large rows in flight hold a bounded number of bytes, not `batchSize` of them.
 */
export const DEFERRED_PAYLOAD = Symbol.for('queuebox.outbox.deferredPayloadBytes');

/** The size of a claimed row's left-out payload, or undefined when the claim answered it. */
export function deferredPayloadBytes(row: OutboxRow): number | undefined {
  const bytes = (row as unknown as Record<symbol, unknown>)[DEFERRED_PAYLOAD];
  return typeof bytes === 'number' ? bytes : undefined;
}

/**
 * Payloads larger than this (bytes of JSON text) the poller asks the store's claim to leave out
 * (`deferPayloadsOverBytes`), to be read just before their delivery: 64 KiB, so a claim of 200 rows answers at most
 * 12.5 MiB of payloads, and the rows of most webhooks still come whole.
 */
export const DEFERRED_PAYLOAD_BYTES = 64 * 1024;

/**
 * Largest payload a poller delivers by default: 64 MiB of JSON text (`outbox.maxPayloadBytes`). A left-out payload
 * above it is never read into memory: its delivery fails (retried, the attempt counted, as any failure, so it ends
 * dead when no attempt is left) with an error that names its size and the limit. Reading one costs a few times its
 * size in memory (the driver's text, the parsed value, the request body), and PostgreSQL's jsonb takes up to 255 MB.
 */
export const DEFAULT_MAX_PAYLOAD_BYTES: number = CONFIG_DEFAULTS.outbox.maxPayloadBytes;

/**
 * Bytes of left-out payloads a poller reads and holds at once by default, 16 MiB (`outbox.largePayloadBudgetBytes`;
 * at least one payload at a time).
 */
export const DEFAULT_LARGE_PAYLOAD_BUDGET_BYTES: number = CONFIG_DEFAULTS.outbox.largePayloadBudgetBytes;

/**
 * When a batch's deliveries must end: `signal` aborts at `abortAt` (the drain's deadline less the time kept for
 * settling). With `startCheck`, a row whose destination allows a request longer than what is left before `abortAt`
 * (`timeoutMs`) is released untried rather than started and cut short: a cut request may well have reached the
 * destination, and it would be sent again.
 */
export interface DeliveryWindow {
  readonly signal: AbortSignal;
  readonly abortAt?: number;
  readonly startCheck?: boolean;
}

/** One group of a batch being delivered: the rows of one key in id order, or one row without a key. */
export interface DeliveryGroup {
  readonly rows: readonly OutboxRow[];
  /** The verdict of each row, in the order of `rows`, once the group's last row is done. */
  readonly verdicts: Promise<readonly Verdict[]>;
}

/** Delivers the rows of one claimed batch. */
export interface Delivery {
  /**
   * Routes, transforms and publishes every row: concurrently across keys, strictly in order within a key (rows
   * without a key are each their own group). Once a row of a key is retried, the rows behind it are released
   * untried; once the window's signal is aborted, rows not yet started are released, and rows whose request it
   * cut short are retried at once, the attempt counted.
   */
  deliverBatch(rows: readonly OutboxRow[], window: DeliveryWindow): Promise<Map<RowId, Verdict>>;
  /**
   * The same delivery, started at once, answered group by group: each group's verdicts settle on their own, so
   * the groups done can be settled while a slow one is still running (the poller's stragglers).
   */
  deliverGroups(rows: readonly OutboxRow[], window: DeliveryWindow): DeliveryGroup[];
}

/**
 * The error of a row claimed without a message id (an outbox store used without a `Store`'s `withMessageIds`):
 * it is not sent under its bare row id, which is unique only within its schema.
 */
export const NO_MESSAGE_ID =
  'the claim gave this row no message id (claim through a Store of @queuebox/store-postgres or -sqlserver, which adds the install id of migration 0005)';

/** Creates the delivery step of the poller: route → transform → publish → verdict. */
export function createDelivery(deps: DeliveryDeps): Delivery {
  const { targetOf, random } = deps;
  const now = deps.now ?? Date.now;
  const maxPayloadBytes = deps.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
  const largePayloads: ByteBudget = createByteBudget(
    deps.largePayloadBudgetBytes ?? DEFAULT_LARGE_PAYLOAD_BUDGET_BYTES,
  );
  const lookup =
    typeof deps.publishers === 'function'
      ? deps.publishers
      : (name: string) => (deps.publishers as { get(d: string): Publisher | undefined }).get(name);

  const deliver = async (row: OutboxRow, window: DeliveryWindow): Promise<Verdict> => {
    const target = targetOf(row.topic);
    if (target === undefined) {
      return {
        kind: 'dead',
        reason: `no route matches topic "${row.topic}"`,
        destination: null,
        attempted: false,
      };
    }
    const { destination } = target;
    const publisher = lookup(destination);
    if (publisher === undefined) {
      return {
        kind: 'dead',
        reason: `no publisher supports destination "${destination}" of type "${target.options.type}"`,
        destination,
        attempted: false,
      };
    }
    const deferred = deferredPayloadBytes(row);
    if (deferred === undefined) return deliverWith(row, row.payload, target, publisher, window);
    if (deferred > maxPayloadBytes) {
      // Never read: holding it would cost a few times its size (the driver's text, the parsed value, the body).
      return failed(
        row,
        target,
        `payload of ${deferred} bytes is over the largest this poller delivers (${maxPayloadBytes} bytes)`,
        undefined,
        window,
      );
    }
    const load = deps.loadRow;
    if (load === undefined) {
      return failed(
        row,
        target,
        'the claim left this large payload out and no store can read it',
        undefined,
        window,
      );
    }
    // Read just before its delivery and held only through it, within the poller's budget of large payloads.
    return largePayloads.run(deferred, async () => {
      if (window.signal.aborted) return { kind: 'release' };
      let stored: OutboxRow | undefined;
      try {
        stored = await load(row.id);
      } catch {
        // Not read (the database went away): given back unattempted, as a delivery that could not start. Thrown, it
        // failed the whole drain and left the row processing, its key waiting, for its whole lease.
        return { kind: 'release' };
      }
      // No longer ours (its lease expired and another claim took it): give it back; the settle is fenced anyway.
      if (stored === undefined || stored.claimToken !== row.claimToken) return { kind: 'release' };
      return deliverWith(row, stored.payload, target, publisher, window);
    });
  };

  const deliverWith = async (
    row: OutboxRow,
    rowPayload: JsonValue,
    target: Target,
    publisher: Publisher,
    window: DeliveryWindow,
  ): Promise<Verdict> => {
    const deliveries = window.signal;
    const { destination } = target;
    // The message id (install id + row id, from the store's claim), never the bare row id: another schema has the
    // same row ids, and a receiver deduplicating on the id would drop its messages as duplicates of ours.
    const messageId = claimedMessageId(row);
    let payload = rowPayload;
    let headers = row.headers;
    if (target.transform !== undefined && messageId !== undefined) {
      // A transform that throws rejects the message (its own runner already turns most failures into a
      // rejection): a throw here would fail the whole batch unsettled, its delivered rows included.
      const outcome = await target.transform
        .apply({ payload, headers, topic: row.topic, key: row.key, id: row.id, messageId })
        .catch((error: unknown) => ({
          ok: false as const,
          reason: `${target.transform?.name ?? 'transform'} failed: ${error instanceof Error ? error.message : String(error)}`,
        }));
      if (!outcome.ok) {
        return {
          kind: 'dead',
          reason: `transform rejected: ${outcome.reason}`,
          destination,
          attempted: false,
        };
      }
      payload = outcome.payload;
      headers = outcome.headers;
    }
    if (deliveries.aborted) return { kind: 'release' };
    // The latest moment a request of this destination can start and still run to its own timeout before the abort;
    // checked here and, after any wait for a connection, by a publisher that supports it.
    const startBy =
      window.startCheck === true && window.abortAt !== undefined
        ? window.abortAt - requestTimeoutOf(target.options)
        : undefined;
    if (startBy !== undefined && now() > startBy) return { kind: 'release' };

    let outcome: Awaited<ReturnType<Publisher['publish']>>;
    if (messageId === undefined) {
      // The poller never gets here (it gives such a claim back and fails the drain); no attempt is counted.
      return { kind: 'release' };
    } else {
      try {
        outcome = await publisher.publish(
          { id: messageId, topic: row.topic, key: row.key, payload, headers, attempt: row.attempt },
          deliveries,
          startBy === undefined ? undefined : { startBy },
        );
      } catch (error) {
        outcome = {
          kind: 'retry',
          error: `publisher failed: ${error instanceof Error ? error.message : String(error)}`,
        };
      }
    }
    if (outcome.kind === 'sent') return { kind: 'sent', destination };
    // A publisher's `dead` (no try of this message will do: a refused header, a subject the broker cannot take) is
    // retried like any failure: the specification's state table lets a row go dead only when no attempt remains, no
    // route matches or a transform dead-letters it. The store turns the last attempt's retry into dead.
    // Nothing was sent (the publisher got to it too late, or after the abort): no attempt was made.
    if (outcome.kind === 'retry' && outcome.unstarted === true) {
      // Due again when the publisher said (busy connections, a destination's pause), within the backoff's ceiling.
      return outcome.retryAfterMs === undefined
        ? { kind: 'release' }
        : { kind: 'release', delayMs: Math.min(outcome.retryAfterMs, target.backoff.maxMs) };
    }
    return failed(
      row,
      target,
      outcome.error,
      outcome.kind === 'retry' ? outcome.retryAfterMs : undefined,
      window,
    );
  };

  /** The verdict of a failed attempt: a retry with backoff, or dead past the destination's `maxAttempts`. */
  const failed = (
    row: OutboxRow,
    target: Target,
    error: string,
    retryAfterMs: number | undefined,
    window: DeliveryWindow,
  ): Verdict => {
    const deliveries = window.signal;
    const { destination } = target;
    const outcome = { error };
    const attempt = row.attempt + 1;
    const destinationMax = target.options.maxAttempts;
    if (destinationMax !== undefined && destinationMax < row.maxAttempts && attempt >= destinationMax) {
      return {
        kind: 'dead',
        reason: `${outcome.error} (destination "${destination}" allows ${destinationMax} attempts)`,
        destination,
        attempted: true,
        // The row's max_attempts becomes the destination's: it goes dead as its attempt reaches its max_attempts.
        maxAttempts: destinationMax,
      };
    }
    // A request cut short by our own deadline counts as an attempt, tried again at once. It was sent and may have
    // reached the destination, and counting it is what ends a destination (or broker) that never answers within
    // the drain; a drain long enough for the destination's timeout starts no request it would cut (`startBy`), so
    // a destination that answers within its timeout is not cut.
    const delayMs = deliveries.aborted
      ? 0
      : retryDelay({ attempt, policy: target.backoff, retryAfterMs, random });
    return { kind: 'retry', error: outcome.error, delayMs, destination };
  };

  const deliverGroup = async (rows: readonly OutboxRow[], window: DeliveryWindow): Promise<Verdict[]> => {
    const verdicts: Verdict[] = [];
    let holdBack = false;
    for (const row of rows) {
      // Once a row of the key is retried, the rows behind it must not overtake it.
      if (holdBack || window.signal.aborted) {
        verdicts.push({ kind: 'release' });
        continue;
      }
      const verdict = await deliver(row, window);
      verdicts.push(verdict);
      if (verdict.kind === 'retry' || verdict.kind === 'release') holdBack = true;
    }
    return verdicts;
  };

  const deliverGroups = (rows: readonly OutboxRow[], window: DeliveryWindow): DeliveryGroup[] =>
    groupByKey(rows).map((group) => ({ rows: group, verdicts: deliverGroup(group, window) }));

  return {
    async deliverBatch(rows, window) {
      const groups = deliverGroups(rows, window);
      const results = await Promise.all(groups.map((group) => group.verdicts));
      const verdicts = new Map<RowId, Verdict>();
      groups.forEach((group, g) => {
        group.rows.forEach((row, i) => {
          verdicts.set(row.id, results[g]?.[i] as Verdict);
        });
      });
      return verdicts;
    },
    deliverGroups,
  };
}

/** The rows in id order, one group per key; rows without a key are unordered: each is its own group. */
function groupByKey(rows: readonly OutboxRow[]): OutboxRow[][] {
  const groups = new Map<string, OutboxRow[]>();
  const unordered: OutboxRow[][] = [];
  for (const row of [...rows].sort(byId)) {
    if (row.key === null) unordered.push([row]);
    else {
      const group = groups.get(row.key);
      if (group) group.push(row);
      else groups.set(row.key, [row]);
    }
  }
  return [...groups.values(), ...unordered];
}

function byId(a: OutboxRow, b: OutboxRow): number {
  const x = BigInt(a.id);
  const y = BigInt(b.id);
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * The longest a destination lets one request take: its `timeoutMs`, else the HTTP publisher's default for `http`;
 * 0 for a broker destination without one (its publisher bounds its own waits).
 */
export function requestTimeoutOf(options: { readonly type: string; readonly timeoutMs?: number }): number {
  return options.timeoutMs ?? (options.type === 'http' ? DEFAULT_HTTP_TIMEOUT_MS : 0);
}

/**
 * A drain budget for destinations whose longest request (`requestTimeoutOf`) is `longestRequestMs`: 30 s past it,
 * at least 10 s. A drain long enough for that request claims only while one started then could run to its own
 * timeout, so a destination answering within its timeout is never cut; the 30 s past it are the drain's claiming
 * time. Then a local loop's drain hands over (`DrainHandOff`): the next drain claims while those requests finish.
 * outbox-tick's drain waits for them, so its claiming time is the function's timeout less the longest request.
 */
export function drainBudgetFor(longestRequestMs: number): number {
  return Math.max(10_000, longestRequestMs + 30_000);
}
