/** lockDataDir: one process at a time on a PGlite data directory. */
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { StoreUnavailableError } from '@queuebox/core';
import { afterEach, describe, expect, it } from 'vitest';
import { lockDataDir } from '../src/pglite-lock.ts';

const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function aDataDir(): Promise<string> {
  const parent = await mkdtemp(join(tmpdir(), 'queuebox-lock-'));
  dirs.push(parent);
  return join(parent, 'pglite');
}

/** The pid of a process that ran and has ended. */
function aDeadPid(): number {
  const { pid, status } = spawnSync(process.execPath, ['-e', '']);
  expect(status).toBe(0);
  return pid as number;
}

describe('lockDataDir', () => {
  it('holds the directory until released; a second taker is refused with the holder named', async () => {
    const dataDir = await aDataDir();
    const lock = await lockDataDir(dataDir);

    const second = await lockDataDir(dataDir).catch((error: unknown) => error);

    expect(lock.path).toBe(`${dataDir}.lock`);
    expect(JSON.parse(await readFile(lock.path, 'utf8'))).toEqual({ pid: process.pid, host: hostname() });
    expect(second).toBeInstanceOf(StoreUnavailableError);
    expect((second as Error).message).toContain(`${dataDir} is in use by this process (pid ${process.pid})`);
    expect((second as Error).message).toContain(`delete ${dataDir}.lock`);
    await lock.release();
    await lock.release();
    const again = await lockDataDir(`${dataDir}/`);
    expect(again.path).toBe(`${dataDir}.lock`);
    await again.release();
  });

  it('takes over a lock left by a process that no longer runs', async () => {
    const dataDir = await aDataDir();
    await writeFile(`${dataDir}.lock`, JSON.stringify({ pid: aDeadPid(), host: hostname() }));

    const lock = await lockDataDir(dataDir);

    expect(JSON.parse(await readFile(lock.path, 'utf8')).pid).toBe(process.pid);
    await lock.release();
  });

  it('refuses a lock of a running process, of another host, or that it cannot read', async () => {
    const dataDir = await aDataDir();
    const held = [
      { pid: process.ppid, host: hostname() },
      { pid: aDeadPid(), host: 'another-host' },
      'not json',
    ];
    for (const owner of held) {
      await writeFile(`${dataDir}.lock`, typeof owner === 'string' ? owner : JSON.stringify(owner));

      const refused = await lockDataDir(dataDir).catch((error: unknown) => error);

      expect(refused, JSON.stringify(owner)).toBeInstanceOf(StoreUnavailableError);
    }
    const message = String(await lockDataDir(dataDir).catch((error: unknown) => error));
    expect(message).toContain('in use by another process');
  });

  it('does not remove a lock that another process took after this one was released', async () => {
    const dataDir = await aDataDir();
    const lock = await lockDataDir(dataDir);
    await writeFile(lock.path, JSON.stringify({ pid: process.ppid, host: hostname() }));

    await lock.release();

    expect(JSON.parse(await readFile(`${dataDir}.lock`, 'utf8')).pid).toBe(process.ppid);
  });
});
