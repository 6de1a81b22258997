import type {
  Clock,
  LogFields,
  Logger,
  OutboxDeadItem,
  OutboxReleaseItem,
  OutboxRetryItem,
  OutboxRow,
  OutboxSentItem,
  OutboxStore,
  RowId,
  SettleReport,
} from '@queuebox/core';
import { createLogThrottle, retryWhileUnavailable } from '@queuebox/core';
import type { Verdict } from './delivery.ts';
import { createDestinationHealth } from './destination-health.ts';

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
  /**
   * From the row's insert to this settle, in ms, without mixing two clocks: the database's from `created_at` to the
   * claim (`updated_at`, which the claim set), then this process's monotonic clock from the claim's answer. The
   * two clocks may be minutes apart; `settledAt − created_at` was off by as much. Never negative.
   */
  readonly latencyMs: number;
}

/** What one drain's settles did so far; {@link Settling.settle} adds to it. */
export interface SettleCounts {
  batches: number;
  claimed: number;
  sent: number;
  retried: number;
  dead: number;
  released: number;
  stale: number;
}

/** Counts of a drain that has done nothing yet. */
export const noSettleCounts = (): SettleCounts => ({
  batches: 0,
  claimed: 0,
  sent: 0,
  retried: 0,
  dead: 0,
  released: 0,
  stale: 0,
});

/** What {@link createSettling} works with. */
export interface SettlingDeps {
  readonly store: OutboxStore;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Told after each settle with the rows the store settled; what it throws is ignored. */
  readonly onSettled?: (rows: readonly SettledOutboxRow[]) => void;
  /**
   * When each claimed row's claim was answered (`performance.now()`), by row id, for `latencyMs`; the settle reads and
   * forgets each. A row it does not hold is timed from its claim by the settle's `clock` instead.
   */
  readonly claimAnsweredAt?: Map<RowId, number>;
  /** How a settle waits before trying a store call again. Default a timer. */
  readonly sleep?: (ms: number) => Promise<void>;
  /**
   * Told when a settle failed for good (after its tries again, if any) with the rows of the store calls that failed:
   * their verdicts are lost and they stay processing until their lease ends; `sent` counts those delivered.
   */
  readonly onUnsettled?: (unsettled: { readonly rows: number; readonly sent: number }) => void;
  /**
   * Least time between two WARN `outbox destination failing` lines about one destination (`DestinationHealth`).
   * Default 60000.
   */
  readonly destinationWarnIntervalMs?: number;
}

/** Until when a settle the database could not take is tried again: a time (the clock's ms), and a way to stop. */
export interface RetryUntil {
  readonly until: number;
  /** True once the retries should end before `until` (the poller is closing). */
  readonly stopped?: () => boolean;
}

/** Settles delivered batches. */
export interface Settling {
  /**
   * Writes each row's verdict (a row without one is released), fenced by its claim token, and adds what the store
   * settled to `counts`. Stale claims are logged and counted, never acted on. With `retryUntil` (the clock's ms, unless stopped first), a
   * store call the database could not take (`StoreUnavailableError`: a restart, a failover) is tried again, with
   * pauses growing from 0.1 to 2 s, until it succeeds or the next try could not start before then: the verdicts
   * are known, so a blip of the database no longer leaves the rows to their lease (5 minutes by default), holding
   * their keys and delivering them again. A try whose first attempt committed after all finds its rows settled:
   * they count as stale.
   */
  settle(
    rows: readonly OutboxRow[],
    verdicts: ReadonlyMap<RowId, Verdict>,
    counts: SettleCounts,
    retryUntil?: RetryUntil,
  ): Promise<void>;
  /** Writes the `outbox row dead` lines counted but not written yet (the poller's close). */
  flushLogs(): void;
}

