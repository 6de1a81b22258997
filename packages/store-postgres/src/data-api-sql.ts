/**
 * What the RDS Data API needs of a statement that was written for `pg`: named parameters (`:p1`) with typed
 * values instead of `$1`, no array parameters, and one statement per call. The store's statements stay one text
 * for every executor; the Data API executor derives its text from it here, mechanically:
 *
 * - `$n` becomes `:pn`; a value becomes the Data API field of its type (`stringValue`, `longValue`,
 *   `doubleValue`, `booleanValue`, `isNull`).
 * - An array value travels as **one JSON text parameter**: `$n::T[]` becomes
 *   `ARRAY(SELECT e.v::T FROM pg_catalog.jsonb_array_elements_text(:pn::jsonb) WITH ORDINALITY AS e(v, n) ORDER BY e.n)`,
 *   the same array in the same order, so `unnest(…) WITH ORDINALITY`, `= ANY (…)` and the rest read as before.
 *   An array needs that explicit `::T[]` cast on every use; one without it is refused before any call.
 * - A text without parameters may hold several statements (the migrations): `splitStatements` cuts it where the
 *   simple protocol would, because the Data API runs one statement per call.
 *
 * The scanner knows what may hide a `$n` or a `;`: quoted strings (also `E'…'` with backslash escapes), quoted
 * identifiers, dollar-quoted bodies and both kinds of comment.
 */
import type { SqlParameter } from '@aws-sdk/client-rds-data';
import { StoreError } from '@queuebox/core';

/** A statement as the Data API takes it. */
export interface DataApiStatement {
  readonly sql: string;
  readonly parameters: SqlParameter[];
}

/** One piece of a statement text: SQL outside quotes, or a placeholder `$n` with the cast that follows it. */
type Piece =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'param'; readonly index: number; readonly arrayType?: string }
  | { readonly kind: 'end' };

const ARRAY_CAST = /^::\s*([A-Za-z_][A-Za-z0-9_]*(?:\s+precision)?)\s*\[\]/;

/** Walks `text`, handing over plain SQL, quoted/commented spans (as text), placeholders and `;` ends. */
function scan(text: string, params: boolean): Piece[] {
  const pieces: Piece[] = [];
  let start = 0;
  let i = 0;
  const flush = (to: number) => {
    if (to > start) pieces.push({ kind: 'text', text: text.slice(start, to) });
  };
  while (i < text.length) {
    const c = text[i] as string;
    const next = text[i + 1];
    if (c === "'") {
      // E'…' strings take backslash escapes; standard strings only double the quote.
      const escapes = i > 0 && /[eE]/.test(text[i - 1] as string) && !/[\w$]/.test(text[i - 2] ?? ' ');
      i++;
      while (i < text.length) {
        if (escapes && text[i] === '\\') i += 2;
        else if (text[i] === "'" && text[i + 1] === "'") i += 2;
        else if (text[i] === "'") break;
        else i++;
      }
      i++;
    } else if (c === '"') {
      i++;
      while (i < text.length && !(text[i] === '"' && text[i + 1] !== '"')) i += text[i] === '"' ? 2 : 1;
      i++;
    } else if (c === '-' && next === '-') {
      while (i < text.length && text[i] !== '\n') i++;
    } else if (c === '/' && next === '*') {
      let depth = 1;
      i += 2;
      while (i < text.length && depth > 0) {
        if (text[i] === '/' && text[i + 1] === '*') {
          depth++;
          i += 2;
        } else if (text[i] === '*' && text[i + 1] === '/') {
          depth--;
          i += 2;
        } else i++;
      }
    } else if (c === '$') {
      const placeholder = /^\$(\d+)/.exec(text.slice(i));
      const tag = /^\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$/.exec(text.slice(i));
      if (placeholder && params && !/[\w$]/.test(text[i - 1] ?? ' ')) {
        flush(i);
        const after = i + placeholder[0].length;
        const cast = ARRAY_CAST.exec(text.slice(after));
        pieces.push({
          kind: 'param',
          index: Number(placeholder[1]),
          ...(cast ? { arrayType: (cast[1] as string).replace(/\s+/g, ' ') } : {}),
        });
        i = after + (cast ? cast[0].length : 0);
        start = i;
      } else if (tag && !/[\w$]/.test(text[i - 1] ?? ' ')) {
        const close = text.indexOf(tag[0], i + tag[0].length);
        i = close < 0 ? text.length : close + tag[0].length;
      } else i++;
    } else if (c === ';') {
      flush(i);
      pieces.push({ kind: 'end' });
      i++;
      start = i;
    } else i++;
  }
  flush(text.length);
  return pieces;
}

