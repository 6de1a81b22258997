import type { JsonValue } from '@queuebox/core';

/** A raw body read as UTF-8 JSON: the payload, or on failure the text (`null` when the bytes are not UTF-8). */
export type ParsedBody =
  | { readonly ok: true; readonly payload: JsonValue }
  | { readonly ok: false; readonly text: string | null };

/**
 * Reads a raw body as UTF-8 JSON, the one body format both the HTTP and the broker sources accept. Invalid UTF-8 is
 * refused rather than replaced, so a payload is never silently altered.
 */
export function parseJsonBody(body: Uint8Array): ParsedBody {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(body);
  } catch {
    return { ok: false, text: null };
  }
  try {
    return { ok: true, payload: JSON.parse(text) as JsonValue };
  } catch {
    return { ok: false, text };
  }
}
