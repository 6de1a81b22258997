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
 * Parses YAML configuration text. `origin` names the text in origins and issues (usually the file path);
 * every key and list item is recorded as `origin:line`. Duplicate keys are refused, each at its own path. No issue
 * quotes the document's text: it may hold secrets.
 */
export function parseConfigYaml(text: string, origin: string): ConfigDocument {
  const lineCounter = new LineCounter();
  const lines = text.split(/\r?\n/);
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true, merge: true, prettyErrors: true });
  const lineOf = (node: Node | null | undefined): string =>
    node?.range ? `${origin}:${lineCounter.linePos(node.range[0]).line}` : origin;
  const issues: ConfigIssue[] = [];
  const origins = new Map<string, string>();
  // Reported below at the key's path, instead of the parser's pathless "Map keys must be unique".
  const duplicates: ConfigIssue[] = [];
  const visit = (node: unknown, path: (string | number)[]): void => {
    if (isMap(node)) {
      const seen = new Map<string, string>();
      for (const pair of node.items) {
        const raw = isScalar(pair.key) ? pair.key.value : pair.key;
        // With `merge: true` the parser gives a merge key as a symbol.
        const key = typeof raw === 'symbol' ? (raw.description ?? '') : String(raw);
        if (key === '<<') {
          // A merge: only its aliases are checked (`<<: *name` or `<<: [*a, *b]`).
          for (const item of isSeq(pair.value) ? pair.value.items : [pair.value]) {
            if (isAlias(item)) visit(item, path);
          }
          continue;
        }
        const childPath = [...path, key];
        const at = lineOf(isScalar(pair.key) ? pair.key : null);
        const earlier = seen.get(key);
        if (earlier !== undefined) {
          duplicates.push({
            path: formatPath(childPath),
            message: `YAML: the key "${key}" is set twice (first at ${earlier}); keep one`,
            origin: at,
          });
        } else {
          seen.set(key, at);
          origins.set(formatPath(childPath), at);
        }
        visit(pair.value, childPath);
      }
    } else if (isSeq(node)) {
      node.items.forEach((item, index) => {
        const childPath = [...path, index];
        origins.set(formatPath(childPath), lineOf(item as Node));
        visit(item, childPath);
      });
    } else if (isAlias(node) && node.resolve(doc) === undefined) {
      // An unquoted value starting with "*" is an alias; its name (the rest of the value) is never quoted.
      issues.push({
        path: formatPath(path),
        message:
          'YAML: a value that starts with "*" is an alias, and no anchor (&name) of that name comes before it; quote the value if it is text',
        origin: lineOf(node),
      });
    }
  };
  origins.set('', origin);
  visit(doc.contents, []);
  for (const error of doc.errors) {
    if (error.code === 'DUPLICATE_KEY' && duplicates.length > 0) continue;
    issues.push({
      path: '',
      message: safeMessage(error, lines),
      origin: error.linePos ? `${origin}:${error.linePos[0].line}` : origin,
    });
  }
  issues.push(...duplicates);
  // A tag the parser does not know is only a warning to it, and the value loses its tag text: `token: !abc x` would
  // silently become "x".
  for (const warning of doc.warnings) {
    if (warning.code !== 'TAG_RESOLVE_FAILED') continue;
    issues.push({
      path: '',
      message: safeMessage(warning, lines),
      origin: warning.linePos ? `${origin}:${warning.linePos[0].line}` : origin,
    });
  }
  let value: unknown = {};
  if (issues.length === 0) {
    try {
      value = doc.toJS({ maxAliasCount: 1000 }) ?? {};
    } catch (error) {
      // Only the part before any ":": what follows may name a value of the document.
      const message = ((error as Error).message ?? '').split(/[:\n]/)[0] ?? '';
      issues.push({ path: '', message: `YAML: ${message || 'the document could not be read'}`, origin });
    }
  }
  if (issues.length === 0 && (typeof value !== 'object' || Array.isArray(value))) {
    issues.push({ path: '', message: 'the file must hold a YAML mapping (key: value lines)', origin });
    value = {};
  }
  return { value, origins, issues };
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
    };
  }
  return parseConfigYaml(text, origin);
}
