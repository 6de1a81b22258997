import { QueueBoxError } from './errors.ts';
import type { JsonValue } from './messages.ts';

/** One step of a JSON path: an object member or an array index. */
export type PathSegment = { readonly key: string } | { readonly index: number };

/** A parsed JSON path. */
export interface JsonPath {
  readonly text: string;
  readonly segments: readonly PathSegment[];
}

/** A JSON path that does not parse: where (0-based character position) and what is wrong. */
export class JsonPathSyntaxError extends QueueBoxError {
  readonly path: string;
  readonly position: number;
  /** What is wrong at `position`, without the path itself. */
  readonly problem: string;

  constructor(path: string, position: number, problem: string) {
    super(`Invalid JSON path ${JSON.stringify(path)} at ${position}: ${problem}`, {
      context: { path, position },
    });
    this.path = path;
    this.position = position;
    this.problem = problem;
  }
}

const IDENTIFIER = /^[^.[\]'"\s]+/;
const INDEX = /^\d+/;

/**
 * Parses the small JSON path subset sources use (`eventTypePath`, `idempotencyKey.path`, …): `$`, then any of
 * `.name`, `[0]`, `['x-y']`, `["x-y"]`. A name after a dot is any run of characters but `.`, `[`, `]`, quotes and
 * white space (so `$.x-y` works: no arithmetic exists to confuse it with); other names go in quotes, where a
 * backslash escapes the quote and the backslash (and nothing else). No filters, wildcards or evaluation. The
 * configuration validates with this parser and the inbox reads with it, so both accept exactly the same paths.
 * Throws JsonPathSyntaxError for anything else.
 */
export function parseJsonPath(text: string): JsonPath {
  if (!text.startsWith('$')) throw new JsonPathSyntaxError(text, 0, 'a path starts with $');
  const segments: PathSegment[] = [];
  let at = 1;
  while (at < text.length) {
    const char = text[at];
    if (char === '.') {
      const name = IDENTIFIER.exec(text.slice(at + 1))?.[0];
      if (name === undefined) throw new JsonPathSyntaxError(text, at + 1, 'expected a member name after .');
      segments.push({ key: name });
      at += 1 + name.length;
    } else if (char === '[') {
      const next = text[at + 1];
      if (next === "'" || next === '"') {
        let key = '';
        let i = at + 2;
        for (;;) {
          const c = text[i];
          if (c === undefined) throw new JsonPathSyntaxError(text, i, 'unterminated quoted name');
          if (c === '\\') {
            const escaped = text[i + 1];
            if (escaped !== '\\' && escaped !== "'" && escaped !== '"') {
              throw new JsonPathSyntaxError(text, i, 'only \\\\, \\\' and \\" are escapes');
            }
            key += escaped;
            i += 2;
          } else if (c === next) {
            break;
          } else {
            key += c;
            i += 1;
          }
        }
        if (text[i + 1] !== ']')
          throw new JsonPathSyntaxError(text, i + 1, 'expected ] after the quoted name');
        segments.push({ key });
        at = i + 2;
      } else {
        const digits = INDEX.exec(text.slice(at + 1))?.[0];
        if (digits === undefined)
          throw new JsonPathSyntaxError(text, at + 1, 'expected an index or a quoted name');
        if (text[at + 1 + digits.length] !== ']') {
          throw new JsonPathSyntaxError(text, at + 1 + digits.length, 'expected ] after the index');
        }
        segments.push({ index: Number(digits) });
        at += 2 + digits.length;
      }
    } else {
      throw new JsonPathSyntaxError(text, at, 'expected . or [');
    }
  }
  return { text, segments };
}

/**
 * What is wrong with a path, as a message for a configuration issue (it does not quote the path, which the issue
 * names); `undefined` when `parseJsonPath` accepts it.
 */
export function jsonPathProblem(text: string): string | undefined {
  try {
    parseJsonPath(text);
    return undefined;
  } catch (error) {
    if (!(error instanceof JsonPathSyntaxError)) throw error;
    return `is not a supported JSON path (at ${error.position}: ${error.problem}): use $ followed by .name, [index] or ['name'] steps, e.g. $.data.id`;
  }
}

/** The value at `path` in `document`, or undefined. Reads own members only (never the prototype chain). */
export function readJsonPath(document: JsonValue, path: JsonPath): JsonValue | undefined {
  let current: JsonValue | undefined = document;
  for (const segment of path.segments) {
    if (current === null || typeof current !== 'object') return undefined;
    if ('index' in segment) {
      if (!Array.isArray(current)) return undefined;
      current = current[segment.index];
    } else {
      if (Array.isArray(current) || !Object.hasOwn(current, segment.key)) return undefined;
      current = current[segment.key];
    }
  }
  return current;
}