/**
 * The statements of a text, in order, without their `;` and without the ones that hold only whitespace and
 * comments. `;` inside strings, quoted identifiers, dollar-quoted bodies and comments does not cut.
 */
export function splitStatements(text: string): string[] {
  const statements: string[] = [];
  let current = '';
  for (const piece of scan(text, false)) {
    if (piece.kind === 'end') {
      statements.push(current);
      current = '';
    } else if (piece.kind === 'text') current += piece.text;
  }
  statements.push(current);
  return statements.filter((s) => stripComments(s).trim() !== '').map((s) => s.trim());
}

function stripComments(text: string): string {
  return text.replace(/--[^\n]*/g, '').replace(/\/\*[\s\S]*?\*\//g, '');
}

/** The Data API field of one scalar value. */
export function toField(value: unknown, where: string): SqlParameter['value'] {
  if (value === null || value === undefined) return { isNull: true };
  if (typeof value === 'string') return { stringValue: value };
  if (typeof value === 'boolean') return { booleanValue: value };
  // longValue is a JSON number: beyond 2^53 it would arrive rounded, so such a bigint travels as its digits.
  if (typeof value === 'bigint') {
    return Number.isSafeInteger(Number(value))
      ? { longValue: Number(value) }
      : { stringValue: value.toString() };
  }
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new StoreError(`${where}: ${value} cannot be sent to the database`);
    return Number.isSafeInteger(value) ? { longValue: value } : { doubleValue: value };
  }
  if (value instanceof Date) return { stringValue: value.toISOString() };
  if (Buffer.isBuffer(value)) return { blobValue: new Uint8Array(value) };
  throw new StoreError(`${where}: a ${typeof value} cannot be sent as a Data API parameter`);
}

/** JSON text of an array parameter: elements as JSON scalars, `null` for null, dates as ISO text. */
function arrayJson(values: readonly unknown[], where: string): string {
  return JSON.stringify(
    values.map((v) => {
      if (v === null || v === undefined) return null;
      if (typeof v === 'string' || typeof v === 'boolean') return v;
      if (typeof v === 'number' && Number.isFinite(v)) return v;
      if (typeof v === 'bigint') return v.toString();
      if (v instanceof Date) return v.toISOString();
      throw new StoreError(`${where}: an array element of type ${typeof v} cannot be sent to the database`);
    }),
  );
}

/**
 * `text` with `$n` placeholders and `values` as one Data API statement (see the file comment). Throws
 * `StoreError` for a placeholder without a value, an array without an explicit `::T[]` cast, or a value the
 * Data API cannot carry.
 */
export function toDataApiStatement(text: string, values: readonly unknown[] = []): DataApiStatement {
  const used = new Map<number, SqlParameter>();
  let sql = '';
  for (const piece of scan(text, true)) {
    if (piece.kind === 'text') sql += piece.text;
    else if (piece.kind === 'end') sql += ';';
    else {
      const where = `parameter $${piece.index}`;
      if (piece.index < 1 || piece.index > values.length) {
        throw new StoreError(`The statement uses ${where}, but ${values.length} values were given`);
      }
      const value = values[piece.index - 1];
      const name = `p${piece.index}`;
      if (Array.isArray(value) || piece.arrayType !== undefined) {
        if (piece.arrayType === undefined) {
          throw new StoreError(
            `${where} is an array without an explicit ::type[] cast; the Data API needs one`,
          );
        }
        if (value !== null && !Array.isArray(value)) {
          throw new StoreError(`${where} is cast to ${piece.arrayType}[] but its value is not an array`);
        }
        if (value !== null) used.set(piece.index, { name, value: { stringValue: arrayJson(value, where) } });
        sql +=
          value === null
            ? `NULL::${piece.arrayType}[]`
            : `ARRAY(SELECT e.v::${piece.arrayType} FROM pg_catalog.jsonb_array_elements_text(:${name}::jsonb) WITH ORDINALITY AS e(v, n) ORDER BY e.n)`;
      } else {
        used.set(piece.index, { name, value: toField(value, where) });
        sql += `:${name}`;
      }
    }
  }
  return { sql, parameters: [...used.values()] };
}
