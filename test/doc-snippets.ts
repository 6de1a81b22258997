/**
 * The TypeScript examples of the documentation compile, and the YAML blocks that claim to be a whole configuration
 * load. Every ```ts / ```typescript / ```tsx block (any letter case) of the root README.md, every
 * packages/<name>/README.md, infra/README.md, functions/README.md, test/README.md, bench/README.md and docs/*.md is
 * type-checked as a module of its own under the repository's tsconfig.json (strict,
 * `noUncheckedIndexedAccess`, nodenext resolution from the repository root), in one TypeScript program held in
 * memory: nothing is written to disk.
 *
 * Conventions in the markdown (HTML comments, invisible once rendered; only blank lines may stand between a
 * comment and the block it speaks of):
 *
 *   <!-- snippet-context
 *   import type { QueueBoxConfig } from '@queuebox/config';
 *   declare const config: QueueBoxConfig;
 *   -->
 *     What the example takes as given (a loaded `config`, an open `store`, a `message` …), prepended to the block.
 *     `<!-- snippet-context at packages/store-postgres/src` … `-->` also compiles the block as a file of that folder,
 *     so its relative imports resolve as they would in a dialect package.
 *
 *   <!-- snippet-not-compiled: <why> -->
 *     A block that is deliberately not a program (a fragment, pseudo-code). It is still compiled, and the test
 *     fails when it compiles cleanly: the mark is then stale.
 *
 *   <!-- snippet-whole-config -->
 *     Before a ```yaml block: the block is a whole queuebox.yaml. It is loaded with the runtime's `loadConfig`
 *     (every `env://` and `secret://` reference answered by a stand-in of the shape its key needs) and compiled as
 *     `queuebox config check` does (`checkServices`, no transform function registered); every problem fails.
 *
 * A block without a comment must compile as it stands. The test prints how many blocks it checked and fails when
 * that number drops below a floor, so it cannot go hollow by finding nothing. It also proves, on
 * fixtures held in memory, that it fails on a broken snippet, on an unmarked block that does not compile, on a
 * stale `snippet-not-compiled` mark and on a comment that precedes no block.
 *
 * The checks run in test/doc-snippets.integration.test.ts (integration lane: a program of every package, about
 * 10 s). `npx tsx test/doc-snippets.ts [file.md …]` prints the problems of the given (default: all) documents.
 */
import { globSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The markdown whose code blocks are checked. */
export const DOCUMENTS = [
  'README.md',
  'packages/*/README.md',
  'infra/README.md',
  'functions/README.md',
  'test/README.md',
  'bench/README.md',
  'docs/*.md',
];

/** One fenced code block of a markdown file and the snippet comment before it. */
export interface CodeBlock {
  /** Repository-relative markdown file. */
  readonly file: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly language: string;
  readonly code: string;
  /** The snippet comment before the block, if any. */
  readonly mark?: SnippetMark;
}

export type SnippetMark =
  | { readonly kind: 'context'; readonly line: number; readonly preamble: string; readonly at?: string }
  | { readonly kind: 'not-compiled'; readonly line: number; readonly reason: string }
  | { readonly kind: 'whole-config'; readonly line: number };

/** What reading the markdown found wrong with its marks (not with the code). */
export interface MarkProblem {
  readonly file: string;
  readonly line: number;
  readonly message: string;
}

const FENCE = /^(\s*)(`{3,}|~{3,})\s*([\w-]*)[^\n]*$/;
const MARK = /^\s*<!--\s*snippet-([a-z-]+)(.*)$/;

/** The fenced blocks of one markdown text, with the snippet comment that precedes each. */
export function codeBlocks(file: string, text: string): { blocks: CodeBlock[]; problems: MarkProblem[] } {
  const lines = text.split('\n');
  const blocks: CodeBlock[] = [];
  const problems: MarkProblem[] = [];
  let pending: SnippetMark | undefined;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    const mark = MARK.exec(line);
    if (mark) {
      if (pending)
        problems.push({ file, line: pending.line, message: 'a snippet comment precedes no code block' });
      const [, kind = '', rest = ''] = mark;
      const start = i;
      // The comment runs to the first line holding `-->` (possibly this one).
      let body = rest;
      while (!body.includes('-->') && i + 1 < lines.length) body += `\n${lines[++i] ?? ''}`;
      body = body.slice(0, body.indexOf('-->'));
      const [head = '', ...preamble] = body.split('\n');
      if (kind === 'context') {
        const at = /^\s+at\s+(\S+)\s*$/.exec(head)?.[1];
        if (head.trim() !== '' && at === undefined) {
          problems.push({ file, line: start + 1, message: `snippet-context: cannot read "${head.trim()}"` });
        }
        pending = { kind, line: start + 1, preamble: preamble.join('\n'), ...(at ? { at } : {}) };
      } else if (kind === 'not-compiled') {
        const reason = head.replace(/^\s*:/, '').trim();
        if (reason === '')
          problems.push({ file, line: start + 1, message: 'snippet-not-compiled needs a reason' });
        pending = { kind, line: start + 1, reason };
      } else if (kind === 'whole-config') {
        pending = { kind, line: start + 1 };
      } else {
        problems.push({ file, line: start + 1, message: `unknown snippet comment "snippet-${kind}"` });
      }
      continue;
    }
    const fence = FENCE.exec(line);
    if (fence) {
      const [, indent = '', marker = '', language = ''] = fence;
      const code: string[] = [];
      let j = i + 1;
      for (; j < lines.length; j++) {
        const inner = lines[j] ?? '';
        if (inner.trim().startsWith(marker) && inner.trim().replace(/[`~]/g, '') === '') break;
        code.push(inner.startsWith(indent) ? inner.slice(indent.length) : inner);
      }
      blocks.push({
        file,
        line: i + 1,
        language,
        code: code.join('\n'),
        ...(pending ? { mark: pending } : {}),
      });
      pending = undefined;
      i = j;
      continue;
    }
    if (pending && line.trim() !== '') {
      problems.push({ file, line: pending.line, message: 'a snippet comment precedes no code block' });
      pending = undefined;
    }
  }
  if (pending)
    problems.push({ file, line: pending.line, message: 'a snippet comment precedes no code block' });
  return { blocks, problems };
}

export const isTypeScript = (block: CodeBlock) =>
  ['ts', 'typescript', 'tsx'].includes(block.language.toLowerCase());

/** The result of compiling the TypeScript blocks. */
export interface SnippetReport {
  /** Blocks compiled and expected to compile. */
  readonly compiled: number;
  /** Blocks marked snippet-not-compiled. */
  readonly notCompiled: number;
  /** One line per problem, `file:line: message`, markdown lines. */
  readonly failures: readonly string[];
}

/** The virtual module a block is checked as. */
function moduleOf(block: CodeBlock): { path: string; text: string; lineOf: (line: number) => number } {
  const mark = block.mark?.kind === 'context' ? block.mark : undefined;
  const preamble = mark?.preamble ?? '';
  const preambleLines = preamble === '' ? 0 : preamble.split('\n').length;
  const slug = `${block.file.replace(/[^\w]+/g, '_')}_L${block.line}`;
  const folder = mark?.at ?? '.doc-snippets';
  return {
    path: join(ROOT, folder, `__doc_snippet_${slug}.ts`),
    // `export {}` makes every block a module (top-level await, no clash between blocks' names).
    text: `${preamble}${preambleLines > 0 ? '\n' : ''}${block.code}\nexport {};\n`,
    // A preamble line is a line of the comment (its first line follows the comment's opening line).
    lineOf: (line) =>
      line < preambleLines ? (mark?.line ?? 0) + 1 + line : block.line + 1 + (line - preambleLines),
  };
}

