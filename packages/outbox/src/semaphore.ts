/** Limits how many tasks run at once; waiters start in arrival order. */
export interface Semaphore {
  /** Runs `task` once a slot is free. */
  run<T>(task: () => Promise<T>): Promise<T>;
  /** Tasks running now. */
  readonly active: number;
  /** Tasks waiting for a slot. */
  readonly waiting: number;
}

/** A semaphore with `limit` slots (at least 1). */
export function createSemaphore(limit: number): Semaphore {
  const slots = Math.max(1, Math.floor(limit));
  let active = 0;
  const queue: (() => void)[] = [];

  const release = () => {
    const next = queue.shift();
    if (next) next();
    else active--;
  };

  return {
    get active() {
      return active;
    },
    get waiting() {
      return queue.length;
    },
    async run(task) {
      if (active < slots) active++;
      // A released slot passes straight to the next waiter, so `active` is unchanged then.
      else await new Promise<void>((resolve) => queue.push(resolve));
      try {
        return await task();
      } finally {
        release();
      }
    },
  };
}
