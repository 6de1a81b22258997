/**
 * A YAML problem with one value (a duplicate key, an unknown `!tag`, an alias without its anchor, a bad escape) is
 * reported at its key's path with its line and column, together with every schema problem of the rest of the file;
 * it used to hide all of them and be reported at `(root)`. A syntax error that leaves the structure in doubt is
 * still reported alone.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, type ConfigIssue } from '@queuebox/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig, parseConfigYaml } from '../src/index.ts';

const REPO_FILE = new URL('../../../queuebox.yaml', import.meta.url);
const TAG = 'YAML: Unknown tag (a value that starts with "!"); quote a value that starts with "!"';
const ALIAS =
  'YAML: a value that starts with "*" is an alias, and no anchor (&name) of that name comes before it; quote the value if it is text';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'queuebox-yaml-problems-'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function issuesOf(text: string, env: Record<string, string> = {}): Promise<readonly ConfigIssue[]> {
  await writeFile(join(dir, 'queuebox.yaml'), text);
  const error = await loadConfig({ cwd: dir, env }).then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof ConfigError)) throw new Error(`expected a ConfigError, got ${String(error)}`);
  return error.issues;
}

describe('loadConfig with a YAML problem in one value', () => {
  it('reports an unknown tag at its key, with line and column, and the typo beside it', async () => {
    // Prepare
    const base = await readFile(REPO_FILE, 'utf8');
    const lines = base.split('\n').length - 1;
    const text = `${base}outbox:\n  maxAtempts: 3\n  batchSize: !Ref x\n`;

    // Act
    const issues = await issuesOf(text);

    // Assess
    expect(issues).toEqual([
      { path: 'outbox.batchSize', message: `${TAG} (column 14)`, origin: `queuebox.yaml:${lines + 3}` },
      {
        path: 'outbox.maxAtempts',
        message: 'unknown key "maxAtempts" (did you mean "maxAttempts"?)',
        origin: `queuebox.yaml:${lines + 2}`,
      },
    ]);
  });

  it('reports a tag error beside .inf, NaN and other schema problems', async () => {
    // Act
    const issues = await issuesOf(
      'outbox:\n  pollIntervalMs: .inf\n  batchSize: !!int x\n  maxAttempts: .nan\nhttp:\n  port: !!float [1]\n  host: 1\n',
    );

    // Assess
    expect(issues).toEqual([
      { path: 'outbox.batchSize', message: `${TAG} (column 14)`, origin: 'queuebox.yaml:3' },
      { path: 'http.port', message: `${TAG} (column 9)`, origin: 'queuebox.yaml:6' },
      { path: 'http.host', message: 'must be text, not a whole number', origin: 'queuebox.yaml:7' },
      {
        path: 'outbox.pollIntervalMs',
        message: 'must be a finite number, not infinity (.inf)',
        origin: 'queuebox.yaml:2',
      },
      {
        path: 'outbox.maxAttempts',
        message: 'must be a finite number, not NaN (.nan)',
        origin: 'queuebox.yaml:4',
      },
    ]);
  });

  it("reports a tag on a key at that key, beside its siblings' schema problems", async () => {
    // Act: the review's repro: the problem was reported at `outbox` and hid outbox.maxAttempts.
    const issues = await issuesOf('outbox:\n  maxAttempts: -1\n  !foo claimTimeoutMs: 5000\n');

    // Assess
    expect(issues.map((i) => i.path).sort()).toEqual(['outbox.claimTimeoutMs', 'outbox.maxAttempts']);
  });

  it('reports a duplicate key beside the schema problems, and not the schema problem of the duplicated value', async () => {
    // Act
    const issues = await issuesOf('outbox:\n  maxAttempts: 3\n  maxAttempts: x\n  batchSise: 5\n');

    // Assess
    expect(issues).toEqual([
      {
        path: 'outbox.maxAttempts',
        message: 'YAML: the key "maxAttempts" is set twice (first at queuebox.yaml:2); keep one',
        origin: 'queuebox.yaml:3',
      },
      {
        path: 'outbox.batchSise',
        message: 'unknown key "batchSise" (did you mean "batchSize"?)',
        origin: 'queuebox.yaml:4',
      },
    ]);
  });

  it('reports an alias without its anchor, in a value, a list and a merge, beside the schema problems', async () => {
    // Act
    const issues = await issuesOf(
      [
        'admin:',
        '  token: *SuperSecret',
        'destinations:',
        '  billing:',
        '    <<: *base',
        '    type: http',
        '  audit: { type: http, url: https://audit.example, timeoutMs: -1 }',
        'routes:',
        '  - *route',
        '  - { match: "a.#", destination: nowhere }',
        'outbox:',
        '  maxAtempts: 3',
        '',
      ].join('\n'),
    );

    // Assess
    expect(issues).toEqual([
      { path: 'admin.token', message: ALIAS, origin: 'queuebox.yaml:2' },
      { path: 'destinations.billing', message: ALIAS, origin: 'queuebox.yaml:5' },
      { path: 'routes[0]', message: ALIAS, origin: 'queuebox.yaml:9' },
      {
        path: 'outbox.maxAtempts',
        message: 'unknown key "maxAtempts" (did you mean "maxAttempts"?)',
        origin: 'queuebox.yaml:12',
      },
      { path: 'destinations.audit.timeoutMs', message: 'must be at least 1', origin: 'queuebox.yaml:7' },
      {
        path: 'routes[1].destination',
        message: 'names the destination "nowhere", which does not exist; known: billing, audit',
        origin: 'queuebox.yaml:10',
      },
    ]);
    expect(JSON.stringify(issues)).not.toContain('SuperSecret');
  });

  it('reports tags and escapes in list items and flow collections at their own path', () => {
    // Act
    const doc = parseConfigYaml(
      [
        'sources:',
        '  a:',
        '    auth: { scheme: bearer, secrets: [ok, !x two, "th\\qree"] }',
        'routes:',
        '  - match: a',
        '    destination: !y b',
        '  - !z',
        '    match: c',
        '',
      ].join('\n'),
      'q.yaml',
    );

    // Assess
    expect(doc.usable).toBe(true);
    expect(doc.issues.map((i) => [i.path, i.origin])).toEqual([
      ['sources.a.auth.secrets[1]', 'q.yaml:3'],
      ['sources.a.auth.secrets[2]', 'q.yaml:3'],
      ['routes[0].destination', 'q.yaml:6'],
      ['routes[1]', 'q.yaml:7'],
    ]);
    expect(doc.value).toEqual({
      sources: { a: { auth: { scheme: 'bearer', secrets: ['ok', 'two', 'th\\qree'] } } },
      routes: [{ match: 'a', destination: 'b' }, { match: 'c' }],
    });
  });

  it('reports a tag on the whole document at the root, and no schema problem', async () => {
    // Act
    const issues = await issuesOf('!x\noutbox:\n  maxAtempts: 3\n');

    // Assess
    expect(issues).toEqual([{ path: '', message: `${TAG} (column 1)`, origin: 'queuebox.yaml:1' }]);
  });

  it('checks a value a variable sets in place of one with a YAML problem', async () => {
    // Act
    const issues = await issuesOf('outbox:\n  batchSize: !Ref x\n', { QUEUEBOX_OUTBOX__BATCHSIZE: 'many' });

    // Assess
    expect(issues).toEqual([
      { path: 'outbox.batchSize', message: `${TAG} (column 14)`, origin: 'queuebox.yaml:2' },
      {
        path: 'outbox.batchSize',
        message: 'must be a number, not text',
        origin: 'QUEUEBOX_OUTBOX__BATCHSIZE',
      },
    ]);
  });
});

describe('loadConfig with a syntax error that leaves the structure in doubt', () => {
  it.each([
    ['an unclosed bracket', 'outbox:\n  maxAttempts: [3\nhttp:\n  port: x\n', 3],
    ['a key over two lines', 'outbox:\n  maxAttempts: 3\n   batchSize: 2\nhttp:\n  port: x\n', 2],
    ['a tab as indentation', 'outbox:\n\tmaxAttempts: 3\nhttp:\n  port: x\n', 2],
    ['a second document', 'http:\n  port: x\n---\noutbox: {}\n', 3],
  ])('reports %s alone, at the root with its line', async (_label, text, line) => {
    // Act
    const issues = await issuesOf(text);

    // Assess
    expect(issues.length).toBeGreaterThan(0);
    for (const issue of issues) {
      expect(issue).toEqual({
        path: '',
        message: expect.stringMatching(/^YAML: .* \(column \d+\)$/),
        origin: expect.stringMatching(/^queuebox\.yaml:\d+$/),
      });
    }
    expect(issues[0]?.origin).toBe(`queuebox.yaml:${line}`);
    expect(parseConfigYaml(text, 'q.yaml').usable).toBe(false);
  });
});
