import {
  type ClaimOptions,
  type Clock,
  claimedMessageId,
  type DrainReport,
  type DrainStop,
  intervalPassed,
  type Logger,
  type OutboxRow,
  type OutboxStore,
  QueueBoxError,
  type ReclaimReport,
  type RowId,
  silentLogger,
  systemClock,
} from '@queuebox/core';
import type { Random } from './backoff.ts';
import {
  createDelivery,
  DEFERRED_PAYLOAD_BYTES,
  type DeliveryGroup,
  NO_MESSAGE_ID,
  type PublisherLookup,
  requestTimeoutOf,
  type Verdict,
} from './delivery.ts';
import type { DestinationOptions, OutboxOptions, RouteOptions } from './options.ts';
import { createSettling, noSettleCounts, type SettleCounts, type SettledOutboxRow } from './settling.ts';
import { compileTargets } from './targets.ts';
import type { TransformRegistry } from './transforms.ts';

// The drain: claim batches while rows are claimable and time lasts. What it composes lives beside it: targets.ts
// (routes, destinations, transforms), delivery.ts (route → transform → publish, per-key order) and settling.ts
// (verdicts → fenced store calls).

export type { PublisherLookup } from './delivery.ts';
export type { SettledOutboxRow } from './settling.ts';

/** The poller's options: the `outbox` section plus knobs of the drain itself. */
export interface OutboxPollerOptions extends OutboxOptions {
  /** Time one transform may take before it counts as a rejection. Default 1000 ms. */
  readonly transformTimeoutMs?: number;
  /**
   * Time kept at the end of a drain for settling. Deliveries still running at `deadline − settleReserveMs` are
   * aborted and retried at once (the attempt counted). A drain whose budget fits the longest destination timeout
   * plus twice this claims only while this plus that timeout remains, and starts no request its destination's
   * timeout would carry past the abort (released untried, no attempt); a shorter drain claims until less than twice
   * this remains. Default 1000 ms.
   */
  readonly settleReserveMs?: number;
  /** Most expired claims returned per reclaim step. Default: the store's. */
  readonly reclaimLimit?: number;
  /**
   * Least time between two reclaim steps of this poller: a drain runs one beside a claim (which does not wait for
   * it) whenever this much has passed since the last, at its first claim and again during a long drain (the first
   * drain always runs it). A lease lasts
   * `claimTimeoutMs` (minutes by default), so an expired claim waits at most this much longer, while a busy poller
   * no longer pays a statement per drain for a step that almost never finds anything. Default 1000 ms; 0 reclaims
   * beside every claim.
   */
  readonly reclaimIntervalMs?: number;
  /**
   * Batches delivered at once by the poller, across its drains (a loop's drains overlap, see `DrainHandOff`): the
   * next batch is claimed while the current one is delivered, so the claim round trip and the destination's answer
   * overlap. A batch whose deliveries are over, or whose rows still running were split off as stragglers
   * (`stragglerQuietMs`), no longer counts while its settle is written (a claim waits while as
   * many settles as this are being written; the batches already delivering may add theirs, so up to twice as many
   * less one run at once), so a row written meanwhile is claimed without waiting for that round trip.
   * Per-key order holds because a claim never returns a row whose key has an earlier row in processing, and a row
   * stays processing until its settle committed. Default 2; 1 claims only after a batch settled.
   */
  readonly batchesInFlight?: number;
  /**
   * Under load, a pause between two claims of a drain: after a short claim (fewer rows than `batchSize`) that still
   * returned at least `fillMinRows` rows, the next claim waits until `fillMs` have passed since that claim's answer,
   * so it takes more than the rows of one round trip (each forward of the relay wakes the outbox).
   * Bigger batches cost fewer statements, plans and commits per row in PostgreSQL and fewer wake-ups in the
   * runtime. A claim of fewer rows (a trickle, e.g. 200 rows/s, one per wake-up) claims again at once, so a lone
   * message is never held back. Default 20 ms; 0 never waits.
   */
  readonly fillMs?: number;
  /** Least rows in a short claim that make the next claim wait (see `fillMs`). Default 10. */
  readonly fillMinRows?: number;
  /**
   * Stragglers: when some rows of a batch are done and no other row of it has finished for this long, the rows
   * done are settled at once and the batch no longer counts against `batchesInFlight`; the rows still running
   * (a slow or hanging destination, up to its timeout) go on beside the next claims and are settled each when
   * done. Without it one slow destination holds every batch it has a row in, and with it every other
   * destination's deliveries: ten slow rows hold ten batches. At most `batchSize × batchesInFlight` rows
   * straggle at once; past that a batch waits for its slow rows as before. Rows of one key stay one group, in
   * order. Default 100 ms; 0 settles every batch whole.
   */
  readonly stragglerQuietMs?: number;
  /**
   * Least time between two WARN `outbox destination failing` lines about one destination: the first failed
   * delivery of a destination is written at once, the failures after it are counted into the next line at most
   * this much later, and the first settle that finds it delivering again (after a WARN) writes an INFO
   * `outbox destination delivers again` (see `createDestinationHealth`). Default 60000 ms.
   */
  readonly destinationWarnIntervalMs?: number;
}

