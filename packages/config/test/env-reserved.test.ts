import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  configSchema,
  ENV_PREFIX,
  isReservedEnvVar,
  loadConfig,
  overlayEnv,
  RESERVED_ENV_PREFIXES,
  RESERVED_ENV_VARS,
} from '../src/index.ts';

const ROOT = new URL('../../../', import.meta.url).pathname;

/** The tool variables the repository's own scripts, tests and benchmarks read (a sample of each family). */
const TOOL_VARIABLES = {
  QUEUEBOX_CONFIG: 'missing.yaml',
  QUEUEBOX_TEST_POSTGRES_URL: 'postgres://postgres@127.0.0.1:5432/test',
  QUEUEBOX_TEST_KAFKA_BROKERS: '127.0.0.1:9092',
  QUEUEBOX_BENCH_ROWS: '5000',
  QUEUEBOX_BENCH_LOG_LEVEL: 'debug',
  QUEUEBOX_SOAK_SCALE: '0.1',
  QUEUEBOX_KAFKA_HOME: '/tmp/kafka',
  QUEUEBOX_ELASTICMQ_HEAP: '-Xmx384m',
  QUEUEBOX_DEMO_URL: 'http://127.0.0.1:8080',
  QUEUEBOX_SKIP_SERVICES: '1',
  QUEUEBOX_DROP_PROVIDER: 'postgres',
  QUEUEBOX_FUZZ_SEED: '12345',
};

const loose = (s: string) => s.toLowerCase().replace(/[-_]/g, '');
const topLevelKeys = Object.keys(configSchema.shape);

describe('the reserved QUEUEBOX_ tool variables', () => {
  it('are ignored by the overlay, so a developer who exported one still starts QueueBox', async () => {
    // Prepare: no file in the directory, so the configuration is the defaults plus the environment.
    const cwd = await mkdtemp(join(tmpdir(), 'queuebox-env-reserved-'));
    const { QUEUEBOX_CONFIG: _, ...env } = TOOL_VARIABLES;

    try {
      // Act
      const overlay = overlayEnv({}, TOOL_VARIABLES, new Map());
      const config = await loadConfig({ cwd, env: { ...env, QUEUEBOX_OUTBOX__MAXATTEMPTS: '4' } });

      // Assess
      expect(overlay).toEqual({ value: {}, issues: [] });
      expect(config.outbox.maxAttempts).toBe(4);
      expect(config.logLevel).toBe('info');
    } finally {
      await rm(cwd, { recursive: true, force: true });
    }
  });

  it('still refuses a misspelt configuration variable, and a bare tool word used as a key', async () => {
    // Prepare
    const cwd = await mkdtemp(join(tmpdir(), 'queuebox-env-reserved-'));
    const env = {
      ...TOOL_VARIABLES,
      QUEUEBOX_CONFIG: undefined,
      QUEUEBOX_OUTBOX__MAXATEMPTS: '4',
      QUEUEBOX_DATABSE__URL: 'postgres://db/app',
      QUEUEBOX_OUTBOX_MAXATTEMPTS: '4',
      QUEUEBOX_URL: 'http://127.0.0.1:8080',
      QUEUEBOX_TEST__X: '1',
    };

    try {
      // Act
      const failure = await loadConfig({ cwd, env }).catch((error: unknown) => error);

      // Assess
      expect(failure).toBeInstanceOf(Error);
      const message = (failure as Error).message;
      for (const variable of [
        'QUEUEBOX_OUTBOX__MAXATEMPTS',
        'QUEUEBOX_DATABSE__URL',
        'QUEUEBOX_OUTBOX_MAXATTEMPTS',
        'QUEUEBOX_URL',
        'QUEUEBOX_TEST__X',
      ]) {
        expect(message).toContain(`(from ${variable})`);
      }
      for (const variable of Object.keys(TOOL_VARIABLES)) expect(message).not.toContain(`(from ${variable})`);
    } finally {
      await rm(cwd, { recursive: true, force: true });
    }
  });

  it('can never shadow a top-level configuration key', () => {
    for (const key of topLevelKeys) {
      // A variable sets `key` when its first segment equals the key ignoring case, "-" and "_" (QUEUEBOX_LOG_LEVEL).
      for (const prefix of RESERVED_ENV_PREFIXES) {
        expect(prefix.startsWith(ENV_PREFIX) && prefix.endsWith('_')).toBe(true);
        expect(loose(key).startsWith(loose(prefix.slice(ENV_PREFIX.length))), `${prefix} vs ${key}`).toBe(
          false,
        );
      }
      for (const name of RESERVED_ENV_VARS) {
        expect(loose(name.slice(ENV_PREFIX.length)), `${name} vs ${key}`).not.toBe(loose(key));
      }
      expect(isReservedEnvVar(`${ENV_PREFIX}${key.toUpperCase()}`)).toBe(false);
      expect(isReservedEnvVar(`${ENV_PREFIX}${key.toUpperCase()}__X`)).toBe(false);
    }
  });

  it('cover every QUEUEBOX_ variable the repository reads that is not a configuration key', async () => {
    // Prepare: the places the audit grepped (scripts, tests, benchmarks, CI, packages, functions, infra, docs).
    const names = new Map<string, string>();
    for (const file of await repositoryFiles()) {
      const text = await readFile(join(ROOT, file), 'utf8');
      for (const [name] of text.matchAll(/QUEUEBOX_[A-Z0-9_]+/g)) if (!names.has(name)) names.set(name, file);
    }
    // Not variables: a process.emitWarning code, a `${…}` text the config tests feed the validator, and the
    // reserved prefixes themselves as the documentation names them.
    const notVariables = new Set([
      'QUEUEBOX_SQLSERVER_RCSI_OFF',
      'QUEUEBOX_ADMIN_TOKEN_VALUE',
      ...RESERVED_ENV_PREFIXES,
    ]);

    // Act
    const stray = [...names]
      .filter(([name]) => !notVariables.has(name) && !isReservedEnvVar(name))
      .filter(([name]) => {
        const first = name.slice(ENV_PREFIX.length).split('__')[0] ?? '';
        return !topLevelKeys.some((key) => loose(key) === loose(first));
      })
      .map(([name, file]) => `${name} (${file})`);

    // Assess
    expect(names.size).toBeGreaterThan(20);
    expect(stray).toEqual([]);
  });
});

const SCANNED = ['scripts', 'test', 'bench', '.ci', 'packages', 'functions', 'infra', 'docs'];
const SCANNED_FILES = ['sst.config.ts', 'package.json', 'README.md'];
/** This package's tests, overlay and README spell wrong variables on purpose. */
const SKIPPED = ['packages/config/test/', 'packages/config/src/env-overlay.ts', 'packages/config/README.md'];

async function repositoryFiles(): Promise<string[]> {
  const files = [...SCANNED_FILES];
  for (const dir of SCANNED) {
    for (const entry of await readdir(join(ROOT, dir), { recursive: true, withFileTypes: true })) {
      if (!entry.isFile()) continue;
      const file = relative(ROOT, join(entry.parentPath, entry.name));
      if (/(^|\/)(node_modules|dist|\.sst)\//.test(file) || SKIPPED.some((s) => file.startsWith(s))) continue;
      if (/\.(ts|sh|md|json|yaml|yml)$|^\.ci\//.test(file)) files.push(file);
    }
  }
  return files;
}
