/**
 * One process at a time on a PGlite data directory. PGlite is PostgreSQL in this process's memory, writing its files
 * when it likes: a second process that opens the same directory works on its own copy, reads rows that are out of
 * date, and its writes are lost when the first one writes its files again (a CLI `outbox replay` against a running
 * `npm start` said "replayed" and the row never existed for the runtime). PGlite keeps no lock of its own, so the
 * store keeps one beside the directory: `<dataDir>.lock` (the directory's real path), created exclusively, holding
 * the owner's pid and host.
 */
import { randomUUID } from 'node:crypto';
import { readFile, realpath, stat, unlink, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
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
  /** One per process: a lock of this pid and host with another nonce was left by an earlier process (pid reuse). */
  readonly nonce?: string;
}

/**
 * `dir` as the file system resolves it: absolute, symbolic links followed (for a directory not created yet, its
 * parent's), so every name of one directory gives one lock.
 */
export async function canonicalPath(dir: string): Promise<string> {
  const absolute = resolve(dir.replace(/[/\\]+$/, '') || dir);
  try {
    return await realpath(absolute);
  } catch {
    try {
      return join(await realpath(dirname(absolute)), basename(absolute));
    } catch {
      return absolute;
    }
  }
}

/** This process's nonce, and the lock files it holds now. */
const NONCE = randomUUID();
const held = new Set<string>();

/** A lock file this young that cannot be read may be being written this instant; an older one is debris. */
const UNREADABLE_GRACE_MS = 5000;

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
    return {
      pid: owner.pid as number,
      host: owner.host,
      ...(typeof owner.nonce === 'string' ? { nonce: owner.nonce } : {}),
    };
  } catch {
    return undefined;
  }
}

const sameOwner = (a: LockOwner | undefined, b: LockOwner | undefined): boolean =>
  a !== undefined && b !== undefined && a.pid === b.pid && a.host === b.host && a.nonce === b.nonce;

/** Milliseconds since `path` was last written; 0 when it is gone. */
async function ageOf(path: string): Promise<number> {
  return stat(path).then(
    (s) => Date.now() - s.mtimeMs,
    () => 0,
  );
}

/**
 * Whether the lock at `path`, owned by `owner` as read, was left by a process that is gone: one of this host that
 * no longer runs; this process's pid in an earlier life (a container's PID 1 after a restart: another nonce, and
 * not held here); or a file that cannot be read and is older than {@link UNREADABLE_GRACE_MS} (a crash between
 * create and write).
 */
async function isStale(path: string, owner: LockOwner | undefined, me: LockOwner): Promise<boolean> {
  if (owner === undefined) return (await ageOf(path)) > UNREADABLE_GRACE_MS;
  if (owner.host !== me.host) return false;
  if (owner.pid === me.pid) return owner.nonce !== me.nonce && !held.has(path);
  return !isRunning(owner.pid);
}

/**
 * Removes the stale lock at `path` if it is still the one read as `stale`. One taker at a time, through an
 * exclusive `<path>.takeover` file: without it, a second taker that read the same stale owner could delete the
 * lock the first had just written, and both would hold it. A takeover file left by a crash is removed once it is
 * older than {@link UNREADABLE_GRACE_MS}.
 */
async function removeStale(path: string, stale: LockOwner | undefined, me: LockOwner): Promise<void> {
  const guard = `${path}.takeover`;
  try {
    await writeFile(guard, `${JSON.stringify(me)}\n`, { flag: 'wx' });
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'EEXIST') throw error;
    if ((await ageOf(guard)) > UNREADABLE_GRACE_MS) await unlink(guard).catch(() => undefined);
    return;
  }
  try {
    const current = await readOwner(path);
    if (stale === undefined ? current === undefined : sameOwner(current, stale)) {
      await unlink(path).catch(() => undefined);
    }
  } finally {
    await unlink(guard).catch(() => undefined);
  }
}

function inUse(dataDir: string, path: string, owner: LockOwner | undefined): StoreUnavailableError {
  const who =
    owner === undefined
      ? 'another process'
      : owner.pid === process.pid && owner.host === hostname() && owner.nonce === NONCE
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
 * process that holds it. A lock left by a process that is gone (see `isStale`) is taken over, by one taker at a
 * time; a lock of a running process, of another host, or unreadable and young counts as held.
 */
export async function lockDataDir(dataDir: string): Promise<DataDirLock> {
  // One lock per directory, however it is named: the lock of its real path, so a symbolic link or a relative path
  // to the same directory finds it (it named another, and a second process got as far as PGlite's own failure);
  // and, when the path as written differs, that one too, which is all an earlier version of QueueBox takes.
  const real = `${await canonicalPath(dataDir)}.lock`;
  const written = `${dataDir.replace(/[/\\]+$/, '') || dataDir}.lock`;
  const paths = resolve(written) === real ? [real] : [written, real];
  const taken: string[] = [];
  try {
    for (const path of paths) {
      await takeLockFile(dataDir, path);
      taken.push(path);
    }
  } catch (error) {
    for (const path of taken) await releaseLockFile(path);
    throw error;
  }
  let released = false;
  return {
    path: real,
    async release() {
      if (released) return;
      released = true;
      for (const path of taken) await releaseLockFile(path);
    },
  };
}

const me: LockOwner = { pid: process.pid, host: hostname(), nonce: NONCE };

/** Creates the lock file `path` of `dataDir` for this process, taking over a stale one, or throws `inUse`. */
async function takeLockFile(dataDir: string, path: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await writeFile(path, `${JSON.stringify(me)}\n`, { flag: 'wx' });
      break;
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'EEXIST') throw error;
      const owner = await readOwner(path);
      if (attempt > 1 || !(await isStale(path, owner, me))) throw inUse(dataDir, path, owner);
      await removeStale(path, owner, me);
    }
  }
  held.add(path);
}

/** Removes the lock file `path` if this process still owns it. */
async function releaseLockFile(path: string): Promise<void> {
  held.delete(path);
  if (sameOwner(await readOwner(path), me)) await unlink(path).catch(() => undefined);
}