/** What `createOutboxPoller` works with. */
export interface OutboxPollerDeps {
  readonly store: OutboxStore;
  readonly publishers: PublisherLookup;
  /** In order; the first matching route wins. */
  readonly routes: readonly RouteOptions[];
  readonly destinations: Readonly<Record<string, DestinationOptions>>;
  /** Named transform functions. Default: none. */
  readonly transforms?: TransformRegistry;
  readonly options: OutboxPollerOptions;
  /** Default: the system clock. `deadline`s are read against it. */
  readonly clock?: Clock;
  /** Default: silent. */
  readonly logger?: Logger;
  /** Jitter source. Default `Math.random`. */
  readonly random?: Random;
  /**
   * Told after each batch's settle with the rows the store settled (stale claims are left out), e.g. for a
   * delivery-latency histogram (`row.createdAt` → `settledAt`). Runs synchronously; what it throws is ignored.
   * Default: none.
   */
  readonly onSettled?: (rows: readonly SettledOutboxRow[]) => void;
  /** How the poller waits `fillMs`. Default a timer. */
  readonly sleep?: (ms: number) => Promise<void>;
}

/** How long a drain may run. */
export interface DrainBudget {
  /** Time (the clock's milliseconds) by which the drain has settled everything and returned. */
  readonly deadline: number;
  /** Stops claiming when aborted; deliveries in flight finish and are settled. */
  readonly signal?: AbortSignal;
  /**
   * Set by a loop that starts the next drain as soon as this one returns (`startOutboxLoop`, the local runtime), so
   * that a slow request never holds up the next claim: see {@link DrainHandOff}. Not for outbox-tick, whose
   * invocation must not return before its requests did. Default: the drain returns once all it claimed settled.
   */
  readonly handOff?: DrainHandOff;
}

/**
 * How a drain run by a loop hands over to the next one.
 *
 * - A drain that stops for time returns without waiting for the requests it started: they run on (each within its
 *   destination's timeout, all before this drain's deadline) and settle while the next drain claims. The poller's
 *   limits count the work of every drain: at most `batchesInFlight` batches delivered, no claim while as many
 *   settles are written, a destination's `maxConcurrency`. Per-key order is the store's: a row stays processing until its
 *   settle committed, and no claim returns a row behind it.
 * - What those requests settle after their drain returned is added to the report of the next drain to return, and
 *   a failure of theirs makes the drain claiming meanwhile stop claiming and throw it.
 * - A drain that stops for any other reason (nothing claimable, its signal, `close()`, a failure) returns only
 *   after the requests of every drain settled, so a loop that stops leaves nothing running.
 * - While requests are in flight and the latest claim found every claimable row, a drain claims again after a
 *   wake-up, after a batch with keyed rows settled (the next rows of its keys became claimable) or `pollIntervalMs`
 *   after that claim (rows that came due or were written without a wake-up), whichever comes first; never
 *   without one of these.
 */
export interface DrainHandOff {
  /** The loop's pause after an idle drain (`outbox.pollIntervalMs`). */
  readonly pollIntervalMs: number;
}

/** What one drain of the outbox poller did: core's DrainReport and the outbox's own settles. */
export interface OutboxDrainReport extends DrainReport {
  readonly sent: number;
  /** Back to pending for a later try. */
  readonly retried: number;
  /** Given back untried (rows behind a retrying row of the same key, or left when time ran out). */
  readonly released: number;
}

/** How {@link OutboxPoller.close} may be cut short. */
export interface OutboxPollerCloseOptions {
  /**
   * Aborted when the caller stops waiting (a shutdown timeout): settles still being tried again while the database
   * is unavailable give up at once instead of at their batch's deadline.
   */
  readonly signal?: AbortSignal;
}

/** What {@link OutboxPoller.close} left behind ({@link OutboxPoller.closeReport}). */
export interface OutboxPollerClosed {
  /**
   * Rows whose verdict was known (delivered, failed, given back) whose settle failed for good after the close
   * began: left processing until their lease ends. 0 for a clean stop.
   */
  readonly unsettled: number;
  /** Of those, rows the destination accepted: they will be delivered again after their lease. */
  readonly unsettledSent: number;
}

