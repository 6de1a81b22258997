import type { JsonValue } from './messages.ts';

/**
 * A number kept as its source text (ES2025 `JSON.rawJSON`, Node ≥ 21): `JSON.stringify` writes `rawJSON` as it is,
 * so a 19-digit id goes out exactly as it came in. A frozen object with a null prototype.
 */
export interface RawJsonNumber {
  readonly rawJSON: string;
}

const json = JSON as JSON & {
  rawJSON(text: string): RawJsonNumber;
  isRawJSON(value: unknown): value is RawJsonNumber;
};

/** Whether `value` is a number kept as its source text by {@link parseJsonText}. */
export function isRawJsonNumber(value: unknown): value is RawJsonNumber {
  return typeof value === 'object' && value !== null && json.isRawJSON(value);
}

// A run of 16 or more digits (with a decimal point among them) or a three-digit exponent: the only texts that can
// hold a number a double does not keep. Everything else takes the plain, faster JSON.parse.
const MAYBE_INEXACT = /\d[\d.]{15}|[eE][+-]?\d{3}/;
const NUMBER = /^-?(\d+)(?:\.(\d+))?(?:[eE][+-]?\d+)?$/;

/**
 * Whether the double `value` parsed from `source` loses what the text says: an integer beyond ±(2^53 − 1) (two
 * different ids would read as one), more than 15 significant digits (a double keeps 15 for certain), or a value
 * that overflowed to ±Infinity or underflowed to 0.
 */
function inexact(value: number, source: string): boolean {
  if (!Number.isFinite(value)) return true;
  const parts = NUMBER.exec(source);
  if (parts === null) return false;
  const [, whole = '', fraction] = parts;
  const integerLiteral = fraction === undefined && !/[eE]/.test(source);
  if (integerLiteral && Number.isSafeInteger(value)) return false;
  const digits = `${whole}${fraction ?? ''}`.replace(/^0+/, '');
  if (value === 0) return digits.replace(/0+$/, '') !== '';
  if (integerLiteral) return true;
  return digits.replace(/0+$/, '').length > 15;
}

/**
 * `JSON.parse`, except that a number a double cannot hold exactly (see above: `9007199254740993`,
 * `1234567890123456789`, `1e400`) is kept as its source text in a `JSON.rawJSON` object, read through the reviver's
 * `context.source` (Node ≥ 21). Idempotency keys read its text and `JSON.stringify` writes it back unchanged, so
 * the payload stored, relayed and delivered carries the number the sender wrote. Throws like `JSON.parse`.
 */
export function parseJsonText(text: string): JsonValue {
  if (!MAYBE_INEXACT.test(text)) return JSON.parse(text) as JsonValue;
  return JSON.parse(text, (_key, value: unknown, context?: { source?: string }) =>
    typeof value === 'number' && context?.source !== undefined && inexact(value, context.source)
      ? json.rawJSON(context.source)
      : value,
  ) as JsonValue;
}
