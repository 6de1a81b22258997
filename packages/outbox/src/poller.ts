import {
  type Clock,
  ConfigError,
  type ConfigIssue,
  type OutboxDeadItem,
  type OutboxRetryItem,
  type OutboxRow,
  type OutboxSentItem,
  type OutboxStore,
  type Publisher,
  type ReclaimReport,
  type RowClaim,
  type RowId,
  type SettleReport,
  systemClock,
} from '@queuebox/core';
import { DEFAULT_BACKOFF, type Random, resolveBackoff, retryDelay } from './backoff.ts';
import { type OutboxLogger, silentLogger } from './logger.ts';
import type { BackoffOptions, DestinationOptions, OutboxOptions, RouteOptions } from './options.ts';
import { createRouter, type Router } from './router.ts';
import {
  type CompiledTransform,
  chainTransforms,
  checkTransforms,
  createTransformCompiler,
  createTransformRegistry,
  type TransformRegistry,
} from './transforms.ts';

/** Finds the publisher of a destination: a function, or anything with `get` (a `Map`, a `PublisherSet`). */
export type PublisherLookup =
  | ((destination: string) => Publisher | undefined)
  | { get(destination: string): Publisher | undefined };

/** The poller's options: the `outbox` section plus knobs of the drain itself. */
export interface OutboxPollerOptions extends OutboxOptions {
  /** Time one transform may take before it counts as a rejection. Default 1000 ms. */
  readonly transformTimeoutMs?: number;
  /**
   * Time kept at the end of a drain for settling. Deliveries still running at `deadline − settleReserveMs` are
   * aborted (and retried), and no batch is claimed once less than twice this remains. Default 1000 ms.
   */
  readonly settleReserveMs?: number;
  /** Most expired claims returned per reclaim step. Default: the store's. */
  readonly reclaimLimit?: number;
  /**
   * Least time between two reclaim steps of this poller: a drain starts with one only when this much has passed
   * since the last (the first drain always runs it). A lease lasts `claimTimeoutMs` (minutes by default), so an
   * expired claim waits at most this much longer, while a busy poller no longer pays a statement per drain for a
   * step that almost never finds anything. Default 1000 ms; 0 reclaims at the start of every drain.
   */
  readonly reclaimIntervalMs?: number;
  /**
   * Batches delivered at once within one drain: the next batch is claimed while the current one is delivered,
   * so the claim round trip and the destination's answer overlap. Per-key order holds because a claim never
   * returns a row whose key has an earlier row in processing. Default 2; 1 claims only after a batch settled.
   */
  readonly batchesInFlight?: number;
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
  readonly logger?: OutboxLogger;
  /** Jitter source. Default `Math.random`. */
  readonly random?: Random;
  /**
   * Told after each batch's settle with the rows the store settled (stale claims are left out), e.g. for a
   * delivery-latency histogram (`row.createdAt` → `settledAt`). Runs synchronously; what it throws is ignored.
   * Default: none.
   */
  readonly onSettled?: (rows: readonly SettledOutboxRow[]) => void;
}

/** One row a settle changed, as `OutboxPollerDeps.onSettled` sees it. */
export interface SettledOutboxRow {
  /** The row as it was claimed (before the settle). */
  readonly row: OutboxRow;
  /** `sent`; `retried` (back to pending for later); `dead`; `released` (given back untried). */
  readonly outcome: 'sent' | 'retried' | 'dead' | 'released';
  /** The destination the router chose; null when no route matched (and for released rows). */
  readonly destination: string | null;
  /** When the settle was acknowledged, by the poller's clock (epoch milliseconds). */
  readonly settledAt: number;
}

/** How long a drain may run. */
export interface DrainBudget {
  /** Time (the clock's milliseconds) by which the drain has settled everything and returned. */
  readonly deadline: number;
  /** Stops claiming when aborted; deliveries in flight finish and are settled. */
  readonly signal?: AbortSignal;
}

/** Why a drain returned. */
export type DrainStop = 'empty' | 'time' | 'aborted' | 'closed';

