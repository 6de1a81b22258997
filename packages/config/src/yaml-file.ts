import { readFile } from 'node:fs/promises';
import type { ConfigIssue } from '@queuebox/core';
import { isMap, isScalar, isSeq, LineCounter, type Node, parseDocument } from 'yaml';
import { formatPath } from './paths.ts';

/** A parsed configuration document: its plain value, where each key sits, and YAML syntax problems. */
export interface ConfigDocument {
  readonly value: unknown;
  /** Formatted path → `file:line`. */
  readonly origins: Map<string, string>;
  readonly issues: ConfigIssue[];
}

/**
 * Parses YAML configuration text. `origin` names the text in origins and issues (usually the file path);
 * every key and list item is recorded as `origin:line`. Duplicate keys are refused.
 */
export function parseConfigYaml(text: string, origin: string): ConfigDocument {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true, merge: true, prettyErrors: true });
  const issues: ConfigIssue[] = doc.errors.map((error) => ({
    path: '',
    // Only the first line: the rest quotes the source, which may hold a secret.
    message: `YAML: ${error.message.split('\n')[0] ?? error.message}`,
    origin: error.linePos ? `${origin}:${error.linePos[0].line}` : origin,
  }));
  const origins = new Map<string, string>();
  const lineOf = (node: Node | null | undefined): string =>
    node?.range ? `${origin}:${lineCounter.linePos(node.range[0]).line}` : origin;
  const visit = (node: unknown, path: (string | number)[]): void => {
    if (isMap(node)) {
      for (const pair of node.items) {
        const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
        if (key === '<<') continue;
        const childPath = [...path, key];
        origins.set(formatPath(childPath), lineOf(isScalar(pair.key) ? pair.key : null));
        visit(pair.value, childPath);
      }
    } else if (isSeq(node)) {
      node.items.forEach((item, index) => {
        const childPath = [...path, index];
        origins.set(formatPath(childPath), lineOf(item as Node));
        visit(item, childPath);
      });
    }
  };
  origins.set('', origin);
  visit(doc.contents, []);
  let value: unknown = {};
  if (issues.length === 0) {
    try {
      value = doc.toJS({ maxAliasCount: 1000 }) ?? {};
    } catch (error) {
      issues.push({ path: '', message: `YAML: ${(error as Error).message}`, origin });
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
