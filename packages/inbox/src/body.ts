import type { JsonValue, UnstorableText } from '@queuebox/core';
import { isRawJsonNumber, parseJsonText, unstorableText } from '@queuebox/core';

/**
 * Deepest nesting of arrays and objects a stored payload may have. Real webhooks nest a handful of levels; far
 * deeper documents only serve to exhaust the stack of whatever serialises them next (the database driver).
 */
export const MAX_JSON_DEPTH = 256;

/** Strict UTF-8: refuses invalid bytes. Without `stream`, each decode() stands alone, so one decoder serves all. */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** A raw body read as UTF-8 JSON: the payload, or on failure the text (`null` when the bytes are not UTF-8). */
export type ParsedBody =
  | { readonly ok: true; readonly payload: JsonValue }
  | { readonly ok: false; readonly text: string | null; readonly reason: string };

/**
 * Reads a raw body as UTF-8 JSON, the one body format both the HTTP and the broker sources accept. Invalid UTF-8 is
 * refused rather than replaced, so a payload is never silently altered; so is JSON that no store can keep
 * (see {@link unstorableJsonReason}). Numbers a double cannot hold exactly keep their source text (core's
 * `parseJsonText`), in idempotency keys and in the payload.
 */
export function parseJsonBody(body: Uint8Array): ParsedBody {
  let text: string;
  try {
    text = UTF8.decode(body);
  } catch {
    return { ok: false, text: null, reason: 'The body is not UTF-8 JSON' };
  }
  let payload: JsonValue;
  try {
    payload = parseJsonText(text);
  } catch (error) {
    // JSON.parse reads any depth, but the reviver that keeps long numbers recurses: far too deep a document
    // holding one overflows the stack. It is JSON; what is wrong with it is its depth.
    const reason =
      error instanceof RangeError
        ? `The body nests deeper than ${MAX_JSON_DEPTH} levels`
        : 'The body is not JSON';
    return { ok: false, text, reason };
  }
  const unstorable = unstorableJsonReason(payload);
  return unstorable === undefined ? { ok: true, payload } : { ok: false, text, reason: unstorable };
}

