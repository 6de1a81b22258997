import type { JsonValue } from '@queuebox/core';
import { LONE_SURROGATE, parseJsonText } from '@queuebox/core';

/**
 * Deepest nesting of arrays and objects a stored payload may have. Real webhooks nest a handful of levels; far
 * deeper documents only serve to exhaust the stack of whatever serialises them next (the database driver).
 */
export const MAX_JSON_DEPTH = 256;

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
    text = new TextDecoder('utf-8', { fatal: true }).decode(body);
  } catch {
    return { ok: false, text: null, reason: 'The body is not UTF-8 JSON' };
  }
  let payload: JsonValue;
  try {
    payload = parseJsonText(text);
  } catch {
    return { ok: false, text, reason: 'The body is not JSON' };
  }
  const unstorable = unstorableJsonReason(payload);
  return unstorable === undefined ? { ok: true, payload } : { ok: false, text, reason: unstorable };
}

function stringProblem(value: string): string | undefined {
  if (value.includes('\u0000')) return 'The body holds a U+0000 character, which the database cannot store';
  if (LONE_SURROGATE.test(value)) return 'The body holds an unpaired UTF-16 surrogate (\\uD800–\\uDFFF)';
  return undefined;
}

/**
 * Why a parsed JSON value cannot be stored as it is (PostgreSQL's jsonb refuses U+0000 and unpaired surrogates;
 * nesting beyond {@link MAX_JSON_DEPTH} is refused on purpose), or undefined. Walks without recursion, so a deep
 * document cannot overflow the stack here either.
 */
export function unstorableJsonReason(value: JsonValue): string | undefined {
  const stack: { value: JsonValue; depth: number }[] = [{ value, depth: 0 }];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const current = item.value;
    if (typeof current === 'string') {
      const problem = stringProblem(current);
      if (problem) return problem;
      continue;
    }
    if (current === null || typeof current !== 'object') continue;
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
