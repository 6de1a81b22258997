/**
 * Waiting, free ports, a runtime's /health, and killing a runtime for real (the process and every descendant).
 * Nothing here imports vitest, so bench/soak.ts can use it too.
 */
import { spawnSync } from 'node:child_process';
import { type AddressInfo, createServer as createTcpServer } from 'node:net';
import type { QueueBoxProcess } from '../../local/support.ts';

/** Polls `probe` every `everyMs` until it answers true; throws after `timeoutMs` with `what` and `describe()`. */
export async function waitUntil(
  probe: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs: number,
  describe: () => string = () => '',
  everyMs = 100,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (await probe()) return;
    if (Date.now() > until) throw new Error(`${what} did not happen within ${timeoutMs} ms. ${describe()}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** The status of `GET <base>/health`, or 0 when the runtime does not answer at all. */
export async function healthStatus(base: string): Promise<number> {
  try {
    return (await fetch(`${base}/health`)).status;
  } catch {
    return 0;
  }
}

/** A free TCP port on 127.0.0.1 (closed again before it is returned). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createTcpServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

// ------------------------------------------------------------------------------------------------------------
// Killing a runtime for real

/** Ids of every process below `pid` (children, grandchildren, …), deepest last. */
export function descendantPids(pid: number): number[] {
  const listing = spawnSync('ps', ['-eo', 'pid=,ppid='], { encoding: 'utf8' });
  const childrenOf = new Map<number, number[]>();
  for (const line of listing.stdout.split('\n')) {
    const [child, parent] = line.trim().split(/\s+/).map(Number);
    if (child === undefined || parent === undefined || Number.isNaN(child)) continue;
    childrenOf.set(parent, [...(childrenOf.get(parent) ?? []), child]);
  }
  const found: number[] = [];
  const queue = [pid];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    for (const child of childrenOf.get(next) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

/**
 * kill -9 of a runtime started by `startQueueBox` (the runtime's own `node` process, as `npm start` runs it). Any
 * process it started goes first: SIGKILL cannot be relayed, so killing only the parent would leave them running.
 * Resolves once the runtime exited.
 */
export async function killHard(queuebox: QueueBoxProcess): Promise<void> {
  const pid = queuebox.child.pid;
  if (pid === undefined) return;
  for (const child of descendantPids(pid).reverse()) {
    try {
      process.kill(child, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  if (queuebox.child.exitCode === null && queuebox.child.signalCode === null) queuebox.child.kill('SIGKILL');
  await queuebox.exited;
}

/** Kills (hard) every runtime in `processes` that still runs, with any process it started. */
export async function killAll(processes: Iterable<QueueBoxProcess>): Promise<void> {
  for (const queuebox of processes) await killHard(queuebox);
}