/** The outbox poller. */
export interface OutboxPoller {
  /** Reclaims expired leases, then claims, delivers and settles batches while rows are claimable and time lasts. */
  drain(budget: DrainBudget): Promise<OutboxDrainReport>;
  /**
   * Refuses new drains and waits for running ones, and for the requests of drains that handed over (`handOff`) to
   * settle. The publishers belong to the caller. A settle the database cannot take meanwhile (an outage, a
   * failover) is tried again until its batch's deadline (within its lease and the drain's budget), so a short
   * outage during a stop no longer leaves delivered rows processing for their lease, to be delivered again; once
   * `options.signal` aborts (the caller's own stop bound), the tries end at once. {@link closeReport} then tells
   * whether the stop left rows unsettled (also logged as a WARN).
   */
  close(options?: OutboxPollerCloseOptions): Promise<void>;
  /**
   * The rows whose verdict was known but whose settle failed for good after `close()` began (read once it
   * resolved): more than 0 means the stop was not clean. Optional for wrappers.
   */
  closeReport?(): OutboxPollerClosed;
  /** The longest request any destination allows (`requestTimeoutOf`): what `drainBudgetFor` sizes a drain for. */
  readonly longestRequestMs?: number;
  /**
   * Says that rows were just written (a LISTEN/NOTIFY wake-up, an enqueue in this process): a running drain
   * that would wait for its batches and end claims again at once instead. Optional for wrappers.
   */
  wake?(): void;
}

/**
 * Creates the outbox poller. Validates everything it can up front and throws one `ConfigError` listing every
 * problem: bad route patterns, routes naming unknown destinations, unknown transform functions, JSONata syntax.
 *
 * Delivery runs concurrently across keys and strictly in order within a key: rows of one key go one after
 * another, and when one is retried the rows behind it are released untried. Every settle is fenced by the claim
 * token; a stale id is logged and counted, never acted on. No database transaction is open during a delivery.
 */
/** Claims timed for the settles' `latencyMs` at most: far more than the rows in flight. */
const MAX_TIMED_CLAIMS = 100_000;

