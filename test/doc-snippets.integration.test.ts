/**
 * The documentation's code examples compile, and its whole-configuration YAML blocks load: see test/doc-snippets.ts
 * for what is checked and the markdown conventions (`snippet-context`, `snippet-not-compiled`, `snippet-whole-config`).
 * Integration lane: it type-checks a program of every package (about 10 s).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ConfigPath, createInMemorySecretResolver, loadConfig, parseConfigYaml } from '@queuebox/config';
import { checkServices } from '@queuebox/use-cases';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectReferences, secretStandIn } from '../infra/config.ts';
import { checkSnippets, codeBlocks, documentation, type SnippetReport } from './doc-snippets.ts';

/** Fewer TypeScript blocks compiled than this means the extraction broke, not that the docs shrank. */
const MIN_COMPILED_BLOCKS = 27;

/** Fixtures that must fail, by what must be reported about them. */
const FIXTURES = new Map<string, string>([
  [
    'fixture/broken.md',
    [
      '<!-- snippet-context',
      "import type { QueueBoxConfig } from '@queuebox/config';",
      'declare const config: QueueBoxConfig;',
      '-->',
      '',
      '```ts',
      "import { createPublishers } from '@queuebox/outbox';",
      'const publishers = createPublishers(config.destinations);',
      '```',
    ].join('\n'),
  ],
  ['fixture/unmarked.md', ['```ts', 'const config = await loadConfig();', '```'].join('\n')],
  [
    'fixture/stale.md',
    ['<!-- snippet-not-compiled: pseudo-code -->', '```typescript', 'const n: number = 1;', '```'].join('\n'),
  ],
  [
    'fixture/dangling.md',
    ['<!-- snippet-context', 'declare const x: number;', '-->', '', 'Text.'].join('\n'),
  ],
]);

describe('the TypeScript blocks of the documentation', () => {
  let report: SnippetReport;
  let fixtures: SnippetReport;

  beforeAll(() => {
    report = checkSnippets(documentation());
    fixtures = checkSnippets(FIXTURES);
  }, 120_000);

  it('compile under the repository settings', () => {
    // Act
    console.info(
      `[doc snippets] ${report.compiled} TypeScript blocks type-checked, ${report.notCompiled} marked snippet-not-compiled`,
    );

    // Assess
    // How to declare a block's context or mark it deliberately not compiled: the header of test/doc-snippets.ts.
    expect(report.failures, 'snippet conventions: test/doc-snippets.ts').toEqual([]);
    expect(report.compiled).toBeGreaterThanOrEqual(MIN_COMPILED_BLOCKS);
  });

  it('fail on a broken snippet, an unmarked non-compiling block, a stale mark and a dangling comment', () => {
    // Assess
    const of = (file: string) => fixtures.failures.filter((f) => f.startsWith(`${file}:`));
    // createPublishers' second argument (the factories) is missing: reported at the markdown line of the call.
    expect(of('fixture/broken.md')).toEqual([expect.stringMatching(/^fixture\/broken\.md:8: TS2554 /)]);
    expect(of('fixture/unmarked.md')).toEqual([
      expect.stringMatching(/^fixture\/unmarked\.md:2: TS2304 Cannot find name 'loadConfig'/),
    ]);
    expect(of('fixture/stale.md')).toEqual([
      'fixture/stale.md:2: compiles cleanly, yet is marked snippet-not-compiled (remove the mark)',
    ]);
    expect(of('fixture/dangling.md')).toEqual([
      'fixture/dangling.md:1: a snippet comment precedes no code block',
    ]);
    expect(fixtures.compiled).toBe(2);
  });
});

describe('the YAML blocks marked snippet-whole-config', () => {
  const blocks = [...documentation()].flatMap(([file, text]) =>
    codeBlocks(file, text).blocks.filter((b) => b.mark?.kind === 'whole-config'),
  );
  const folder = mkdtempSync(join(tmpdir(), 'queuebox-doc-config-'));
  afterAll(() => rmSync(folder, { recursive: true, force: true }));

  it('exist', () => {
    expect(blocks.map((b) => `${b.file}:${b.line}`).length).toBeGreaterThanOrEqual(1);
  });

  it.each(blocks.map((b) => [`${b.file}:${b.line}`, b] as const))(
    '%s loads and compiles',
    async (_name, block) => {
      // Prepare: the file, and a value of the right shape for each of its env:// and secret:// references.
      const file = join(folder, `${block.file.replace(/[^\w]+/g, '_')}_L${block.line}.yaml`);
      writeFileSync(file, block.code);
      const document = parseConfigYaml(block.code, file).value;
      const env: Record<string, string> = {};
      const secrets: Record<string, Record<string, string> | string> = {};
      for (const { path, reference } of collectReferences(document)) {
        const value = standIn(document, path);
        if (reference.kind === 'env') env[reference.name] ??= value;
        else if (reference.jsonKey === undefined) secrets[reference.name] ??= value;
        else {
          const entry = secrets[reference.name];
          const keys = typeof entry === 'object' ? entry : {};
          keys[reference.jsonKey] ??= value;
          secrets[reference.name] = keys;
        }
      }
      const resolver = createInMemorySecretResolver(
        Object.fromEntries(
          Object.entries(secrets).map(([name, v]) => [name, typeof v === 'string' ? v : JSON.stringify(v)]),
        ),
      );

      // Act: what the runtime loads, then what `queuebox config check` compiles.
      const config = await loadConfig({ file, env, cwd: folder, secrets: resolver });
      const issues = await checkServices(config);

      // Assess
      expect(issues).toEqual([]);
    },
  );
});

/**
 * A stand-in for the reference at `path`: a Standard Webhooks secret for a signing key, a database or broker URL
 * for a `url`, `user:password` for basic auth (infra's `secretStandIn`), a 32-character text otherwise.
 */
function standIn(document: unknown, path: ConfigPath): string {
  if (path.includes('signing')) return `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
  if (path[0] === 'database' && path[1] === 'url')
    return 'postgres://queuebox@database.invalid:5432/queuebox';
  const shaped = secretStandIn(document, path);
  return shaped === 'secret' ? 'stand-in-secret-0123456789abcdef' : shaped;
}
