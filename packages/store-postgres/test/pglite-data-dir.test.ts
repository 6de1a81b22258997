/**
 * openPgliteStore on a data directory that is not a database: one holding other files is refused rather than made
 * into a new, empty database (the rows of a damaged one were gone without a word), and PGlite's own failure on
 * damaged files names the directory and what to do.
 */
import { mkdir, mkdtemp, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StoreError } from '@queuebox/core';
import { afterEach, describe, expect, it } from 'vitest';
import { openPgliteStore } from '../src/index.ts';

const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function aParent(): Promise<string> {
  const parent = await mkdtemp(join(tmpdir(), 'queuebox-pglite-dir-'));
  dirs.push(parent);
  return parent;
}

describe('openPgliteStore on a directory that is not a database', { timeout: 120_000 }, () => {
  it('refuses a directory that holds files but no PG_VERSION, and leaves them as they are', async () => {
    const dataDir = join(await aParent(), 'pglite');
    await mkdir(join(dataDir, 'base'), { recursive: true });
    await writeFile(join(dataDir, 'base', 'rows'), 'not a database');

    const error = await openPgliteStore({ dataDir }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).toContain(`${dataDir} holds files but no PG_VERSION`);
    // The lock was released: the next opener is refused for the same reason, not as "in use".
    const again = await openPgliteStore({ dataDir }).catch((e: unknown) => e);
    expect((again as Error).message).toContain('no PG_VERSION');
  });

  it('names the directory when PGlite cannot open its damaged files, and releases the lock', async () => {
    // Prepare: a real database directory whose control file is then emptied.
    const dataDir = join(await aParent(), 'pglite');
    const store = await openPgliteStore({ dataDir });
    await store.migrate();
    await store.close();
    await truncate(join(dataDir, 'global', 'pg_control'), 0);

    const error = await openPgliteStore({ dataDir }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).toContain(`PGlite could not open its data directory ${dataDir}`);
    expect((error as Error).message).toContain('restore the directory from a copy');
    const again = await openPgliteStore({ dataDir }).catch((e: unknown) => e);
    expect((again as Error).message).not.toContain('in use');
  });

  it('opens an empty or missing directory as a new database, and one holding only lost+found or dot files', async () => {
    const parent = await aParent();
    await mkdir(join(parent, 'empty'));
    await mkdir(join(parent, 'volume', 'lost+found'), { recursive: true });
    await writeFile(join(parent, 'volume', '.DS_Store'), '');
    for (const dataDir of [join(parent, 'empty'), join(parent, 'missing'), join(parent, 'volume')]) {
      const store = await openPgliteStore({ dataDir });
      await store.ping();
      await store.close();
    }
  });
});
