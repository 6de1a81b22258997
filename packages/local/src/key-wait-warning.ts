import type { Logger } from '@queuebox/core';
import { KEY_WAIT_WARNING } from '@queuebox/inbox';

/** Options of {@link createKeyWaitWarning}. */
export interface KeyWaitWarningOptions {
  readonly log: Logger;
  /** Least `keyWaitMs` of a drain that warns. Default `KEY_WAIT_WARNING.thresholdMs` (1000 ms). */
  readonly thresholdMs?: number;
  /** Least time between two warnings; the drains in between are counted, not logged. Default 60 s. */
  readonly intervalMs?: number;
  /** Milliseconds of a monotonic clock. Default `performance.now`. */
  readonly now?: () => number;
}

/**
 * The local runtime's warning about relay forwards that waited for outbox key locks other transactions held
 * (`RelayDrainReport.keyWaitMs`, see `KEY_WAIT_WARNING`): one WARN per drain that waited `thresholdMs` or more, at
 * most one per `intervalMs`, so a key an open transaction holds for minutes does not flood the log. A warning after
 * suppressed ones says how many (`suppressed`) and the longest of their waits (`suppressedLongestMs`).
 */
export function createKeyWaitWarning(
  options: KeyWaitWarningOptions,
): (report: { readonly keyWaitMs?: number }) => void {
  const thresholdMs = options.thresholdMs ?? KEY_WAIT_WARNING.thresholdMs;
  const intervalMs = options.intervalMs ?? 60_000;
  const now = options.now ?? (() => performance.now());
  let lastAt: number | undefined;
  let suppressed = 0;
  let suppressedLongestMs = 0;
  return (report) => {
    const waitedMs = report.keyWaitMs ?? 0;
    if (waitedMs < thresholdMs) return;
    const at = now();
    if (lastAt !== undefined && at - lastAt < intervalMs) {
      suppressed += 1;
      suppressedLongestMs = Math.max(suppressedLongestMs, waitedMs);
      return;
    }
    lastAt = at;
    options.log.warn(KEY_WAIT_WARNING.message, {
      waitedMs,
      hint: KEY_WAIT_WARNING.hint,
      ...(suppressed > 0 ? { suppressed, suppressedLongestMs } : {}),
    });
    suppressed = 0;
    suppressedLongestMs = 0;
  };
}
