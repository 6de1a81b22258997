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

/** Limits the bytes held at once: a task of `bytes` waits until they fit, and one task always runs. */
export interface ByteBudget {
  /** Runs `task` once `bytes` fit in the budget beside the tasks running (or no task runs). */
  run<T>(bytes: number, task: () => Promise<T>): Promise<T>;
  /** Bytes held by the tasks running now. */
  readonly held: number;
  /** Tasks running now. */
  readonly active: number;
}

/** A byte budget of `limit` bytes; waiters start in arrival order (a large one is not overtaken by small ones). */
export function createByteBudget(limit: number): ByteBudget {
  const budget = Math.max(1, limit);
  let held = 0;
  let active = 0;
  const queue: { readonly bytes: number; readonly start: () => void }[] = [];
  const fits = (bytes: number) => active === 0 || held + bytes <= budget;
  const pump = () => {
    while (queue.length > 0 && fits((queue[0] as { bytes: number }).bytes)) {
      const next = queue.shift() as { bytes: number; start: () => void };
      held += next.bytes;
      active++;
      next.start();
    }
  };
  return {
    get held() {
      return held;
    },
    get active() {
      return active;
    },
    async run(bytes, task) {
      const size = Math.max(0, bytes);
      if (queue.length === 0 && fits(size)) {
        held += size;
        active++;
      } else {
        await new Promise<void>((resolve) => queue.push({ bytes: size, start: resolve }));
      }
      try {
        return await task();
      } finally {
        held -= size;
        active--;
        pump();
      }
    },
  };
}
