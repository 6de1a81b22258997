/**
 * Characters a terminal acts on instead of showing: C0 controls (ESC starts the sequences that retitle a window,
 * move the cursor or clear the screen), DEL, C1 controls (U+0080–U+009F, CSI among them) and the Unicode bidi
 * controls that reorder what follows (U+061C, U+200E–U+200F, U+202A–U+202E, U+2066–U+2069). Line feed and tab are
 * matched too; `printable` keeps them only where the caller lays out lines itself.
 */
// What JSON.stringify leaves raw but a terminal may act on: DEL, C1 controls and the bidi controls.
const BEYOND_C0 = '\\u007f-\\u009f\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069';
const CONTROLS = new RegExp(`[\\u0000-\\u001f${BEYOND_C0}]`, 'g');
const RAW_IN_JSON = new RegExp(`[${BEYOND_C0}]`, 'g');

/**
 * `text` safe to write to an operator's terminal: every control character (see CONTROLS) as a visible `\u{…}`
 * escape, so a sender's event type, topic, key or a destination's error text cannot act on the terminal. With
 * `keepLines`, line feeds stay (for text QueueBox laid out in lines itself).
 */
export function printable(text: string, options: { readonly keepLines?: boolean } = {}): string {
  return text.replace(CONTROLS, (c) =>
    options.keepLines === true && c === '\n' ? c : `\\u{${c.codePointAt(0)?.toString(16)}}`,
  );
}

/**
 * A JSON text safe for a terminal: the characters JSON.stringify leaves raw but a terminal may act on (DEL, C1, bidi
 * controls) written as `\uXXXX` escapes. Still the same JSON: parsing it gives the same value.
 */
export function terminalSafeJson(json: string): string {
  return json.replace(RAW_IN_JSON, (c) => `\\u${(c.codePointAt(0) ?? 0).toString(16).padStart(4, '0')}`);
}
