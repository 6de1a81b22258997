/** Counts wake-up callbacks and lets a test wait for the next ones. */
export interface WakeCounter {
  readonly outbox: number;
  readonly inbox: number;
  readonly onOutbox: () => void;
  readonly onInbox: () => void;
  /** Resolves once `table` was woken at least `count` times in all; rejects after `timeoutMs` (default 10 s). */
  waitFor(table: 'outbox' | 'inbox', count: number, timeoutMs?: number): Promise<void>;
  /** Sets both counts back to 0. */
  reset(): void;
}

/** A fresh counter. */
export function aWakeCounter(): WakeCounter {
  const counts = { outbox: 0, inbox: 0 };
  const waiters = new Set<() => void>();
  const bump = (table: 'outbox' | 'inbox') => {
    counts[table] += 1;
    for (const check of [...waiters]) check();
  };
  return {
    get outbox() {
      return counts.outbox;
    },
    get inbox() {
      return counts.inbox;
    },
    onOutbox: () => bump('outbox'),
    onInbox: () => bump('inbox'),
    waitFor(table, count, timeoutMs = 10_000) {
      return new Promise<void>((resolve, reject) => {
        const check = () => {
          if (counts[table] < count) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`${table} woken ${counts[table]} times, not ${count}, within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    reset() {
      counts.outbox = 0;
      counts.inbox = 0;
    },
  };
}
