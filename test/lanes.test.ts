/**
 * The two test lanes of vitest.config.ts stay honest: every test file runs in one of them, no unit-lane file
 * reaches a service helper, and the unit lane's connection guard (test/no-services.ts) refuses what it should.
 */
import { existsSync, globSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { INTEGRATION_FILES, TEST_FILES } from '../vitest.config.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SKIPPED_DIRECTORIES = new Set(['node_modules', '.git', '.sst', '.queuebox', 'dist']);

function glob(patterns: readonly string[]): string[] {
  return globSync([...patterns], {
    cwd: ROOT,
    exclude: (path) => SKIPPED_DIRECTORIES.has(basename(path)),
  }).sort();
}

/** The modules whose job is reaching services or starting QueueBox processes. */
const SERVICE_HELPERS = ['test/local/support.ts', 'test/brokers/support/store.ts'];
/** Packages that reach services: @queuebox/testing finds them and holds the per-file schemas. */
const SERVICE_PACKAGES = ['testcontainers', '@queuebox/testing'];

const IMPORT = /(?:\bfrom\s*|\bimport\s*\(?\s*)['"]([^'"]+)['"]/g;

/** The imports of `file` (repository-relative) and of the test helpers it imports, transitively. */
function importClosure(file: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const pending = [file];
  for (let current = pending.pop(); current !== undefined; current = pending.pop()) {
    if (files.has(current)) continue;
    files.add(current);
    // Package sources never import test helpers: only test code is followed.
    if (/^packages\/[^/]+\/src\//.test(current)) continue;
    const path = join(ROOT, current);
    // A specifier inside a string (test/infra builds small programs in memory) names no file.
    if (!existsSync(path)) continue;
    const text = readFileSync(path, 'utf8');
    for (const [, specifier] of text.matchAll(IMPORT)) {
      if (specifier === undefined) continue;
      if (specifier.startsWith('.')) {
        pending.push(relative(ROOT, resolve(ROOT, dirname(current), specifier)));
      } else {
        packages.add(specifier);
      }
    }
  }
  return { files, packages };
}

describe('the test lanes', () => {
  const unit = glob(TEST_FILES).filter((file) => !glob(INTEGRATION_FILES).includes(file));

  it('run every test file of the repository', () => {
    // Prepare
    const everyTestFile = glob(['**/*.test.ts']);

    // Act
    const inALane = new Set(glob(TEST_FILES));

    // Assess
    expect(everyTestFile.filter((file) => !inALane.has(file))).toEqual([]);
    expect(unit.length).toBeGreaterThan(50);
    expect(glob(INTEGRATION_FILES).length).toBeGreaterThan(40);
  });

  it('keep service helpers out of the unit lane', () => {
    // Act
    const offenders = unit.flatMap((file) => {
      const { files, packages } = importClosure(file);
      const reached = [
        ...SERVICE_HELPERS.filter((helper) => files.has(helper)),
        ...SERVICE_PACKAGES.filter((name) => packages.has(name)),
      ];
      return reached.length === 0 ? [] : [`${file} → ${reached.join(', ')} (name it *.integration.test.ts)`];
    });

    // Assess
    expect(offenders).toEqual([]);
  });

  it('see a service helper behind a local helper module', () => {
    // test/brokers/support/store.ts finds PostgreSQL through @queuebox/testing.
    const { files, packages } = importClosure('test/faults/broker-outage.integration.test.ts');

    expect(files.has('test/brokers/support/store.ts')).toBe(true);
    expect(packages.has('@queuebox/testing')).toBe(true);
  });
});

interface Guard {
  readonly refused: string[];
}

describe('the unit lane connection guard', () => {
  const guard = (globalThis as Record<symbol, Guard | undefined>)[Symbol.for('queuebox.test.no-services')];

  it('refuses the local PostgreSQL and lets a connection to a server of the test itself through', async () => {
    // Prepare
    expect(guard, 'test/no-services.ts is the unit lane setup file').toBeDefined();
    const server = net.createServer((socket) => socket.end('own server'));
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    const { port } = server.address() as net.AddressInfo;

    try {
      // Act
      const own = await new Promise<string>((done, fail) => {
        let text = '';
        net
          .connect(port, '127.0.0.1')
          .on('data', (chunk) => {
            text += chunk;
          })
          .on('end', () => done(text))
          .on('error', fail);
      });
      const refused = await new Promise<Error>((done) => {
        net.connect({ host: '127.0.0.1', port: 5432 }).on('error', done).on('connect', done);
      });

      // Assess
      expect(own).toBe('own server');
      expect(refused.message).toMatch(/^unit lane: a connection to 127\.0\.0\.1:5432 was refused/);
    } finally {
      // The refusal was this test's point, not a lane violation.
      guard?.refused.splice(0);
      server.close();
    }
  });
});