/** What one drain did. */
export interface DrainReport {
  /** The reclaim step at the start. */
  readonly reclaimed: ReclaimReport;
  readonly batches: number;
  readonly claimed: number;
  readonly sent: number;
  /** Back to pending for a later try. */
  readonly retried: number;
  /** Dead-lettered (no route, no publisher, transform rejected, permanent answer, no attempt left). */
  readonly dead: number;
  /** Given back untried (rows behind a retrying row of the same key, or left when time ran out). */
  readonly released: number;
  /** Settles refused because the claim was lost (lease expired and the row reclaimed); the rows were not touched. */
  readonly stale: number;
  readonly stoppedFor: DrainStop;
}

/** The outbox poller. */
export interface OutboxPoller {
  /** Reclaims expired leases, then claims, delivers and settles batches while rows are claimable and time lasts. */
  drain(budget: DrainBudget): Promise<DrainReport>;
  /** Refuses new drains and waits for running ones. The publishers belong to the caller. */
  close(): Promise<void>;
  /**
   * Says that rows were just written (a LISTEN/NOTIFY wake-up, an enqueue in this process): a running drain
   * that would wait for its batches and end claims again at once instead. Optional for wrappers.
   */
  wake?(): void;
}

type Verdict =
  | { readonly kind: 'sent'; readonly destination: string }
  | { readonly kind: 'retry'; readonly error: string; readonly delayMs: number; readonly destination: string }
  | {
      readonly kind: 'dead';
      readonly reason: string;
      readonly destination: string | null;
      readonly attempted: boolean;
    }
  | { readonly kind: 'release' };

interface Counts {
  batches: number;
  claimed: number;
  sent: number;
  retried: number;
  dead: number;
  released: number;
  stale: number;
}

const noCounts = (): Counts => ({
  batches: 0,
  claimed: 0,
  sent: 0,
  retried: 0,
  dead: 0,
  released: 0,
  stale: 0,
});

interface Target {
  readonly destination: string;
  readonly options: DestinationOptions;
  readonly backoff: BackoffOptions;
  readonly transform: CompiledTransform | undefined;
}

/**
 * Creates the outbox poller. Validates everything it can up front and throws one `ConfigError` listing every
 * problem: bad route patterns, routes naming unknown destinations, unknown transform functions, JSONata syntax.
 *
 * Delivery runs concurrently across keys and strictly in order within a key: rows of one key go one after
 * another, and when one is retried the rows behind it are released untried. Every settle is fenced by the claim
 * token; a stale id is logged and counted, never acted on. No database transaction is open during a delivery.
 */