export function createOutboxPoller(deps: OutboxPollerDeps): OutboxPoller {
  const { store, options } = deps;
  const clock = deps.clock ?? systemClock;
  const logger = deps.logger ?? silentLogger;
  const random = deps.random ?? Math.random;
  const settleReserveMs = options.settleReserveMs ?? 1000;
  const batchesInFlight = Math.max(1, Math.floor(options.batchesInFlight ?? 2));
  const reclaimIntervalMs = Math.max(0, options.reclaimIntervalMs ?? 1000);
  let lastReclaimAt = Number.NEGATIVE_INFINITY;
  const fillMs = Math.max(0, options.fillMs ?? 20);
  const fillMinRows = Math.max(1, options.fillMinRows ?? 10);
  const stragglerQuietMs = Math.max(0, options.stragglerQuietMs ?? 100);
  const stragglerCap = Math.max(1, Math.floor(options.batchSize)) * batchesInFlight;
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const targetOf = compileTargets({
    routes: deps.routes,
    destinations: deps.destinations,
    transforms: deps.transforms,
    backoff: options.backoff,
    transformTimeoutMs: options.transformTimeoutMs,
  });
  const delivery = createDelivery({
    targetOf,
    publishers: deps.publishers,
    random,
    now: () => clock.now(),
    loadRow: (id) => store.get(id),
    ...(options.maxPayloadBytes === undefined ? {} : { maxPayloadBytes: options.maxPayloadBytes }),
    ...(options.largePayloadBudgetBytes === undefined
      ? {}
      : { largePayloadBudgetBytes: options.largePayloadBudgetBytes }),
  });
  // The longest request any destination allows: a drain long enough to fit it (and its settle) claims only while a
  // request started now could run to its own timeout, and starts none that could not (see `DeliveryWindow`).
  const longestRequestMs = Math.max(0, ...Object.values(deps.destinations).map(requestTimeoutOf));
  // Whether a lease leaves room for the longest request and its settle: then each batch also ends with its lease
  // (below). The configuration refuses a shorter lease (outbox.claimTimeoutMs); a poller built with one anyway keeps
  // the drain's deadline, as a batch bounded by it would release every row untried.
  const leaseBounds = options.claimTimeoutMs >= longestRequestMs + 2 * settleReserveMs;
  // Asks the store to leave payloads over DEFERRED_PAYLOAD_BYTES out of the claim (the PostgreSQL store does; one
  // that does not answers them whole): `delivery` reads each just before publishing it, within its byte budget.
  // Not an object literal at the call, so core's `ClaimOptions` takes the extra field.
  const claimOptions: ClaimOptions & { readonly deferPayloadsOverBytes: number } = {
    batchSize: options.batchSize,
    leaseMs: options.claimTimeoutMs,
    deferPayloadsOverBytes: DEFERRED_PAYLOAD_BYTES,
  };
  // Kept only for an observer of the settles (the delivery-latency metrics).
  const claimAnsweredAt = deps.onSettled ? new Map<RowId, number>() : undefined;
  const settling = createSettling({
    store,
    clock,
    logger,
    // A pause between two tries of a settle ends early when the close gives up.
    sleep: (ms) =>
      givenUp
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            const done = () => {
              clearTimeout(timer);
              giveUpWaiters.delete(done);
              resolve();
            };
            const timer = setTimeout(done, ms);
            giveUpWaiters.add(done);
          }),
    onUnsettled: ({ rows, sent }) => {
      if (!closed) return;
      unsettledAfterClose.unsettled += rows;
      unsettledAfterClose.unsettledSent += sent;
    },
    ...(deps.onSettled ? { onSettled: deps.onSettled } : {}),
    ...(claimAnsweredAt ? { claimAnsweredAt } : {}),
    ...(options.destinationWarnIntervalMs === undefined
      ? {}
      : { destinationWarnIntervalMs: options.destinationWarnIntervalMs }),
  });

  /**
   * Starts the delivery of one batch, group by group (one key's rows, or one row without a key); deliveries still
   * running at `deadline − settleReserveMs` are aborted and retried (the attempt counted). With `startCheck`, a row
   * is not started unless its destination's whole timeout fits before then.
   */
  const deliverGroups = (rows: readonly OutboxRow[], deadline: number, startCheck: boolean) => {
    const deliveries = new AbortController();
    const abortAt = deadline - settleReserveMs;
    // A deadline past what one timer waits (a caller's `Infinity`, a month) must not fire at once: see `longTimer`.
    const cancel = longTimer(
      () => deliveries.abort(new Error('drain deadline')),
      () => abortAt - clock.now(),
    );
    try {
      const groups = delivery.deliverGroups(rows, { signal: deliveries.signal, abortAt, startCheck });
      void Promise.allSettled(groups.map((group) => group.verdicts)).then(cancel);
      return groups;
    } catch (error) {
      cancel();
      throw error;
    }
  };

  let closed = false;
  const running = new Set<Promise<unknown>>();
  // Set when the close is told to give up (`OutboxPollerCloseOptions.signal`): settles tried again while the database
  // is unavailable end at once. Until then a closing poller tries them until their batch's deadline.
  let givenUp = false;
  const giveUpWaiters = new Set<() => void>();
  const giveUp = () => {
    givenUp = true;
    for (const resolve of giveUpWaiters) resolve();
    giveUpWaiters.clear();
  };
  // Rows whose settle failed for good after close() began (`OutboxPollerClosed`).
  const unsettledAfterClose = { unsettled: 0, unsettledSent: 0 };

  // The work every drain counts against `batchesInFlight`: batches being delivered, and delivered batches whose
  // settle is being written, of all drains (a drain that handed over leaves its own running beside the next).
  const delivering = new Set<Promise<void>>();
  const writing = new Set<Promise<void>>();
  // Groups split off their batch while still running (`stragglerQuietMs`), of all drains, and their rows.
  const straggling = new Set<Promise<void>>();
  let stragglerRows = 0;
  // Batches with keyed rows settled so far: each can make the rows behind its keys claimable.
  let keyedSettles = 0;
  // Drains that handed over (`DrainHandOff`), and drains run by a loop that threw, until what they settled has been
  // reported by a later drain; `done` once the batches they left settled.
  interface Leftover {
    readonly counts: SettleCounts;
    reported: SettleCounts;
    done: boolean;
    readonly settled: Promise<void>;
  }
  const leftovers = new Set<Leftover>();
  // The first failure of a batch left by a drain that handed over; the drain claiming meanwhile (or the next)
  // throws it.
  let leftoverFailure: { error: unknown } | undefined;

  /** Adds to `counts` what the leftovers settled since a report last counted them, and forgets finished ones. */
  const reportLeftovers = (counts: SettleCounts) => {
    for (const leftover of leftovers) {
      for (const field of SETTLED_FIELDS) counts[field] += leftover.counts[field] - leftover.reported[field];
      leftover.reported = { ...leftover.counts };
      if (leftover.done) leftovers.delete(leftover);
    }
  };

  /** Resolves once one of `work` is over, fulfilled or not (the caller reads failures where they belong). */
  const oneOf = (work: Iterable<Promise<unknown>>) =>
    Promise.race([...work].map((promise) => promise.then(noop, noop)));

  let wakeups = 0;
  const wakeWaiters = new Set<() => void>();
  const nextWake = () => {
    let resolve = () => {};
    const promise = new Promise<void>((r) => {
      resolve = r;
    });
    wakeWaiters.add(resolve);
    return { promise, cancel: () => wakeWaiters.delete(resolve) };
  };
  const wake = () => {
    wakeups++;
    for (const resolve of wakeWaiters) resolve();
    wakeWaiters.clear();
  };

  const reclaim = async (): Promise<ReclaimReport> => {
    const now = clock.now();
    if (!intervalPassed(now, lastReclaimAt, reclaimIntervalMs)) return { returned: 0, dead: 0 };
    const reclaimed = await store.reclaimExpired(options.reclaimLimit);
    lastReclaimAt = now;
    if (reclaimed.returned + reclaimed.dead > 0)
      logger.info('outbox reclaimed expired claims', { ...reclaimed });
    return reclaimed;
  };

  const drainOnce = async (budget: DrainBudget): Promise<OutboxDrainReport> => {
    const { handOff } = budget;
    const counts = noSettleCounts();
    // A drain long enough for the longest request and its settle claims only while such a request still fits;
    // a shorter one (a caller's short deadline) claims as before, and what its deadline cuts is released.
    const fits = budget.deadline - clock.now() >= longestRequestMs + 2 * settleReserveMs;
    const claimUntil = fits
      ? settleReserveMs + Math.max(settleReserveMs, longestRequestMs)
      : 2 * settleReserveMs;
    let stoppedFor: DrainStop;
    // This drain's own batches being delivered and its settles being written (also in `delivering` / `writing`),
    // and its stragglers (also in `straggling`).
    const batches = new Set<Promise<void>>();
    const settles = new Set<Promise<void>>();
    const stragglers = new Set<Promise<void>>();
    let failure: { error: unknown } | undefined;
    // Set once this drain returned before its batches settled: a failure of theirs is then the next drain's to throw.
    let handedOver = false;
    const fail = (error: unknown) => {
      failure ??= { error };
      if (handedOver) leftoverFailure ??= { error };
    };

    /**
     * Settles delivered groups in one settle, counted as a write (`writing`); while the database is unavailable it
     * is tried again until `until` (the batch's deadline, within its lease: see `Settling.settle`).
     */
    const settleGroups = (done: readonly DoneGroup[], until: number) => {
      const rows = done.flatMap((group) => group.rows);
      const verdicts = new Map<RowId, Verdict>();
      for (const group of done) {
        group.rows.forEach((row, i) => {
          verdicts.set(row.id, group.verdicts[i] as Verdict);
        });
      }
      const keyed = rows.some((row) => row.key !== null);
      // Tried again until the batch's deadline, a closing poller's too (a stop during a short outage must not leave
      // delivered rows to their lease), unless the close gave up.
      const retry = { until, stopped: () => givenUp };
      const settle: Promise<void> = settling.settle(rows, verdicts, counts, retry).finally(() => {
        settles.delete(settle);
        writing.delete(settle);
        if (keyed) keyedSettles++;
      });
      settle.catch(fail);
      settles.add(settle);
      writing.add(settle);
    };

    /**
     * Delivers a claimed batch and settles it: whole once every group is done, or, once some groups are done and
     * none has finished for `stragglerQuietMs`, the groups done now and each straggler when it is done (see
     * `stragglerQuietMs`). Resolves when the batch no longer counts against `batchesInFlight`; its settles are
     * registered (`settles`, `stragglers`) before that. A group that fails fails the drain and is not settled (its
     * rows wait for their lease); the groups delivered beside it are settled.
     */
    const deliverAndSettle = async (rows: readonly OutboxRow[], deadline: number): Promise<void> => {
      const groups = deliverGroups(rows, deadline, fits);
      const done = new Map<DeliveryGroup, readonly Verdict[]>();
      let running = groups.length;
      let runningRows = rows.length;
      let failed: { error: unknown } | undefined;
      let lastDoneAt: number | undefined;
      let split = false;
      let allDone: () => void = noop;
      const over = new Promise<void>((resolve) => {
        allDone = resolve;
      });
      const finished = (group: DeliveryGroup) => {
        running--;
        runningRows -= group.rows.length;
        lastDoneAt = clock.now();
        if (running === 0) allDone();
      };
      for (const group of groups) {
        // Once split, each straggler's own handler (below) settles it.
        group.verdicts.then(
          (verdicts) => {
            if (split) return;
            done.set(group, verdicts);
            finished(group);
          },
          (error: unknown) => {
            if (split) return;
            failed ??= { error };
            finished(group);
          },
        );
      }
      if (groups.length === 0) allDone();
      // One timer per quiet period, not per group: a batch that is done within it costs one setTimeout.
      while (stragglerQuietMs > 0 && running > 0 && failed === undefined) {
        if (done.size > 0 && stragglerRows + runningRows > stragglerCap) {
          // Over the cap (a destination that hangs on most rows): wait for this batch to finish or for a straggler
          // to end, not on a timer, which would fire every millisecond for as long as the slow rows run.
          await Promise.race([over, ...(straggling.size > 0 ? [oneOf(straggling)] : [])]);
          continue;
        }
        const wait =
          lastDoneAt === undefined ? stragglerQuietMs : lastDoneAt + stragglerQuietMs - clock.now();
        let timer: ReturnType<typeof setTimeout> | undefined;
        await Promise.race([
          over,
          new Promise<void>((resolve) => {
            timer = setTimeout(resolve, Math.max(1, wait));
          }),
        ]);
        clearTimeout(timer);
        const quiet = lastDoneAt !== undefined && clock.now() - lastDoneAt >= stragglerQuietMs;
        if (running === 0 || failed !== undefined || !quiet || done.size === 0) continue;
        if (stragglerRows + runningRows > stragglerCap) continue;
        // Split: what is done settles now; each group still running settles on its own when done.
        split = true;
        settleGroups(
          [...done].map(([group, verdicts]) => ({ rows: group.rows, verdicts })),
          deadline,
        );
        for (const group of groups) {
          if (done.has(group)) continue;
          stragglerRows += group.rows.length;
          const straggler: Promise<void> = group.verdicts
            .then(
              (verdicts) => settleGroups([{ rows: group.rows, verdicts }], deadline),
              (error: unknown) => fail(error),
            )
            .finally(() => {
              stragglerRows -= group.rows.length;
              stragglers.delete(straggler);
              straggling.delete(straggler);
            });
          stragglers.add(straggler);
          straggling.add(straggler);
        }
        return;
      }
      await over;
      if (failed) {
        // The groups delivered are settled all the same (a row sent and left processing would be sent again after
        // its lease); the failed group's rows are left to their lease, as after a crash.
        const delivered = groups.filter((group) => done.has(group));
        if (delivered.length > 0) {
          settleGroups(
            delivered.map((group) => ({ rows: group.rows, verdicts: done.get(group) ?? [] })),
            deadline,
          );
        }
        throw failed.error;
      }
      settleGroups(
        groups.map((group) => ({ rows: group.rows, verdicts: done.get(group) ?? [] })),
        deadline,
      );
    };
    // The reclaim step runs beside the first claim rather than before it, so the row whose wake-up started this
    // drain does not wait for it; rows it returns to pending count as a wake-up and are claimed in this drain.
    // A drain under load claims for its whole budget (up to the longest timeout + 30 s), so the step runs again
    // beside a later claim once `reclaimIntervalMs` has passed: a claim another process left when it died is
    // returned within about that interval of its lease's end, not at the next drain.
    let reclaimed: ReclaimReport = { returned: 0, dead: 0 };
    let reclaimPending = false;
    let reclaiming: Promise<void> = Promise.resolve();
    const startReclaim = () => {
      if (reclaimPending || !intervalPassed(clock.now(), lastReclaimAt, reclaimIntervalMs)) return;
      reclaimPending = true;
      reclaiming = reclaim().then(
        (report) => {
          reclaimPending = false;
          reclaimed = {
            returned: reclaimed.returned + report.returned,
            dead: reclaimed.dead + report.dead,
          };
          if (report.returned > 0) wake();
        },
        (error: unknown) => {
          reclaimPending = false;
          fail(error);
        },
      );
    };
    startReclaim();
    // A claim that came back short (fewer rows than asked) saw every claimable row of its snapshot. Until a batch
    // with keyed rows settles, which can make the rows behind its keys claimable, claiming again would find
    // nothing: rows written since then wake the next drain (LISTEN/NOTIFY, a wake-up call) or the next poll finds
    // them. So after a short claim the drain waits for the batches in flight and ends, instead of ending on an empty
    // claim; a wake-up meanwhile (`wake()`) makes it claim again at once, next to the batches in flight, and so do,
    // for a loop's drain (`handOff`), a settled keyed batch and the poll interval.
    let short = false;
    // Keyed batches settled (`keyedSettles`) when the latest claim was sent (its snapshot may predate a later one).
    let seenKeyedSettles = keyedSettles;
    // Wake-ups (`wake()`) seen when the latest claim was sent: a later one means rows written since its snapshot.
    let seenWakeups = wakeups;
    // When the latest claim was sent; when it answered and how many rows it returned (for `fillMs`).
    let claimSentAt = clock.now();
    let claimedAt = 0;
    let lastClaimed = 0;
    let filled = false;
    for (;;) {
      if (failure) {
        stoppedFor = 'aborted';
        break;
      }
      if (leftoverFailure) {
        // A batch an earlier drain left failed: stop claiming and throw it once everything settled, as for our own.
        failure = leftoverFailure;
        leftoverFailure = undefined;
        stoppedFor = 'aborted';
        break;
      }
      if (closed) {
        stoppedFor = 'closed';
        break;
      }
      if (budget.signal?.aborted) {
        stoppedFor = 'aborted';
        break;
      }
      if (budget.deadline - clock.now() < claimUntil) {
        stoppedFor = 'time';
        break;
      }
      // The limits count the batches and settles of every drain of this poller, a drain that handed over included.
      if (delivering.size >= batchesInFlight) {
        await oneOf(delivering);
        continue;
      }
      if (writing.size >= batchesInFlight) {
        await oneOf(writing);
        continue;
      }
      const keyedSettled = keyedSettles !== seenKeyedSettles;
      if (short && wakeups === seenWakeups && !(handOff && keyedSettled)) {
        if (delivering.size + writing.size + straggling.size > 0 || reclaimPending) {
          // A batch delivered or settled, the reclaim step done, or a wake-up, whichever comes first; for a loop's
          // drain also the poll interval, after which it claims again even though nothing said so.
          const pollAt = handOff
            ? claimSentAt + Math.max(1, handOff.pollIntervalMs)
            : Number.POSITIVE_INFINITY;
          const wait = pollAt - clock.now();
          if (wait > 0) {
            const woken = nextWake();
            let cancelPoll = noop;
            const polled = Number.isFinite(wait)
              ? new Promise<void>((resolve) => {
                  cancelPoll = longTimer(resolve, () => pollAt - clock.now());
                })
              : undefined;
            const work: Promise<unknown>[] = [...delivering, ...writing, ...straggling];
            if (reclaimPending) work.push(reclaiming);
            await Promise.race([oneOf(work), woken.promise, ...(polled ? [polled] : [])]);
            woken.cancel();
            cancelPoll();
            continue;
          }
        } else if (!keyedSettled) {
          stoppedFor = 'empty';
          break;
        }
      }
      if (short && fillMs > 0 && lastClaimed >= fillMinRows && !filled) {
        // Under load: let the next batch fill (see `fillMs`), once per claim; then the checks above run again.
        filled = true;
        const wait = Math.min(claimedAt + fillMs, budget.deadline) - clock.now();
        if (wait > 0) {
          await sleep(wait);
          continue;
        }
      }
      seenKeyedSettles = keyedSettles;
      seenWakeups = wakeups;
      filled = false;
      startReclaim();
      claimSentAt = clock.now();
      let rows: OutboxRow[];
      try {
        rows = await store.claim(claimOptions);
      } catch (error) {
        // The batches in flight still settle before the drain reports the failure.
        fail(error);
        continue;
      }
      short = rows.length < options.batchSize;
      lastClaimed = rows.length;
      claimedAt = clock.now();
      if (claimAnsweredAt !== undefined) {
        const answeredAt = performance.now();
        for (const row of rows) claimAnsweredAt.set(row.id, answeredAt);
        // Rows whose settle never came (given back on a stop, a settle that failed) must not pile up: oldest out.
        if (claimAnsweredAt.size > MAX_TIMED_CLAIMS) {
          for (const id of claimAnsweredAt.keys()) {
            claimAnsweredAt.delete(id);
            if (claimAnsweredAt.size <= MAX_TIMED_CLAIMS / 2) break;
          }
        }
      }
      const withoutId = rows.some((row) => claimedMessageId(row) === undefined);
      if (rows.length > 0 && (closed || budget.signal?.aborted || withoutId)) {
        // Stopped while this claim was out: give the rows back untried rather than start new work. A claim without
        // message ids (an outbox store used without its Store's `withMessageIds`) gives them back too, and fails the
        // drain: sent under bare row ids they would collide with another schema's, and retried they would burn their
        // attempts. A failed release ends the drain on the normal path (the batches in flight still settle first).
        try {
          const report = await store.release(
            rows.map((row) => ({ id: row.id, claimToken: row.claimToken as string })),
          );
          counts.released += report.settled.length;
        } catch (error) {
          fail(error);
        }
        if (withoutId) fail(new QueueBoxError(NO_MESSAGE_ID));
        continue;
      }
      if (rows.length === 0) continue;
      counts.batches++;
      counts.claimed += rows.length;
      // A batch ends with its lease, too: leases are never renewed, and a request still running when the lease
      // ends would race another drain's claim of the row (delivered twice, the late answer stale). So a row whose
      // timeout no longer fits before its lease ends is released untried, like one whose timeout passes the drain's.
      const batchDeadline = leaseBounds
        ? Math.min(budget.deadline, claimSentAt + options.claimTimeoutMs)
        : budget.deadline;
      const batch: Promise<void> = deliverAndSettle(rows, batchDeadline).finally(() => {
        batches.delete(batch);
        delivering.delete(batch);
      });
      // Failures are recorded at once (`fail`); marked handled so none is an unhandled rejection.
      batch.catch(fail);
      batches.add(batch);
      delivering.add(batch);
    }
    await reclaiming;
    // Every settle and straggler is added before its batch leaves `batches` (a straggler's settle before it leaves
    // `stragglers`), so once all three are empty everything this drain claimed has settled.
    const ownSettled = async () => {
      while (batches.size + stragglers.size + settles.size > 0) {
        await Promise.allSettled([...batches, ...stragglers, ...settles]);
      }
    };
    if (handOff && stoppedFor === 'time' && failure === undefined && !budget.signal?.aborted) {
      // Hand over: the next drain claims while these batches finish; what they settle later is reported by it.
      handedOver = true;
      const leftover: Leftover = {
        counts,
        reported: noSettleCounts(),
        done: false,
        settled: ownSettled().then(() => {
          leftover.done = true;
        }),
      };
      leftovers.add(leftover);
      const report = { ...noSettleCounts(), batches: counts.batches, claimed: counts.claimed };
      reportLeftovers(report);
      const handed: OutboxDrainReport = { reclaimed, ...report, stoppedFor };
      logger.debug('outbox drain finished', {
        ...handed,
        requestsLeft: batches.size + stragglers.size + settles.size,
      });
      return handed;
    }
    await ownSettled();
    if (handOff) {
      // A loop's drain leaves nothing running when it stops for anything but time.
      await Promise.allSettled([...leftovers].map((leftover) => leftover.settled));
      failure ??= leftoverFailure;
      leftoverFailure = undefined;
      if (failure) {
        // What it settled is reported by the next drain that returns.
        leftovers.add({ counts, reported: noSettleCounts(), done: true, settled: Promise.resolve() });
        throw failure.error;
      }
      reportLeftovers(counts);
    }
    if (failure) throw failure.error;
    const report: OutboxDrainReport = { reclaimed, ...counts, stoppedFor };
    logger.debug('outbox drain finished', { ...report });
    return report;
  };

  return {
    async drain(budget) {
      if (closed) {
        return { reclaimed: { returned: 0, dead: 0 }, ...noSettleCounts(), stoppedFor: 'closed' };
      }
      const work = drainOnce(budget);
      running.add(work);
      try {
        return await work;
      } finally {
        running.delete(work);
      }
    },
    async close(closeOptions) {
      closed = true;
      const signal = closeOptions?.signal;
      const onAbort = () => giveUp();
      if (signal?.aborted) giveUp();
      else signal?.addEventListener('abort', onAbort, { once: true });
      try {
        await Promise.allSettled([...running]);
        await Promise.allSettled([...leftovers].map((leftover) => leftover.settled));
      } finally {
        signal?.removeEventListener('abort', onAbort);
      }
      settling.flushLogs();
      if (unsettledAfterClose.unsettled > 0) {
        logger.warn('outbox rows left unsettled by the stop; they return when their lease ends', {
          ...unsettledAfterClose,
        });
      }
    },
    closeReport: () => ({ ...unsettledAfterClose }),
    wake,
    longestRequestMs,
  };
}

