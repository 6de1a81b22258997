/** lockDataDir: one process at a time on a PGlite data directory. */
import { spawn, spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { dirname, join, relative as relativePath } from 'node:path';
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
    expect(JSON.parse(await readFile(lock.path, 'utf8'))).toMatchObject({
      pid: process.pid,
      host: hostname(),
    });
    expect(second).toBeInstanceOf(StoreUnavailableError);
    expect((second as Error).message).toContain(`${dataDir} is in use by this process (pid ${process.pid})`);
    expect((second as Error).message).toContain(`delete ${dataDir}.lock`);
    await lock.release();
    await lock.release();
    const again = await lockDataDir(`${dataDir}/`);
    expect(again.path).toBe(`${dataDir}.lock`);
    await again.release();
  });

  it('finds the lock whatever the directory is called: through a symbolic link, or a relative path', async () => {
    const dataDir = await aDataDir();
    await mkdir(dataDir);
    const alias = join(dirname(dataDir), 'alias');
    await symlink(dataDir, alias);
    const lock = await lockDataDir(dataDir);

    const throughLink = await lockDataDir(alias).catch((error: unknown) => error);
    const relative = await lockDataDir(relativePath(process.cwd(), dataDir)).catch((error: unknown) => error);

    expect(throughLink).toBeInstanceOf(StoreUnavailableError);
    expect((throughLink as Error).message).toContain(`is in use by this process (pid ${process.pid})`);
    expect(relative).toBeInstanceOf(StoreUnavailableError);
    await lock.release();
  });

  it('also takes the lock named by the path as written, which an earlier version takes alone', async () => {
    // Prepare: the directory reached through a symbolic link, locked the way the version before took it.
    const dataDir = await aDataDir();
    await mkdir(dataDir);
    const alias = join(dirname(dataDir), 'alias');
    await symlink(dataDir, alias);
    await writeFile(`${alias}.lock`, JSON.stringify({ pid: process.ppid, host: hostname() }));

    // Act
    const taken = await lockDataDir(alias).catch((error: unknown) => error);

    // Assess: refused while that process runs; no lock of the real path left behind by the refused attempt.
    expect(taken).toBeInstanceOf(StoreUnavailableError);
    expect((taken as Error).message).toContain(`delete ${alias}.lock`);
    const real = await lockDataDir(dataDir);
    await real.release();
  });

  it('takes over a lock left by a process that no longer runs', async () => {
    const dataDir = await aDataDir();
    await writeFile(`${dataDir}.lock`, JSON.stringify({ pid: aDeadPid(), host: hostname() }));

    const lock = await lockDataDir(dataDir);

    expect(JSON.parse(await readFile(lock.path, 'utf8')).pid).toBe(process.pid);
    await lock.release();
  });

  it("takes over a lock of this pid from an earlier life (a container's PID 1), and unreadable debris", async () => {
    const dataDir = await aDataDir();
    await writeFile(
      `${dataDir}.lock`,
      JSON.stringify({ pid: process.pid, host: hostname(), nonce: 'earlier' }),
    );

    const reused = await lockDataDir(dataDir);
    await reused.release();
    await writeFile(`${dataDir}.lock`, '');
    const young = await lockDataDir(dataDir).catch((error: unknown) => error);
    const past = new Date(Date.now() - 60_000);
    await utimes(`${dataDir}.lock`, past, past);
    const debris = await lockDataDir(dataDir);

    expect(young).toBeInstanceOf(StoreUnavailableError);
    expect(JSON.parse(await readFile(debris.path, 'utf8')).pid).toBe(process.pid);
    await debris.release();
  });

  it('lets exactly one of several processes take over a stale lock at once', async () => {
    const dataDir = await aDataDir();
    await writeFile(`${dataDir}.lock`, JSON.stringify({ pid: aDeadPid(), host: hostname() }));
    // The processes start at different moments; they all try at the same instant.
    const goAt = Date.now() + 2500;
    const script = `
      const { lockDataDir } = await import(${JSON.stringify(new URL('../src/pglite-lock.ts', import.meta.url).href)});
      while (Date.now() < ${goAt}) await new Promise((resolve) => setTimeout(resolve, 1));
      try {
        const lock = await lockDataDir(${JSON.stringify(dataDir)});
        console.log('held');
        await new Promise((resolve) => setTimeout(resolve, 3000));
        await lock.release();
      } catch (error) {
        console.log(error.name === 'StoreUnavailableError' ? 'refused' : 'error ' + error.message);
      }`;
    const run = () =>
      new Promise<string>((resolve) => {
        const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        let out = '';
        child.stdout.setEncoding('utf8').on('data', (text: string) => {
          out += text;
        });
        child.on('close', () => resolve(out.trim()));
      });

    const outcomes = await Promise.all([run(), run(), run(), run()]);

    expect(outcomes.sort()).toEqual(['held', 'refused', 'refused', 'refused']);
  }, 30_000);

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
