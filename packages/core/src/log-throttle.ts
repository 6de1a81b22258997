import type { LogFields } from './ports/logger.ts';

/**
 * Lines that an outsider or an outage can repeat at any rate (a refused webhook, a 503 while the database is down, a
 * dead outbox row in a long destination outage) are written once per kind and interval, and the rest counted into
 * one line at the interval's end. Unthrottled, 100 refused requests a second made 2.9 GB of log a day locally and
 * 8.3 GB on Lambda (about $4 a day in CloudWatch Logs, where an idle install costs $2.73 a month), and a destination
 * down past the retry window one WARN per row (an outside audit). The metrics still count every one.
 */

/** Options of {@link createLogThrottle}. */
export interface LogThrottleOptions {
  /** The interval: at most one line per key in it, then one summary at its end. Default 60,000 ms. */
  readonly intervalMs?: number;
  /**
   * Most keys kept at once; past it, lines of new keys share the key `(other)`. Keys are kinds of line (a source and
   * an outcome, a destination), not values an outsider chooses; this only bounds a mistake. Default 1,000.
   */
  readonly maxKeys?: number;
  /** Most values of `listed` a summary names. Default 20. */
  readonly maxListed?: number;
}

/** A running throttle. */
export interface LogThrottle {
  /**
   * The line `write` writes, of kind `key`: written now (`write({})`) when no line of `key` was written in this
   * interval, else counted, and `write` kept as the kind's latest. At the end of an interval in which lines of a kind
   * were counted, its latest is written once more with `{ repeated, repeatedInMs }` (and `repeatedIds`: the first
   * `maxListed` values of `listed` of the counted lines, when given). A kind with nothing counted in an interval is
   * forgotten, so its next line is written at once.
   */
  line(key: string, write: (extra: LogFields) => void, listed?: string | number): void;
  /** Writes the summaries of the lines counted so far now (at shutdown), and forgets every kind. */
  flush(): void;
}

interface Kind {
  /** Lines counted since the last one written. */
  count: number;
  latest?: (extra: LogFields) => void;
  listed: (string | number)[];
}

export const LOG_THROTTLE_DEFAULTS = { intervalMs: 60_000, maxKeys: 1_000, maxListed: 20 } as const;

export function createLogThrottle(options: LogThrottleOptions = {}): LogThrottle {
  const intervalMs = Math.max(1, options.intervalMs ?? LOG_THROTTLE_DEFAULTS.intervalMs);
  const maxKeys = Math.max(1, options.maxKeys ?? LOG_THROTTLE_DEFAULTS.maxKeys);
  const maxListed = Math.max(0, options.maxListed ?? LOG_THROTTLE_DEFAULTS.maxListed);
  const kinds = new Map<string, Kind>();
  let timer: ReturnType<typeof setInterval> | undefined;

  const summarize = (kind: Kind) => {
    if (kind.count === 0 || kind.latest === undefined) return;
    const extra: Record<string, unknown> = { repeated: kind.count, repeatedInMs: intervalMs };
    if (kind.listed.length > 0) extra.repeatedIds = kind.listed;
    try {
      kind.latest(extra);
    } catch {
      // A log line must not break what logs it.
    }
  };
  /** The end of an interval: summaries of what was counted; kinds with nothing counted forgotten. */
  const tick = () => {
    for (const [key, kind] of kinds) {
      if (kind.count === 0) {
        kinds.delete(key);
        continue;
      }
      summarize(kind);
      kinds.set(key, { count: 0, listed: [] });
    }
    if (kinds.size === 0) {
      clearInterval(timer);
      timer = undefined;
    }
  };

  return {
    line(key, write, listed) {
      const name = kinds.has(key) || kinds.size < maxKeys ? key : '(other)';
      const kind = kinds.get(name);
      if (kind === undefined) {
        kinds.set(name, { count: 0, listed: [] });
        if (timer === undefined) {
          timer = setInterval(tick, intervalMs);
          // Never what keeps a process alive.
          timer.unref?.();
        }
        try {
          write({});
        } catch {
          // As in summarize().
        }
        return;
      }
      kind.count += 1;
      kind.latest = write;
      if (listed !== undefined && kind.listed.length < maxListed) kind.listed.push(listed);
    },
    flush() {
      for (const kind of kinds.values()) summarize(kind);
      kinds.clear();
      clearInterval(timer);
      timer = undefined;
    },
  };
}