export function createOutboxPoller(deps: OutboxPollerDeps): OutboxPoller {
  const { store, options } = deps;
  const clock = deps.clock ?? systemClock;
  const logger = deps.logger ?? silentLogger;
  const random = deps.random ?? Math.random;
  const settleReserveMs = options.settleReserveMs ?? 1000;
  const batchesInFlight = Math.max(1, Math.floor(options.batchesInFlight ?? 2));
  const reclaimIntervalMs = Math.max(0, options.reclaimIntervalMs ?? 1000);
  let lastReclaimAt = Number.NEGATIVE_INFINITY;
  const lookup =
    typeof deps.publishers === 'function'
      ? deps.publishers
      : (name: string) => (deps.publishers as { get(d: string): Publisher | undefined }).get(name);

  const issues: ConfigIssue[] = [];
  let router: Router<RouteOptions> | undefined;
  try {
    router = createRouter(deps.routes);
  } catch (error) {
    if (error instanceof ConfigError) issues.push(...error.issues);
    else throw error;
  }
  deps.routes.forEach((route, i) => {
    if (!Object.hasOwn(deps.destinations, route.destination)) {
      issues.push({
        path: `routes[${i}].destination`,
        message: `no destination named "${route.destination}" (known: ${Object.keys(deps.destinations).join(', ') || 'none'})`,
      });
    }
  });
  const compiler = createTransformCompiler({
    registry: deps.transforms ?? createTransformRegistry(),
    timeoutMs: options.transformTimeoutMs,
  });
  issues.push(...checkTransforms(compiler, deps.routes, deps.destinations));
  if (issues.length > 0 || router === undefined) throw new ConfigError(issues);
  const routeOf = router;

  const outboxBackoff = options.backoff ?? DEFAULT_BACKOFF;
  const destinationTransforms = new Map<string, CompiledTransform | undefined>();
  for (const [name, destination] of Object.entries(deps.destinations)) {
    const spec = destination.transform;
    destinationTransforms.set(name, spec && compiler.compile(spec, `destinations.${name}.transform`));
  }
  const targets = new Map<RouteOptions, Target>();
  deps.routes.forEach((route, i) => {
    const destination = deps.destinations[route.destination] as DestinationOptions;
    const own = route.transform && compiler.compile(route.transform, `routes[${i}].transform`);
    const chain = [own, destinationTransforms.get(route.destination)].filter((t) => t !== undefined);
    targets.set(route, {
      destination: route.destination,
      options: destination,
      backoff: resolveBackoff(outboxBackoff, destination.backoff),
      transform: chainTransforms(chain),
    });
  });

  const deliver = async (row: OutboxRow, deliveries: AbortSignal): Promise<Verdict> => {
    const route = routeOf.route(row.topic);
    if (route === undefined) {
      return {
        kind: 'dead',
        reason: `no route matches topic "${row.topic}"`,
        destination: null,
        attempted: false,
      };
    }
    const target = targets.get(route) as Target;
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
    let payload = row.payload;
    let headers = row.headers;
    if (target.transform !== undefined) {
      const outcome = await target.transform.apply({
        payload,
        headers,
        topic: row.topic,
        key: row.key,
        id: row.id,
      });
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

    let outcome: Awaited<ReturnType<Publisher['publish']>>;
    try {
      outcome = await publisher.publish(
        { id: row.id, topic: row.topic, key: row.key, payload, headers, attempt: row.attempt },
        deliveries,
      );
    } catch (error) {
      outcome = {
        kind: 'retry',
        error: `publisher failed: ${error instanceof Error ? error.message : String(error)}`,
      };
    }
    if (outcome.kind === 'sent') return { kind: 'sent', destination };
    if (outcome.kind === 'dead') return { kind: 'dead', reason: outcome.error, destination, attempted: true };

    const attempt = row.attempt + 1;
    const destinationMax = target.options.maxAttempts;
    if (destinationMax !== undefined && destinationMax < row.maxAttempts && attempt >= destinationMax) {
      return {
        kind: 'dead',
        reason: `${outcome.error} (destination "${destination}" allows ${destinationMax} attempts)`,
        destination,
        attempted: true,
      };
    }
    // A delivery cut short by our own deadline is not the destination's fault: try again at once.
    const delayMs = deliveries.aborted
      ? 0
      : retryDelay({ attempt, policy: target.backoff, retryAfterMs: outcome.retryAfterMs, random });
    return { kind: 'retry', error: outcome.error, delayMs, destination };
  };

  const deliverGroup = async (rows: readonly OutboxRow[], deliveries: AbortSignal): Promise<Verdict[]> => {
    const verdicts: Verdict[] = [];
    let holdBack = false;
    for (const row of rows) {
      // Once a row of the key is retried, the rows behind it must not overtake it.
      if (holdBack || deliveries.aborted) {
        verdicts.push({ kind: 'release' });
        continue;
      }
      const verdict = await deliver(row, deliveries);
      verdicts.push(verdict);
      if (verdict.kind === 'retry' || verdict.kind === 'release') holdBack = true;
    }
    return verdicts;
  };

  const settle = async (
    rows: readonly OutboxRow[],
    verdicts: ReadonlyMap<RowId, Verdict>,
    counts: Counts,
  ) => {
    const sent: OutboxSentItem[] = [];
    const retry: OutboxRetryItem[] = [];
    const dead: OutboxDeadItem[] = [];
    const release: RowClaim[] = [];
    for (const row of rows) {
      const verdict = verdicts.get(row.id);
      const claim = { id: row.id, claimToken: row.claimToken as string };
      if (verdict === undefined || verdict.kind === 'release') release.push(claim);
      else if (verdict.kind === 'sent') sent.push({ ...claim, destination: verdict.destination });
      else if (verdict.kind === 'retry') {
        retry.push({
          ...claim,
          error: verdict.error,
          delayMs: verdict.delayMs,
          destination: verdict.destination,
        });
      } else {
        dead.push({
          ...claim,
          reason: verdict.reason,
          destination: verdict.destination,
          attempted: verdict.attempted,
        });
        logger.warn('outbox row dead', {
          id: row.id,
          topic: row.topic,
          destination: verdict.destination,
          claimToken: row.claimToken,
          reason: verdict.reason,
        });
      }
    }
    const [sentReport, retryReport, deadReport, releaseReport] = await Promise.all([
      sent.length > 0 ? store.markSent(sent) : undefined,
      retry.length > 0 ? store.retry(retry) : undefined,
      dead.length > 0 ? store.markDead(dead) : undefined,
      release.length > 0 ? store.release(release) : undefined,
    ]);
    counts.sent += sentReport?.settled.length ?? 0;
    for (const item of retryReport?.settled ?? []) {
      if (item.state === 'Dead') counts.dead++;
      else counts.retried++;
    }
    counts.dead += deadReport?.settled.length ?? 0;
    counts.released += releaseReport?.settled.length ?? 0;
    if (deps.onSettled) reportSettled(rows, verdicts, [sentReport, retryReport, deadReport, releaseReport]);
    const stale = [
      ...(sentReport?.stale ?? []),
      ...(retryReport?.stale ?? []),
      ...(deadReport?.stale ?? []),
      ...(releaseReport?.stale ?? []),
    ];
    if (stale.length > 0) {
      counts.stale += stale.length;
      logger.warn('outbox claims lost before settling (lease expired); rows left to their new owner', {
        ids: stale,
      });
    }
  };

  const reportSettled = (
    rows: readonly OutboxRow[],
    verdicts: ReadonlyMap<RowId, Verdict>,
    reports: readonly (SettleReport | undefined)[],
  ) => {
    const byId = new Map(rows.map((row) => [row.id, row]));
    const settledAt = clock.now();
    const settled: SettledOutboxRow[] = [];
    for (const report of reports) {
      for (const item of report?.settled ?? []) {
        const row = byId.get(item.id);
        if (row === undefined) continue;
        const verdict = verdicts.get(item.id);
        const outcome =
          item.state === 'Sent'
            ? 'sent'
            : item.state === 'Dead'
              ? 'dead'
              : verdict?.kind === 'retry'
                ? 'retried'
                : 'released';
        const destination = verdict && verdict.kind !== 'release' ? verdict.destination : null;
        settled.push({ row, outcome, destination, settledAt });
      }
    }
    try {
      deps.onSettled?.(settled);
    } catch {
      // An observer must not fail the drain.
    }
  };

  const runBatch = async (rows: readonly OutboxRow[], deadline: number, counts: Counts): Promise<void> => {
    const deliveries = new AbortController();
    const timer = setTimeout(
      () => deliveries.abort(new Error('drain deadline')),
      Math.max(0, deadline - settleReserveMs - clock.now()),
    );
    try {
      // Rows without a key are unordered: each is its own group.
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
      const verdicts = new Map<RowId, Verdict>();
      await Promise.all(
        [...groups.values(), ...unordered].map(async (group) => {
          const results = await deliverGroup(group, deliveries.signal);
          group.forEach((row, i) => {
            verdicts.set(row.id, results[i] as Verdict);
          });
        }),
      );
      await settle(rows, verdicts, counts);
    } finally {
      clearTimeout(timer);
    }
  };

  let closed = false;
  const running = new Set<Promise<unknown>>();

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

  const reclaim = async (): Promise<ReclaimReport> => {
    const now = clock.now();
    if (now - lastReclaimAt < reclaimIntervalMs) return { returned: 0, dead: 0 };
    const reclaimed = await store.reclaimExpired(options.reclaimLimit);
    lastReclaimAt = now;
    if (reclaimed.returned + reclaimed.dead > 0)
      logger.info('outbox reclaimed expired claims', { ...reclaimed });
    return reclaimed;
  };

  const drainOnce = async (budget: DrainBudget): Promise<DrainReport> => {
    const counts = noCounts();
    const reclaimed = await reclaim();
    let stoppedFor: DrainStop;
    const batches = new Set<Promise<void>>();
    let failure: { error: unknown } | undefined;
    // A claim that came back short (fewer rows than asked) saw every claimable row of its snapshot. Until a batch
    // with keyed rows settles, which can make the rows behind its keys claimable, claiming again would find
    // nothing: rows written since then wake the next drain (LISTEN/NOTIFY, a wake-up call) or the next poll finds
    // them. So after a short claim the drain waits for its batches and ends, instead of ending on an empty claim;
    // a wake-up meanwhile (`wake()`) makes it claim again at once, next to the batches in flight.
    let short = false;
    // Whether a batch with keyed rows settled since the latest claim was sent (its snapshot may predate that).
    let keyedSettled = false;
    // Wake-ups (`wake()`) seen when the latest claim was sent: a later one means rows written since its snapshot.
    let seenWakeups = wakeups;
    // Waits for one batch in flight to settle; a failed batch ends the drain once every batch has settled.
    const settleOne = async () => {
      try {
        await Promise.race(batches);
      } catch (error) {
        failure ??= { error };
      }
    };
    for (;;) {
      if (failure) {
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
      if (budget.deadline - clock.now() < 2 * settleReserveMs) {
        stoppedFor = 'time';
        break;
      }
      if (batches.size >= batchesInFlight) {
        await settleOne();
        continue;
      }
      if (short && wakeups === seenWakeups) {
        if (batches.size > 0) {
          // A batch settling or a wake-up, whichever comes first.
          const woken = nextWake();
          await Promise.race([settleOne(), woken.promise]);
          woken.cancel();
          continue;
        }
        if (!keyedSettled) {
          stoppedFor = 'empty';
          break;
        }
      }
      keyedSettled = false;
      seenWakeups = wakeups;
      let rows: OutboxRow[];
      try {
        rows = await store.claim({ batchSize: options.batchSize, leaseMs: options.claimTimeoutMs });
      } catch (error) {
        // The batches in flight still settle before the drain reports the failure.
        failure ??= { error };
        continue;
      }
      short = rows.length < options.batchSize;
      if (rows.length > 0 && (closed || budget.signal?.aborted)) {
        // Stopped while this claim was out: give the rows back untried rather than start new work.
        const report = await store.release(
          rows.map((row) => ({ id: row.id, claimToken: row.claimToken as string })),
        );
        counts.released += report.settled.length;
        continue;
      }
      if (rows.length === 0) continue;
      counts.batches++;
      counts.claimed += rows.length;
      const keyed = rows.some((row) => row.key !== null);
      const batch: Promise<void> = runBatch(rows, budget.deadline, counts).finally(() => {
        batches.delete(batch);
        if (keyed) keyedSettled = true;
      });
      // Observed later (race / allSettled); marked handled now so a failure meanwhile is not an unhandled rejection.
      batch.catch(() => undefined);
      batches.add(batch);
    }
    const outcomes = await Promise.allSettled([...batches]);
    const rejected = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
    if (failure) throw failure.error;
    if (rejected) throw rejected.reason;
    const report: DrainReport = { reclaimed, ...counts, stoppedFor };
    logger.debug('outbox drain finished', { ...report });
    return report;
  };

  return {
    async drain(budget) {
      if (closed) {
        return { reclaimed: { returned: 0, dead: 0 }, ...noCounts(), stoppedFor: 'closed' };
      }
      const work = drainOnce(budget);
      running.add(work);
      try {
        return await work;
      } finally {
        running.delete(work);
      }
    },
    async close() {
      closed = true;
      await Promise.allSettled([...running]);
    },
    wake() {
      wakeups++;
      for (const resolve of wakeWaiters) resolve();
      wakeWaiters.clear();
    },
  };
}

function byId(a: OutboxRow, b: OutboxRow): number {
  const x = BigInt(a.id);
  const y = BigInt(b.id);
  return x < y ? -1 : x > y ? 1 : 0;
}
