/**
 * One process at a time on a PGlite data directory. PGlite is PostgreSQL in this process's memory, writing its files
 * when it likes: a second process that opens the same directory works on its own copy, reads rows that are out of
 * date, and its writes are lost when the first one writes its files again (a CLI `outbox replay` against a running
 * `npm start` said "replayed" and the row never existed for the runtime). PGlite keeps no lock of its own, so the
 * store keeps one beside the directory: `<dataDir>.lock`, created exclusively, holding the owner's pid.
 */
import { readFile, unlink, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { StoreUnavailableError } from '@queuebox/core';

/** A held lock of a data directory. */
export interface DataDirLock {
  /** The lock file. */
  readonly path: string;
  /** Removes the lock file (once; later calls do nothing). */
  release(): Promise<void>;
}

interface LockOwner {
  readonly pid: number;
  readonly host: string;
}

/** Whether a process with `pid` runs on this machine (EPERM: it runs, as another user). */
function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: unknown }).code === 'EPERM';
  }
}

async function readOwner(path: string): Promise<LockOwner | undefined> {
  try {
    const owner = JSON.parse(await readFile(path, 'utf8')) as Partial<LockOwner>;
    if (!Number.isInteger(owner.pid) || typeof owner.host !== 'string') return undefined;
    return { pid: owner.pid as number, host: owner.host };
  } catch {
    return undefined;
  }
}

function inUse(dataDir: string, path: string, owner: LockOwner | undefined): StoreUnavailableError {
  const who =
    owner === undefined
      ? 'another process'
      : owner.pid === process.pid && owner.host === hostname()
        ? `this process (pid ${owner.pid}), through another store`
        : `process ${owner.pid}${owner.host === hostname() ? '' : ` on ${owner.host}`}`;
  return new StoreUnavailableError(
    `The PGlite data directory ${dataDir} is in use by ${who}. PGlite is one process's database: stop that process ` +
      `first, or use the admin API (/admin, with admin.token) of the QueueBox that runs on it. If no such process ` +
      `runs, delete ${path}.`,
    { context: { dataDir, lockFile: path, ...(owner ? { pid: owner.pid } : {}) } },
  );
}

/**
 * Takes the lock of `dataDir` (an absolute or relative directory path) or throws `StoreUnavailableError` naming the
 * process that holds it. A lock left by a process that no longer runs on this machine is taken over; one whose file
 * cannot be read (being written this instant) counts as held.
 */
export async function lockDataDir(dataDir: string): Promise<DataDirLock> {
  const path = `${dataDir.replace(/[/\\]+$/, '')}.lock`;
  const me: LockOwner = { pid: process.pid, host: hostname() };
  for (let attempt = 1; ; attempt++) {
    try {
      await writeFile(path, `${JSON.stringify(me)}\n`, { flag: 'wx' });
      break;
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'EEXIST') throw error;
      const owner = await readOwner(path);
      const stale =
        owner !== undefined && owner.host === me.host && owner.pid !== me.pid && !isRunning(owner.pid);
      if (!stale || attempt > 1) throw inUse(dataDir, path, owner);
      await unlink(path).catch(() => undefined);
    }
  }
  let released = false;
  return {
    path,
    async release() {
      if (released) return;
      released = true;
      const owner = await readOwner(path);
      if (owner?.pid === me.pid && owner.host === me.host) await unlink(path).catch(() => undefined);
    },
  };
}
