import { readFile } from 'node:fs/promises';
import type { ConfigIssue } from '@queuebox/core';
import {
  isAlias,
  isMap,
  isScalar,
  isSeq,
  LineCounter,
  type Node,
  parseDocument,
  type YAMLError,
  type YAMLWarning,
} from 'yaml';
import { formatPath } from './paths.ts';

/** A parsed configuration document: its plain value, where each key sits, and YAML syntax problems. */
export interface ConfigDocument {
  readonly value: unknown;
  /** Formatted path → `file:line`. */
  readonly origins: Map<string, string>;
  readonly issues: ConfigIssue[];
  /**
   * Whether `value` can still be validated despite `issues`: true when each issue concerns only the value at its
   * path (a duplicate key, an unknown tag, an alias without its anchor, a bad escape, a second anchor or tag on one
   * value), whose schema problems, and those of everything under it, are then left unreported; false after a
   * syntax error that leaves the document's structure in doubt (bad indentation, an unclosed bracket or quote, a
   * tab as indentation, a second document, …), when the file could not be read or is no mapping.
   */
  readonly usable: boolean;
}

/**
 * Messages of the YAML parser that quote the text they are about (an escape sequence, a tag, a directive, a block
 * scalar header: all of it possibly part of a secret), reworded without it.
 */
const QUOTING_MESSAGES: readonly [RegExp, string][] = [
  [
    /^Invalid escape sequence\b/,
    'Invalid escape sequence in a double-quoted value (write \\\\ for a backslash, or quote with single quotes)',
  ],
  [
    /^(Unresolved tag|Could not resolve tag|Not a valid tag|Verbatim tags|The .* tag has no suffix)/,
    'Unknown tag (a value that starts with "!"); quote a value that starts with "!"',
  ],
  [/^Block scalar header includes extra characters\b/, 'Block scalar header includes extra characters'],
  [/^Unknown directive\b/, 'Unknown directive (a line that starts with "%")'],
  [/^Unsupported YAML version\b/, 'Unsupported YAML version'],
  [/^Ordered maps must not include duplicate keys\b/, 'Ordered maps must not include duplicate keys'],
  [/^Unresolved plain scalar\b/, 'Unresolved plain scalar'],
];

/**
 * The first line of a parser error without any text of the document: the rest of the message quotes the source,
 * and some first lines quote the offending characters, any of which may belong to a secret. As a last guard, a
 * message that still holds a word of the value on its line is reduced to the error's code.
 */