/** Type-checks the TypeScript blocks of `documents` (repository-relative path → markdown text) in one program. */
export function checkSnippets(documents: ReadonlyMap<string, string>): SnippetReport {
  const failures: string[] = [];
  const blocks: CodeBlock[] = [];
  for (const [file, text] of documents) {
    const read = codeBlocks(file, text);
    blocks.push(...read.blocks.filter(isTypeScript));
    failures.push(...read.problems.map((p) => `${p.file}:${p.line}: ${p.message}`));
    for (const block of read.blocks) {
      if (block.mark?.kind === 'whole-config' && block.language !== 'yaml') {
        failures.push(
          `${file}:${block.line}: snippet-whole-config precedes a ${block.language || 'plain'} block`,
        );
      }
      if (block.mark !== undefined && block.mark.kind !== 'whole-config' && !isTypeScript(block)) {
        failures.push(`${file}:${block.line}: snippet-${block.mark.kind} precedes a ${block.language} block`);
      }
    }
  }
  const modules = blocks.map((block) => ({ block, ...moduleOf(block) }));
  const byPath = new Map(modules.map((m) => [m.path, m.text]));

  const configPath = join(ROOT, 'tsconfig.json');
  const read = ts.readConfigFile(configPath, ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(read.config ?? {}, ts.sys, ROOT, undefined, configPath);
  const host = ts.createCompilerHost(parsed.options);
  const getSourceFile = host.getSourceFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  host.getSourceFile = (fileName, language, onError, shouldCreate) => {
    const text = byPath.get(resolve(fileName));
    return text !== undefined
      ? ts.createSourceFile(fileName, text, language)
      : getSourceFile(fileName, language, onError, shouldCreate);
  };
  host.fileExists = (fileName) => byPath.has(resolve(fileName)) || fileExists(fileName);
  // The packages' own ambient module declarations (codecs without types, undici's inner modules).
  const ambient = globSync('packages/*/src/**/*.d.ts', { cwd: ROOT }).map((f) => join(ROOT, f));
  const program = ts.createProgram({
    rootNames: [...ambient, ...byPath.keys()],
    options: parsed.options,
    host,
  });
  for (const diagnostic of [...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics()]) {
    failures.push(`tsconfig.json: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')}`);
  }

  let compiled = 0;
  let notCompiled = 0;
  for (const { block, path, lineOf } of modules) {
    const source = program.getSourceFile(path);
    const diagnostics = source
      ? [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)]
      : [];
    const messages = diagnostics.map((d) => {
      const line = d.start === undefined ? 0 : (source?.getLineAndCharacterOfPosition(d.start).line ?? 0);
      return `${block.file}:${lineOf(line)}: TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
    });
    if (block.mark?.kind === 'not-compiled') {
      notCompiled += 1;
      if (messages.length === 0) {
        failures.push(
          `${block.file}:${block.line}: compiles cleanly, yet is marked snippet-not-compiled (remove the mark)`,
        );
      }
    } else {
      compiled += 1;
      failures.push(...messages);
    }
  }
  return { compiled, notCompiled, failures };
}

/** The markdown files this test reads, repository-relative. */
export function documentation(): Map<string, string> {
  const files = globSync(DOCUMENTS, { cwd: ROOT, exclude: (p) => p.includes('node_modules') }).sort();
  return new Map(files.map((file) => [file, readFileSync(join(ROOT, file), 'utf8')]));
}

// `npx tsx test/doc-snippets.ts [file.md …]`: the problems of the given markdown files (default: all documents).
if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const named = process.argv.slice(2);
  const documents =
    named.length === 0
      ? documentation()
      : new Map(named.map((file) => [file, readFileSync(resolve(file), 'utf8')] as const));
  const report = checkSnippets(documents);
  for (const failure of report.failures) console.log(failure);
  console.log(`${report.compiled} blocks type-checked, ${report.notCompiled} marked snippet-not-compiled`);
  process.exitCode = report.failures.length === 0 ? 0 : 1;
}
