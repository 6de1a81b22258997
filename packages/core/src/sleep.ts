/**
 * Waits `ms` milliseconds, or less when `signal` aborts (not at all when it already has). Never rejects. The wait's
 * abort listener is removed when the wait ends, either way: a loop that waits on its lifetime signal again and again
 * (an idle consumer every 250 ms, for days) leaves nothing behind on it.
 */
export function sleepUnlessAborted(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const finish = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', finish);
      resolve();
    };
    const timer = setTimeout(finish, ms);
    signal?.addEventListener('abort', finish, { once: true });
  });
}