function safeMessage(error: YAMLError | YAMLWarning, lines: readonly string[]): string {
  const first = error.message.split('\n')[0] ?? '';
  const where = / at line \d+, column \d+:?$/.exec(first);
  let message = where ? first.slice(0, where.index) : first;
  for (const [pattern, replacement] of QUOTING_MESSAGES) {
    if (pattern.test(message)) message = replacement;
  }
  const line = error.linePos ? (lines[error.linePos[0].line - 1] ?? '') : '';
  // The value part of the line (after a key's ":" or a list's "-"); keys are not secret, and the messages name some.
  const valuePart = line.replace(/^\s*(-\s+)?([^\s:][^:]*:(\s|$))?/, '');
  const words = valuePart.split(/[\s"'`,:{}[\]&*!|>@%#]+/).filter((word) => word.length >= 3);
  if (words.some((word) => message.includes(word))) message = `syntax error (${error.code})`;
  const column = error.linePos ? ` (column ${error.linePos[0].col})` : '';
  return `YAML: ${message}${column}`;
}

/**
 * Parser problems that concern one value only (its tag, an escape in it, its anchors, its key set twice): the
 * document around it is read as written, so the rest of the file can still be validated. Any other parser error
 * (indentation, an unclosed bracket or quote, a tab as indentation, a key over several lines, a second document,
 * …) leaves the structure in doubt: the keys after it may have been read into the wrong place.
 */
const VALUE_PROBLEMS: ReadonlySet<string> = new Set([
  'DUPLICATE_KEY',
  'TAG_RESOLVE_FAILED',
  'BAD_DQ_ESCAPE',
  'MULTIPLE_ANCHORS',
  'MULTIPLE_TAGS',
]);

/** Where a key's or list item's text starts and ends (its tag and anchor included), and its path. */
interface Span {
  readonly start: number;
  readonly end: number;
  readonly path: readonly (string | number)[];
}

/** The end of a node's text, trailing comment included; `fallback` for a node without a range. */
const endOf = (node: unknown, fallback: number): number => {
  const range = (node as Node | null)?.range;
  return range ? Math.max(range[1], range[2]) : fallback;
};

/** Sections whose keys are names (of sources, of destinations): a name YAML reads as another type is refused. */
const NAMED_SECTIONS: ReadonlySet<string> = new Set(['sources', 'destinations']);

function describeKey(raw: unknown): string {
  if (typeof raw === 'number' || typeof raw === 'bigint') return 'a number';
  if (typeof raw === 'boolean') return 'true/false';
  if (raw === null || raw === undefined) return 'empty (null)';
  return 'a value that is not text';
}

/**
 * Parses YAML configuration text. `origin` names the text in origins and issues (usually the file path);
 * every key and list item is recorded as `origin:line`. Duplicate keys are refused, each at its own path; any
 * other problem with one value (an unknown tag, an alias without its anchor, …) is reported at the path of its key
 * or list item, and the rest of the document is still read (see {@link ConfigDocument.usable}). A syntax error
 * that leaves the structure in doubt is reported at the root, with its line and column. No issue quotes the
 * document's text: it may hold secrets.
 */
export function parseConfigYaml(text: string, origin: string): ConfigDocument {
  const lineCounter = new LineCounter();
  const lines = text.split(/\r?\n/);
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true, merge: true, prettyErrors: true });
  const lineOf = (node: Node | null | undefined): string =>
    node?.range ? `${origin}:${lineCounter.linePos(node.range[0]).line}` : origin;
  // Each problem with where it starts in the text, so they are reported in the order of the file.
  const found: { at: number; issue: ConfigIssue }[] = [];
  const origins = new Map<string, string>();
  const spans: Span[] = [];
  // Reported below at the key's path, instead of the parser's pathless "Map keys must be unique".
  const duplicates: { at: number; issue: ConfigIssue }[] = [];
  const aliasProblem = (path: (string | number)[], node: Node): void => {
    // An unquoted value starting with "*" is an alias; its name (the rest of the value) is never quoted.
    found.push({
      at: node.range?.[0] ?? 0,
      issue: {
        path: formatPath(path),
        message:
          'YAML: a value that starts with "*" is an alias, and no anchor (&name) of that name comes before it; quote the value if it is text',
        origin: lineOf(node),
      },
    });
  };
  const unresolved = (node: unknown): boolean => isAlias(node) && node.resolve(doc) === undefined;
  // An alias without its anchor is replaced by an empty value (a merge of one is dropped), so the rest of the
  // document can still be converted; the problem is reported at its path, which hides the empty value's own.
  // A key's or item's tag and anchor come before its range: its text starts where the pair or item before it ends,
  // so a problem with a tag on a key is the key's own. (A tag on a mapping's first key cannot be told from one on
  // the mapping itself by ranges: it stays the parent's.)
  const visit = (node: unknown, path: (string | number)[]): void => {
    if (isMap(node)) {
      let previousEnd = node.range?.[0] ?? 0;
      const seen = new Map<string, string>();
      const dropped = new Set<unknown>();
      for (const pair of node.items) {
        const raw = isScalar(pair.key) ? pair.key.value : pair.key;
        // With `merge: true` the parser gives a merge key as a symbol.
        const key = typeof raw === 'symbol' ? (raw.description ?? '') : String(raw);
        if (key === '<<') {
          // A merge: only its aliases are checked (`<<: *name` or `<<: [*a, *b]`).
          const sources = isSeq(pair.value) ? pair.value.items : [pair.value];
          for (const missing of sources.filter(unresolved)) {
            aliasProblem(path, missing as Node);
            dropped.add(pair);
          }
          continue;
        }
        const childPath = [...path, key];
        const keyNode = isScalar(pair.key) ? pair.key : null;
        const at = lineOf(keyNode);
        if (path.length === 1 && NAMED_SECTIONS.has(String(path[0])) && keyNode && typeof raw !== 'string') {
          // `0042:` is the number 42, `1e3:` 1000, `0x1f:` 31: the name would silently be another one. A name is no
          // secret, so its text is quoted back.
          const written = keyNode.range ? text.slice(keyNode.range[0], keyNode.range[1]).trim() : key;
          found.push({
            at: keyNode.range?.[0] ?? 0,
            issue: {
              path: formatPath(childPath),
              message: `YAML: the name ${written} is read as ${describeKey(raw)} (${key}), not as text; quote it: "${written}"`,
              origin: at,
            },
          });
        }
        const start = (pair.key as Node | null)?.range?.[0];
        if (start !== undefined) {
          const end = endOf(pair.value, endOf(pair.key, start));
          spans.push({ start: Math.min(previousEnd, start), end, path: childPath });
          previousEnd = end;
        }
        const earlier = seen.get(key);
        if (earlier !== undefined) {
          duplicates.push({
            at: start ?? 0,
            issue: {
              path: formatPath(childPath),
              message: `YAML: the key "${key}" is set twice (first at ${earlier}); keep one`,
              origin: at,
            },
          });
        } else {
          seen.set(key, at);
          origins.set(formatPath(childPath), at);
        }
        if (unresolved(pair.value)) {
          aliasProblem(childPath, pair.value as Node);
          pair.value = null;
        } else {
          visit(pair.value, childPath);
        }
      }
      if (dropped.size > 0) node.items = node.items.filter((pair) => !dropped.has(pair));
    } else if (isSeq(node)) {
      let previousEnd = node.range?.[0] ?? 0;
      node.items.forEach((item, index) => {
        const childPath = [...path, index];
        const end = endOf(item, previousEnd);
        spans.push({ start: previousEnd, end, path: childPath });
        previousEnd = end;
        origins.set(formatPath(childPath), lineOf(item as Node));
        if (unresolved(item)) {
          aliasProblem(childPath, item as Node);
          node.items[index] = null;
        } else {
          visit(item, childPath);
        }
      });
    }
  };
  origins.set('', origin);
  if (unresolved(doc.contents)) {
    aliasProblem([], doc.contents as Node);
    doc.contents = null;
  } else {
    visit(doc.contents, []);
  }
  // The key or list item a problem at `offset` belongs to: the innermost one whose text holds it, else the root.
  const pathAt = (offset: number): string => {
    let innermost: Span | undefined;
    for (const span of spans) {
      if (span.start <= offset && offset < span.end) innermost = span; // spans come parents first
    }
    return formatPath(innermost?.path ?? []);
  };
  let usable = true;
  // A tag the parser does not know is only a warning to it, and the value loses its tag text: `token: !abc x` would
  // silently become "x".
  const problems = [
    ...doc.errors,
    ...doc.warnings.filter((warning) => warning.code === 'TAG_RESOLVE_FAILED'),
  ];
  for (const problem of problems) {
    if (problem.code === 'DUPLICATE_KEY' && duplicates.length > 0) continue;
    const local = VALUE_PROBLEMS.has(problem.code);
    if (!local) usable = false;
    found.push({
      at: problem.pos[0],
      issue: {
        path: local ? pathAt(problem.pos[0]) : '',
        message: safeMessage(problem, lines),
        origin: problem.linePos ? `${origin}:${problem.linePos[0].line}` : origin,
      },
    });
  }
  found.push(...duplicates);
  const issues = found.sort((a, b) => a.at - b.at).map(({ issue }) => issue);
  let value: unknown = {};
  if (usable) {
    try {
      value = doc.toJS({ maxAliasCount: 1000 }) ?? {};
    } catch (error) {
      // Only the part before any ":": what follows may name a value of the document.
      const message = ((error as Error).message ?? '').split(/[:\n]/)[0] ?? '';
      issues.push({ path: '', message: `YAML: ${message || 'the document could not be read'}`, origin });
      usable = false;
      value = {};
    }
  }
  if (usable && (typeof value !== 'object' || Array.isArray(value))) {
    // A document that is no mapping is reported only when nothing else was: a problem at the root may explain it.
    if (issues.length === 0) {
      issues.push({ path: '', message: 'the file must hold a YAML mapping (key: value lines)', origin });
    }
    usable = false;
    value = {};
  }
  return { value, origins, issues, usable };
}

/** Reads and parses a configuration file; `undefined` when the file does not exist. */
export async function readConfigFile(file: string, origin = file): Promise<ConfigDocument | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    return {
      value: {},
      origins: new Map(),
      issues: [{ path: '', message: `cannot read the file: ${(error as Error).message}`, origin }],
      usable: false,
    };
  }
  return parseConfigYaml(text, origin);
}