/** Creates the settling step of the poller: verdicts → one store call per outcome. */
export function createSettling(deps: SettlingDeps): Settling {
  const { store, clock, logger } = deps;
  // `outbox row dead` once a minute per destination and reason, then one line with the count and the first ids (a
  // destination down past the retry window made one WARN per row, 100 a second at 100 rows a second: an outside
  // audit). Every dead row keeps its last_error, and the metrics count each.
  const deadLines = createLogThrottle();
  const logDead = (row: OutboxRow, fields: LogFields & { destination?: string | null; reason: string }) => {
    // Keyed on the destination and whether attempts ran out, not on the reason's text (a publisher's error or a
    // transform's message differs per row: each would be a kind of its own); the line keeps the row's id, topic and
    // key only, never the row (its payload stays out of the throttle's memory).
    const line = { id: row.id, topic: row.topic, key: row.key, ...fields };
    deadLines.line(
      `${fields.destination ?? ''}:${fields.reason === 'no attempt left' ? 'exhausted' : 'dead'}`,
      (extra) => logger.warn('outbox row dead', { ...line, ...extra }),
      row.id,
    );
  };
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const health = createDestinationHealth({
    logger,
    clock,
    ...(deps.destinationWarnIntervalMs === undefined ? {} : { intervalMs: deps.destinationWarnIntervalMs }),
  });

  /** `write` once, or again while the database is unavailable (core's `retryWhileUnavailable`, within `until`). */
  const retrying = async <T>(
    what: string,
    write: () => Promise<T>,
    until: RetryUntil | undefined,
  ): Promise<T> => {
    if (until === undefined) return write();
    let failures = 0;
    let lastError: unknown;
    // A try after a pause that ended because the retries were stopped (a close that gave up) is not made: the last
    // error is thrown again instead, and ends the retries at once (a silent database would hold a try for its
    // connect timeout).
    const attempt = async () => {
      if (lastError !== undefined && until.stopped?.() === true) throw lastError;
      try {
        return await write();
      } catch (error) {
        lastError = error;
        throw error;
      }
    };
    const result = await retryWhileUnavailable(attempt, {
      until: until.until,
      ...(until.stopped ? { stopped: until.stopped } : {}),
      now: () => clock.now(),
      sleep,
      onUnavailable: (error, failed) => {
        failures = failed;
        if (failed === 1) {
          logger.warn(
            'outbox settle failed: the database is unavailable (or chose it as a deadlock victim); trying again',
            {
              what,
              error: error.message,
            },
          );
        }
      },
    });
    if (failures > 0)
      logger.info('outbox settle written after the database came back', { what, tries: failures + 1 });
    return result;
  };

  const reportSettled = (
    rows: readonly OutboxRow[],
    verdicts: ReadonlyMap<RowId, Verdict>,
    reports: readonly (SettleReport | undefined)[],
  ) => {
    const byId = new Map(rows.map((row) => [row.id, row]));
    const settledAt = clock.now();
    const settledMono = performance.now();
    const answered = deps.claimAnsweredAt;
    const latencyOf = (row: OutboxRow): number => {
      const claimedAt = answered?.get(row.id);
      const sinceClaim =
        claimedAt === undefined ? settledAt - row.updatedAt.getTime() : settledMono - claimedAt;
      return Math.max(0, row.updatedAt.getTime() - row.createdAt.getTime() + sinceClaim);
    };
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
        settled.push({ row, outcome, destination, settledAt, latencyMs: latencyOf(row) });
      }
    }
    if (answered !== undefined) for (const row of rows) answered.delete(row.id);
    try {
      deps.onSettled?.(settled);
    } catch {
      // An observer must not fail the drain.
    }
  };

  /**
   * One line per retried row the store settled: WARN `outbox row dead` when the store turned the retry into dead
   * (the attempt was the row's last), else DEBUG `outbox row retried`. Only the store knows which (it counts the
   * attempt against the row's max_attempts), so this reads its report. The error is the publisher's text (status
   * and a masked excerpt of the answer); payloads and header values are never logged.
   */
  const logRetries = (
    rows: readonly OutboxRow[],
    verdicts: ReadonlyMap<RowId, Verdict>,
    report: SettleReport,
  ) => {
    const byId = new Map(rows.map((row) => [row.id, row]));
    for (const item of report.settled) {
      const row = byId.get(item.id);
      const verdict = verdicts.get(item.id);
      if (row === undefined || verdict?.kind !== 'retry') continue;
      const attempt = { attempt: row.attempt + 1, maxAttempts: row.maxAttempts };
      if (item.state === 'Dead') {
        logDead(row, {
          destination: verdict.destination,
          ...attempt,
          reason: 'no attempt left',
          error: verdict.error,
        });
      } else {
        logger.debug('outbox row retried', {
          id: row.id,
          destination: verdict.destination,
          ...attempt,
          delayMs: verdict.delayMs,
          error: verdict.error,
        });
      }
    }
  };

  /**
   * Per destination, what the store settled of this settle: rows sent, and failed deliveries (retry verdicts, the
   * ones the store turned into dead included) with the last error; for {@link DestinationHealth}.
   */
  const recordHealth = (
    verdicts: ReadonlyMap<RowId, Verdict>,
    sentReport: SettleReport | undefined,
    retryReport: SettleReport | undefined,
  ) => {
    const byDestination = new Map<string, { failures: number; lastError?: string; sent: number }>();
    const entry = (destination: string) => {
      let found = byDestination.get(destination);
      if (found === undefined) {
        found = { failures: 0, sent: 0 };
        byDestination.set(destination, found);
      }
      return found;
    };
    for (const item of sentReport?.settled ?? []) {
      const verdict = verdicts.get(item.id);
      if (verdict?.kind === 'sent') entry(verdict.destination).sent++;
    }
    for (const item of retryReport?.settled ?? []) {
      const verdict = verdicts.get(item.id);
      if (verdict?.kind !== 'retry') continue;
      const found = entry(verdict.destination);
      found.failures++;
      found.lastError = verdict.error;
    }
    if (byDestination.size > 0) health.record(byDestination);
  };

  return {
    flushLogs: () => deadLines.flush(),
    async settle(rows, verdicts, counts, retryUntil) {
      const sent: OutboxSentItem[] = [];
      const retry: OutboxRetryItem[] = [];
      const dead: OutboxDeadItem[] = [];
      const release: OutboxReleaseItem[] = [];
      for (const row of rows) {
        const verdict = verdicts.get(row.id);
        const claim = { id: row.id, claimToken: row.claimToken as string };
        if (verdict === undefined) release.push(claim);
        else if (verdict.kind === 'release') {
          release.push(verdict.delayMs === undefined ? claim : { ...claim, delayMs: verdict.delayMs });
        } else if (verdict.kind === 'sent') sent.push({ ...claim, destination: verdict.destination });
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
            ...(verdict.maxAttempts === undefined ? {} : { maxAttempts: verdict.maxAttempts }),
          });
          logDead(row, {
            destination: verdict.destination,
            attempt: verdict.attempted ? row.attempt + 1 : row.attempt,
            reason: verdict.reason,
          });
        }
      }
      // Every call ends (written, or given up) before the settle does: one that failed for good must not leave the
      // others retrying after the drain returned.
      const outcomes = await Promise.allSettled([
        sent.length > 0 ? retrying('sent', () => store.markSent(sent), retryUntil) : undefined,
        retry.length > 0 ? retrying('retry', () => store.retry(retry), retryUntil) : undefined,
        dead.length > 0 ? retrying('dead', () => store.markDead(dead), retryUntil) : undefined,
        release.length > 0 ? retrying('release', () => store.release(release), retryUntil) : undefined,
      ]);
      const failure = outcomes.find((outcome) => outcome.status === 'rejected');
      if (failure !== undefined) {
        const calls = [sent, retry, dead, release];
        let lost = 0;
        outcomes.forEach((outcome, i) => {
          if (outcome.status === 'rejected') lost += calls[i]?.length ?? 0;
        });
        const lostSent = outcomes[0]?.status === 'rejected' ? sent.length : 0;
        try {
          deps.onUnsettled?.({ rows: lost, sent: lostSent });
        } catch {
          // An observer must not change the settle's failure.
        }
        throw failure.reason;
      }
      const [sentReport, retryReport, deadReport, releaseReport] = outcomes.map((outcome) =>
        outcome.status === 'fulfilled' ? outcome.value : undefined,
      ) as [
        SettleReport | undefined,
        SettleReport | undefined,
        SettleReport | undefined,
        SettleReport | undefined,
      ];
      counts.sent += sentReport?.settled.length ?? 0;
      for (const item of retryReport?.settled ?? []) {
        if (item.state === 'Dead') counts.dead++;
        else counts.retried++;
      }
      if (retryReport !== undefined) logRetries(rows, verdicts, retryReport);
      recordHealth(verdicts, sentReport, retryReport);
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
    },
  };
}
