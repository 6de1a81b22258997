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
const NUMBER = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/**
 * The decimal value a JSON number text denotes, in one canonical form (sign, significant digits, exponent), so
 * `1000000000000000000000` and `1e+21` compare equal and `1234567890123456789` and `1234567890123456800` do not.
 */
function canonicalDecimal(text: string): string | undefined {
  const parts = NUMBER.exec(text);
  if (parts === null) return undefined;
  const [, sign = '', whole = '', fraction = '', exponent = '0'] = parts;
  let digits = `${whole}${fraction}`.replace(/^0+/, '');
  if (digits === '') return '0';
  let scale = Number(exponent) - fraction.length;
  const trailing = /0+$/.exec(digits)?.[0].length ?? 0;
  digits = digits.slice(0, digits.length - trailing);
  scale += trailing;
  return `${sign}${digits}e${scale}`;
}

/**
 * Whether the double `value` parsed from `source` loses what the text says: the shortest text of the double
 * (`String(value)`) denotes another decimal than the source — an integer beyond ±(2^53 − 1) such as
 * `9007199254740993` (two different ids would read as one), more digits than a double keeps, or a value that
 * overflowed to ±Infinity or underflowed to 0. `0.30000000000000004` or `1e+21` written out in full are exact.
 */
function inexact(value: number, source: string): boolean {
  if (!Number.isFinite(value)) return true;
  const written = canonicalDecimal(source);
  return written !== undefined && written !== canonicalDecimal(String(value));
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