const NUMBER_TEXT = /^-?(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/**
 * PostgreSQL's numeric (jsonb numbers): at most 131072 digits before the decimal point, and a display scale of at
 * most 16383 (NUMERIC_DSCALE_MAX, a 14-bit field of the stored value).
 */
const HIGHEST_DIGIT = 131_071;
const MAX_SCALE = 16_383;

/**
 * Why a number kept as its source text (core's `parseJsonText`: `1e400`, a 30-digit id) cannot be stored, or
 * undefined: jsonb refuses a number beyond numeric's range (`1e1000000`), which would fail the insert itself. The
 * scale is the one PostgreSQL reads from the text, the digits after the point minus the exponent, trailing zeros
 * included: `1.0e-16383` and `100e-16385` denote the storable 10^-16383 but are written with a scale of 16384 and
 * 16385, and PostgreSQL refuses them as they are written ("value overflows numeric format"). The text is what is
 * stored, so it is the text that is checked.
 */
function numberProblem(source: string): string | undefined {
  const parts = NUMBER_TEXT.exec(source);
  if (parts === null) return undefined;
  const [, whole = '', fraction = '', exponent = '0'] = parts;
  if (fraction.length - Number(exponent) > MAX_SCALE) {
    return `The body holds a number written with more than ${MAX_SCALE} digits after the decimal point (trailing zeros count), which the database cannot store`;
  }
  const digits = `${whole}${fraction}`;
  const first = digits.search(/[1-9]/);
  if (first === -1) return undefined;
  // Position of a digit: its power of ten. The digit at index i stands for 10^(whole.length - 1 - i + exponent).
  return whole.length - 1 - first + Number(exponent) > HIGHEST_DIGIT
    ? 'The body holds a number beyond the range the database stores (10^-16383 … 10^131072)'
    : undefined;
}

/**
 * How much longer a payload's numbers may make it when written out in full: the database keeps a number in a few
 * bytes whatever its exponent, but prints it without one (jsonb's numeric: `1e300` is 301 digits), and every read of
 * the payload as text (the relay's copy, a claim, a delivery) gets it printed. A 38 KB webhook of 4,200 numbers of
 * `1e131071` was stored, and each claim of its outbox row then read about 550 MB of text, more than a string may
 * hold: the process crashed, and again after every lease (an outside audit of encodings).
 */
export const MAX_NUMBER_GROWTH_BYTES = 1_048_576;

/**
 * How many characters longer `source` (a JSON number: a kept source text, or a double's `String()`) is as PostgreSQL
 * prints it (plain notation: the integer digits, then the scale's digits after a point, trailing zeros kept), or 0.
 */
export function numberGrowth(source: string): number {
  const parts = NUMBER_TEXT.exec(source.replace('e+', 'e'));
  if (parts === null) return 0;
  const [, whole = '', fraction = '', exponentText = '0'] = parts;
  const exponent = Number(exponentText);
  const digits = `${whole}${fraction}`.replace(/^0+/, '').length;
  const integerDigits = Math.max(1, digits + exponent - fraction.length);
  const scale = Math.max(0, fraction.length - exponent);
  const printed = (source.startsWith('-') ? 1 : 0) + integerDigits + (scale > 0 ? 1 + scale : 0);
  return Math.max(0, printed - source.length);
}

/** Whether a double is written with an exponent (`String(n)`: at 1e21 and more, below 1e-6). */
function writtenWithExponent(n: number): boolean {
  const magnitude = Math.abs(n);
  return magnitude >= 1e21 || (magnitude < 1e-6 && magnitude !== 0);
}

const TEXT_PROBLEMS: Readonly<Record<UnstorableText, string>> = {
  nul: 'The body holds a U+0000 character, which the database cannot store',
  'lone-surrogate': 'The body holds an unpaired UTF-16 surrogate (\\uD800–\\uDFFF)',
};

function numberGrowthProblem(): string {
  return `The body holds numbers that, written out in full as the database prints them (1e300 is 301 digits), make it more than ${MAX_NUMBER_GROWTH_BYTES} bytes longer`;
}

function stringProblem(value: string): string | undefined {
  const problem = unstorableText(value);
  return problem === undefined ? undefined : TEXT_PROBLEMS[problem];
}

/**
 * Why a parsed JSON value cannot be stored as it is (strings and property names by core's `unstorableText`, the
 * rule the client applies too; jsonb also refuses numbers beyond numeric's range; numbers that printed in full would
 * make it more than {@link MAX_NUMBER_GROWTH_BYTES} longer are refused on purpose;
 * nesting beyond {@link MAX_JSON_DEPTH} is refused on purpose), or undefined. Walks without recursion, so a deep
 * document cannot overflow the stack here either.
 */
export function unstorableJsonReason(value: JsonValue): string | undefined {
  const stack: { value: JsonValue; depth: number }[] = [{ value, depth: 0 }];
  let growth = 0;
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const current = item.value;
    if (typeof current === 'string') {
      const problem = stringProblem(current);
      if (problem) return problem;
      continue;
    }
    if (typeof current === 'number') {
      if (writtenWithExponent(current)) {
        growth += numberGrowth(String(current));
        if (growth > MAX_NUMBER_GROWTH_BYTES) return numberGrowthProblem();
      }
      continue;
    }
    if (current === null || typeof current !== 'object') continue;
    if (isRawJsonNumber(current)) {
      const problem = numberProblem(current.rawJSON);
      if (problem) return problem;
      growth += numberGrowth(current.rawJSON);
      if (growth > MAX_NUMBER_GROWTH_BYTES) return numberGrowthProblem();
      continue;
    }
    const depth = item.depth + 1;
    if (depth > MAX_JSON_DEPTH) return `The body nests deeper than ${MAX_JSON_DEPTH} levels`;
    if (Array.isArray(current)) {
      for (const element of current) stack.push({ value: element, depth });
      continue;
    }
    for (const [key, element] of Object.entries(current)) {
      const problem = stringProblem(key);
      if (problem) return problem;
      stack.push({ value: element, depth });
    }
  }
  return undefined;
}