/** A group of a batch whose delivery is done, with the verdict of each row. */
interface DoneGroup {
  readonly rows: readonly OutboxRow[];
  readonly verdicts: readonly Verdict[];
}

/** The counts a settle adds to, which a later report takes over from a drain that handed over. */
const SETTLED_FIELDS = ['sent', 'retried', 'dead', 'released', 'stale'] as const;

const noop = () => {};

/**
 * The longest delay one `setTimeout` waits: Node fires a longer one (and `Infinity`, and NaN) after 1 ms, with a
 * warning, which would abort a drain's requests as soon as they started.
 */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Calls `fire` once `remaining()` (milliseconds, read again at each wake) is no longer above 0, waiting in steps of
 * at most MAX_TIMER_MS; never fires while it is `Infinity` (or NaN). Answers the function that cancels it.
 */
function longTimer(fire: () => void, remaining: () => number): () => void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let cancelled = false;
  const arm = () => {
    if (cancelled) return;
    const left = remaining();
    if (Number.isNaN(left) || left === Number.POSITIVE_INFINITY) return;
    if (left <= MAX_TIMER_MS) {
      timer = setTimeout(fire, Math.max(0, left));
      return;
    }
    timer = setTimeout(arm, MAX_TIMER_MS);
  };
  arm();
  return () => {
    cancelled = true;
    clearTimeout(timer);
  };
}
