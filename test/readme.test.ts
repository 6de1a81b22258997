/**
 * The README's "Where is X" table keeps pointing at files that exist: a rename or a split that forgets the table
 * fails here. `store-*` in the table stands for both dialects (`packages/store-postgres`, `packages/store-sqlserver`).
 */
import { existsSync, globSync, readFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The concepts a newcomer looks for (issue 17). */
const CONCEPTS = [
  'claim',
  'lease',
  'ordering',
  'dedupe',
  'relay',
  'signatures',
  'wake-ups',
  'alarms',
  'retention',
  'cost',
];

/** Rows of the table under `### Where is X`: [concept, where], a continuation row with an empty concept. */
function whereIsRows(): [string, string][] {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.split('### Where is X')[1]?.split(/\n#{2,3} /)[0] ?? '';
  return section
    .split('\n')
    .filter((line) => line.startsWith('|') && !/^\|\s*-+/.test(line))
    .slice(1)
    .map((line) => {
      const [, concept = '', where = ''] = line.split('|').map((cell) => cell.trim());
      return [concept, where];
    });
}

/** The files a cell names: backticked paths and markdown links, `store-*` expanded to both stores. */
function pathsIn(cell: string): string[] {
  const named = [
    ...[...cell.matchAll(/`([^`\s]+\/[^`\s]*)`/g)].map(([, path]) => path ?? ''),
    ...[...cell.matchAll(/\]\(([^)#]+)(?:#[^)]*)?\)/g)].map(([, path]) => path ?? ''),
  ];
  return named.flatMap((path) =>
    path.startsWith('store-*/')
      ? [`packages/store-postgres/${path.slice(8)}`, `packages/store-sqlserver/${path.slice(8)}`]
      : [path],
  );
}

/** The functions a cell names: backticked identifiers (`claimOutboxStatement`, `forward`). */
function identifiersIn(cell: string): string[] {
  return [...cell.matchAll(/`([a-z][A-Za-z0-9]*)`/g)].map(([, name]) => name ?? '');
}

describe('the README "Where is X" table', () => {
  const rows = whereIsRows();

  it('has a row for every concept, each naming at least one file', () => {
    // Act
    const concepts = new Map<string, string[]>();
    let current = '';
    for (const [concept, where] of rows) {
      if (concept !== '') current = concept;
      concepts.set(current, [...(concepts.get(current) ?? []), ...pathsIn(where)]);
    }

    // Assess
    for (const concept of CONCEPTS) {
      expect(concepts.get(concept)?.length ?? 0, concept).toBeGreaterThan(0);
    }
  });

  it('points only at files and folders that exist', () => {
    // Act
    const missing = rows
      .flatMap(([, where]) => pathsIn(where))
      .filter((path) =>
        path.includes('*') ? globSync(path, { cwd: ROOT }).length === 0 : !existsSync(join(ROOT, path)),
      );

    // Assess
    expect(missing).toEqual([]);
  });

  it('names only functions that one of its files defines', () => {
    // Prepare
    const texts = rows
      .flatMap(([, where]) => pathsIn(where))
      .filter((path) => !path.includes('*') && path.endsWith('.ts') && existsSync(join(ROOT, path)))
      .map((path) => readFileSync(join(ROOT, path), 'utf8'));

    // Act
    const unknown = rows
      .flatMap(([, where]) => identifiersIn(where))
      .filter(
        (name) =>
          !texts.some((text) =>
            new RegExp(`\\b(?:function\\s+|async\\s+)${name}\\b|\\b${name}\\(`).test(text),
          ),
      );

    // Assess
    expect(unknown).toEqual([]);
  });
});

describe('the repository', () => {
  it('stands alone: no file cites the specification or the design outside it', () => {
    // Prepare
    const files = globSync(['**/*.{ts,md,sh,sql,yaml,json}'], {
      cwd: ROOT,
      exclude: (path) => ['node_modules', '.git', '.sst', '.queuebox', 'dist'].includes(basename(path)),
    });

    // Act
    const outside = files.filter((file) =>
      /\bDESIGN(?:\.md)? §|\bshared\/(?:design|seeds)\//.test(readFileSync(join(ROOT, file), 'utf8')),
    );

    // Assess: the specification and the design are docs/specification.md and docs/design.md.
    expect(outside).toEqual([]);
  });
});
