/**
 * The one rule for text that QueueBox stores (payload strings and property names, headers, keys, topics): every
 * store must keep it as it is. PostgreSQL refuses U+0000 in text and in jsonb, and refuses the `\uD800` escape of
 * an unpaired UTF-16 surrogate in jsonb (UTF-8 cannot encode one at all, so a text column would silently get
 * U+FFFD). The inbox refuses such a body, the client such a message, the broker sources store such a header as
 * base64.
 */

/** A lone surrogate: a high one not followed by a low one, or a low one not preceded by a high one. */
export const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Why a text cannot be stored as it is: it holds U+0000, or an unpaired UTF-16 surrogate. */
export type UnstorableText = 'nul' | 'lone-surrogate';

/** Why every store cannot keep `text` as it is (see the module comment), or undefined when they all can. */
export function unstorableText(text: string): UnstorableText | undefined {
  if (text.includes('\u0000')) return 'nul';
  if (LONE_SURROGATE.test(text)) return 'lone-surrogate';
  return undefined;
}

/** Whether every store can keep `text` as it is: no U+0000 and no unpaired surrogate. */
export function isStorableText(text: string): boolean {
  return unstorableText(text) === undefined;
}

const UNSTORABLE_GLOBAL = new RegExp(`\\u0000|${LONE_SURROGATE.source}`, 'g');

/**
 * An error or reason text as every store keeps it (`last_error`): U+0000 and each unpaired surrogate become
 * U+FFFD. Unlike a payload, such a text is QueueBox's own record of what happened (a destination's answer, an
 * exception's message), not the application's data, so it is mended rather than refused: refused, one NUL byte
 * in a destination's error body would fail the statement that settles the whole batch.
 */
export function storableErrorText(text: string): string {
  return isStorableText(text) ? text : text.replace(UNSTORABLE_GLOBAL, '\uFFFD');
}
