/**
 * The build check of issues 6 and 7: a function bundled as the deployment bundles it holds both store providers
 * and our replacements of `@azure/identity`, `iconv-lite` and node:http imports instead of the originals, and the
 * check notices when a provider leaves the bundle (its dynamic import rewritten to an empty module) or an original
 * comes back (the deployment's plugins left out). tedious, bundled that way, converts text through our iconv-lite.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import {
  checkBundles,
  deploymentBuildOptions,
  deploymentPlugins,
  functionEntries,
  instrumentBundle,
  replacementsIn,
} from '../../scripts/check-bundles.ts';
import { REPO_ROOT } from '../local/support.ts';

describe('scripts/check-bundles.ts', () => {
  it('finds one entry point per function file, and the shared shell is none of them', () => {
    const entries = functionEntries(REPO_ROOT);

    expect(entries).toEqual(expect.arrayContaining(['functions/inbox-http.ts', 'functions/outbox-tick.ts']));
    expect(entries.some((entry) => entry.includes('shell'))).toBe(false);
  });

  it('sees both providers in the inbox-http bundle', async () => {
    const [report] = await checkBundles({ root: REPO_ROOT, functions: ['functions/inbox-http.ts'] });

    expect(report).toMatchObject({
      touchesDatabase: true,
      providers: { postgres: true, sqlserver: true },
      missing: [],
    });
  });

  it.each(['sqlserver', 'postgres'] as const)(
    'reports %s missing when its import is dropped',
    async (provider) => {
      const [report] = await checkBundles({
        root: REPO_ROOT,
        functions: ['functions/relay-tick.ts'],
        dropProvider: provider,
      });

      expect(report?.touchesDatabase).toBe(true);
      expect(report?.missing).toEqual([provider]);
    },
  );

  it('replaces @azure/identity and iconv-lite with our modules in the inbox-http bundle, which imports no node:http', async () => {
    // Act
    const [report] = await checkBundles({ root: REPO_ROOT, functions: ['functions/inbox-http.ts'] });

    // Assess: the HTTP publisher (and with it any node:http import) stays out of functions that never deliver.
    expect(report?.replaced).toEqual(['@azure/identity', 'iconv-lite']);
    expect(report?.unreplaced).toEqual([]);
  });

  it.each(['functions/inbox-http.ts', 'functions/relay-tick.ts', 'functions/admin-http.ts'])(
    'leaves the HTTP publisher and its client out of %s, which never delivers',
    async (entry) => {
      // Act
      const options = deploymentBuildOptions(REPO_ROOT, [entry], await deploymentPlugins(REPO_ROOT));
      const { metafile } = await build(options);

      // Assess: what the output holds (esbuild lists modules it read but shook out with 0 bytes).
      const [output] = Object.values(metafile.outputs);
      const inputs = Object.entries(output?.inputs ?? {})
        .filter(([, input]) => input.bytesInOutput > 0)
        .map(([path]) => path);
      expect(inputs.length).toBeGreaterThan(0);
      expect(inputs.filter((path) => path.includes('node_modules/undici/'))).toEqual([]);
      expect(inputs.filter((path) => path.endsWith('http-publisher.ts'))).toEqual([]);
    },
  );

  it('reports the replaced packages back in the bundle without the deployment plugins', async () => {
    // Act
    const [report] = await checkBundles({
      root: REPO_ROOT,
      functions: ['functions/migrate.ts'],
      plugins: false,
    });

    // Assess
    expect(report?.replaced).toEqual([]);
    expect(report?.unreplaced).toEqual(['@azure/identity', '@azure/msal-node', 'iconv-lite']);
    expect(report?.missing).toEqual([]);
  });

  it('replaces an import of node:http with our module, and reports it back without the deployment plugins', async () => {
    // Prepare: an entry importing node:http the way @middy/util does.
    const dir = join(REPO_ROOT, '.queuebox', `test-bundle-${randomBytes(4).toString('hex')}`);
    await mkdir(dir, { recursive: true });
    try {
      await writeFile(
        join(dir, 'entry.mjs'),
        "import { STATUS_CODES } from 'node:http';\nexport const ok = STATUS_CODES[200];\n",
      );
      const entry = relative(REPO_ROOT, join(dir, 'entry.mjs'));

      // Act
      const [withPlugins] = await checkBundles({ root: REPO_ROOT, functions: [entry] });
      const [without] = await checkBundles({ root: REPO_ROOT, functions: [entry], plugins: false });

      // Assess
      expect(withPlugins?.replaced).toEqual(['node:http']);
      expect(withPlugins?.unreplaced).toEqual([]);
      expect(without?.unreplaced).toEqual(['import of node:http']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('what a bundle loads at import (an outside audit of the cold starts)', () => {
  it('imports no AWS SDK client at its top, and evaluates neither JSONata nor a broker driver it does not consume', async () => {
    // Act
    const reports = await checkBundles({ root: REPO_ROOT, init: true });

    // Assess
    expect(reports.map((r) => [r.entry, r.topLevelImports, r.lazyEvaluated])).toEqual(
      reports.map((r) => [r.entry, [], []]),
    );
    const evaluated = (entry: string) =>
      Object.keys(reports.find((r) => r.entry === entry)?.evaluatedAtImport ?? {});
    const drivers = (names: string[]) =>
      names.filter((name) => /^(kafkajs|amqplib|jsonata|@nats-io\/)/.test(name));
    expect(drivers(evaluated('functions/outbox-tick.ts'))).toEqual([]);
    // The instrumentation sees evaluation: the consumers evaluate their own driver.
    expect(evaluated('functions/kafka-source.ts')).toContain('kafkajs');
    expect(evaluated('functions/amqp-source.ts')).toContain('amqplib');
    expect(evaluated('functions/nats-source-tick.ts')).toContain('@nats-io/nats-core');
  }, 120_000);

  it('reports a top-level import of an AWS SDK client, and JSONata or a broker driver evaluated at import', async () => {
    // Prepare: what the bundles did before: Powertools' SecretsProvider imported the client statically (esbuild
    // hoists it), the outbox imported jsonata, outbox-tick the broker packages.
    const dir = join(REPO_ROOT, '.queuebox', `test-bundle-${randomBytes(4).toString('hex')}`);
    await mkdir(dir, { recursive: true });
    try {
      await writeFile(
        join(dir, 'entry.mjs'),
        `import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import jsonata from 'jsonata';
import kafkajs from 'kafkajs';
export const handler = () => [SecretsManagerClient, jsonata, kafkajs];
`,
      );
      const entry = relative(REPO_ROOT, join(dir, 'entry.mjs'));

      // Act
      const [report] = await checkBundles({ root: REPO_ROOT, functions: [entry], init: true });

      // Assess
      expect(report?.topLevelImports).toEqual(['@aws-sdk/client-secrets-manager']);
      expect(report?.lazyEvaluated).toEqual(['jsonata', 'kafkajs']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('evaluates jsonata on the first outbox JSONata transform, and a broker driver when its destination type is prepared', async () => {
    // Prepare: the outbox's transform compiler and outbox-tick's lazy publishers, bundled as the deployment does.
    const dir = join(REPO_ROOT, '.queuebox', `test-bundle-${randomBytes(4).toString('hex')}`);
    await mkdir(dir, { recursive: true });
    try {
      const shell = relative(dir, join(REPO_ROOT, 'functions', 'lambda-shell', 'lazy-publishers.ts'));
      await writeFile(
        join(dir, 'entry.mjs'),
        `import { ConfigError } from '@queuebox/core';
import { createTransformCompiler } from '@queuebox/outbox';
import { lazyPublisherFactories } from '${shell.replace(/\\/g, '/')}';
const evaluated = (name) => [...globalThis.__queueboxEvaluated].some((path) => path.includes('node_modules/' + name + '/'));
export async function run() {
  const seen = { atImport: { jsonata: evaluated('jsonata'), kafkajs: evaluated('kafkajs') } };
  const compiler = createTransformCompiler();
  seen.functionIssue = compiler.check({ function: 'missing' })?.path;
  seen.afterFunctionCheck = evaluated('jsonata');
  const transform = compiler.compile({ jsonata: '{ "id": order.id, "topic": $topic }' });
  seen.afterCompile = evaluated('jsonata');
  seen.outcome = await transform.apply({ payload: { order: { id: 7 } }, headers: {}, topic: 't', key: null, id: '1', messageId: 'm-1' });
  try { compiler.compile({ jsonata: '{ "a": ' }, 'routes[0].transform'); seen.syntax = 'compiled'; }
  catch (error) { seen.syntax = error instanceof ConfigError ? error.issues.map((i) => i.path) : String(error); }
  const lazy = lazyPublisherFactories({ kafka: async () => (await import('@queuebox/kafka')).kafkaPublisherFactory });
  await lazy.prepare({ a: { type: 'http' } });
  seen.afterHttpPrepare = evaluated('kafkajs');
  await lazy.prepare({ a: { type: 'kafka' } });
  seen.afterKafkaPrepare = evaluated('kafkajs');
  try { lazy.factories.kafka('a', { type: 'kafka', brokers: ['no port'] }); seen.fields = 'accepted'; }
  catch (error) { seen.fields = error instanceof ConfigError ? error.issues.map((i) => i.path) : String(error); }
  return seen;
}
`,
      );
      const entry = relative(REPO_ROOT, join(dir, 'entry.mjs'));
      const options = deploymentBuildOptions(REPO_ROOT, [entry], await deploymentPlugins(REPO_ROOT));
      const result = await build({ ...options, minify: false, outbase: dir, outdir: join(dir, 'out') });
      const [output] = result.outputFiles ?? [];
      if (output === undefined) throw new Error('esbuild wrote no bundle');
      await mkdir(join(dir, 'out'), { recursive: true });
      await writeFile(output.path, instrumentBundle(output.text));

      // Act
      const bundle = (await import(pathToFileURL(output.path).href)) as { run(): Promise<unknown> };
      const seen = await bundle.run();

      // Assess
      expect(seen).toEqual({
        atImport: { jsonata: false, kafkajs: false },
        functionIssue: 'transform.function',
        afterFunctionCheck: false,
        afterCompile: true,
        outcome: { ok: true, payload: { id: 7, topic: 't' }, headers: {} },
        syntax: ['routes[0].transform.jsonata'],
        afterHttpPrepare: false,
        afterKafkaPrepare: true,
        fields: ['destinations.a.brokers'],
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('tedious in a deployment bundle', () => {
  it('encodes a VarChar parameter and decodes a VARCHAR value through our iconv-lite', async () => {
    // Prepare: an entry that calls tedious the way a VarChar parameter and a VARCHAR column do.
    const dir = join(REPO_ROOT, '.queuebox', `test-bundle-${randomBytes(4).toString('hex')}`);
    await mkdir(dir, { recursive: true });
    try {
      await writeFile(
        join(dir, 'entry.mjs'),
        `import VarChar from 'tedious/lib/data-types/varchar.js';
import { readValue } from 'tedious/lib/value-parser.js';
export function roundTrip(text, codepage) {
  const bytes = VarChar.validate(text, { codepage });
  const column = Buffer.alloc(2 + bytes.length);
  column.writeUInt16LE(bytes.length, 0);
  bytes.copy(column, 2);
  const read = readValue(column, 0, { type: { name: 'VarChar' }, collation: { codepage } }, {});
  return { bytes: bytes.toString('hex'), text: read.value };
}
`,
      );
      const entry = relative(REPO_ROOT, join(dir, 'entry.mjs'));
      const options = deploymentBuildOptions(REPO_ROOT, [entry], await deploymentPlugins(REPO_ROOT));

      // Act
      const result = await build({ ...options, outbase: dir, outdir: join(dir, 'out'), write: true });
      const bundle = (await import(pathToFileURL(join(dir, 'out', 'entry.mjs')).href)) as {
        roundTrip(text: string, codepage: string): { bytes: string; text: string };
      };

      // Assess
      expect(replacementsIn(Object.keys(result.metafile.inputs))).toEqual({
        replaced: ['iconv-lite'],
        unreplaced: [],
      });
      expect(bundle.roundTrip('Café 10 €', 'CP1252')).toEqual({
        bytes: '436166e92031302080',
        text: 'Café 10 €',
      });
      expect(bundle.roundTrip('Привет', 'CP1251')).toEqual({ bytes: 'cff0e8e2e5f2', text: 'Привет' });
      expect(bundle.roundTrip('日本 ok', 'utf-8')).toEqual({ bytes: 'e697a5e69cac206f6b', text: '日本 ok' });
      expect(() => bundle.roundTrip('日本', 'CP932')).toThrow(
        /Cannot encode a Char\/VarChar\/Text parameter as code page CP932/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
