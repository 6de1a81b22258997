/**
 * Benchmark child processes: a TypeScript file run by the same Node (through tsx) with an IPC channel, so the
 * load it creates runs on its own event loop, and so it can be stopped by its pid if it outlives its welcome.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** A forked benchmark process and a way to wait for its messages. */
export interface BenchChild<M> {
  readonly process: ChildProcess;
  /** Resolves with the next message `accept` takes (messages seen earlier count), or rejects after `timeoutMs`. */
  next<T extends M>(accept: (message: M) => message is T, timeoutMs: number): Promise<T>;
  send(message: unknown): void;
  /**
   * Resolves once the process exited: waits `graceMs` for it to end by itself, then closes the IPC channel, then
   * kills it by its pid 5 s later.
   */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Forks `file` (a path relative to this folder's parent, e.g. `support/http-sink-process.ts`) with tsx loaded,
 * passing `input` as one JSON argument. `nodeOptions` go before the file (e.g. `--cpu-prof`). The child's stdout is
 * handed to `onLine` line by line when given, else it goes to this process's stdout.
 */
export function forkBenchChild<M>(
  file: string,
  input: unknown,
  nodeOptions: readonly string[] = [],
  onLine?: (line: string) => void,
): BenchChild<M> {
  const path = fileURLToPath(new URL(`../${file}`, import.meta.url));
  const child = fork(path, [JSON.stringify(input)], {
    execArgv: ['--import', 'tsx', ...nodeOptions],
    stdio: ['ignore', onLine ? 'pipe' : 'inherit', 'inherit', 'ipc'],
  });
  if (onLine && child.stdout) createInterface({ input: child.stdout }).on('line', onLine);
  const seen: M[] = [];
  const waiters = new Set<(message: M) => boolean>();
  let exitError: Error | undefined;
  child.on('message', (message) => {
    const typed = message as M;
    for (const waiter of waiters) if (waiter(typed)) return;
    seen.push(typed);
  });
  const exited = new Promise<void>((resolve) => {
    child.on('exit', (code, signal) => {
      if (code !== 0) exitError = new Error(`${file} exited with ${code ?? signal}`);
      for (const waiter of [...waiters]) waiter(undefined as M);
      resolve();
    });
  });

  return {
    process: child,
    next<T extends M>(accept: (message: M) => message is T, timeoutMs: number): Promise<T> {
      const index = seen.findIndex(accept);
      if (index >= 0) return Promise.resolve(seen.splice(index, 1)[0] as T);
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`${file}: no expected message within ${timeoutMs} ms`));
        }, timeoutMs);
        const waiter = (message: M): boolean => {
          if (message === undefined) {
            clearTimeout(timer);
            waiters.delete(waiter);
            reject(exitError ?? new Error(`${file} exited before sending the expected message`));
            return true;
          }
          if (!accept(message)) return false;
          clearTimeout(timer);
          waiters.delete(waiter);
          resolve(message);
          return true;
        };
        if (child.exitCode !== null || child.signalCode !== null) waiter(undefined as M);
        else waiters.add(waiter);
      });
    },
    send(message) {
      if (child.connected) child.send(message as object);
    },
    async stop(graceMs = 5000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      // First a chance to finish by itself (closing its connections), then the IPC channel closes, which makes a
      // benchmark child exit (see childInput), and a kill by pid as the last resort.
      const timers: NodeJS.Timeout[] = [
        setTimeout(() => {
          if (child.connected) child.disconnect();
        }, graceMs),
        setTimeout(() => {
          if (child.pid !== undefined && child.exitCode === null) process.kill(child.pid, 'SIGKILL');
        }, graceMs + 5000),
      ];
      await exited;
      for (const timer of timers) clearTimeout(timer);
    },
  };
}

/**
 * In a child: the parsed JSON argument, and an exit as soon as the parent goes away (the IPC channel closes), so no
 * benchmark process outlives the run that started it.
 */
export function childInput<T>(): T {
  process.on('disconnect', () => process.exit(0));
  const raw = process.argv[2];
  if (raw === undefined) throw new Error('A benchmark child needs its input as one JSON argument');
  return JSON.parse(raw) as T;
}

/** Sends a message to the parent (no-op when it is gone). */
export function toParent(message: unknown): void {
  if (process.connected) process.send?.(message);
}
