/**
 * The seeded generator of the hostile-input suite: `QUEUEBOX_FUZZ_SEED` replays a seed (the same idea as
 * packages/inbox/test/fuzz.test.ts). Nothing here imports vitest.
 */

/** The seed of this run: `QUEUEBOX_FUZZ_SEED`, else a fixed one. */
export const SEED = Number(process.env.QUEUEBOX_FUZZ_SEED ?? 20261130);

export function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
export const next = random(SEED);
export const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
export function text(max: number, alphabet: string): string {
  // By code point, so a character outside the BMP is never split into a lone surrogate.
  const characters = [...alphabet];
  let out = '';
  const length = Math.floor(next() * max);
  for (let i = 0; i < length; i += 1) out += characters[Math.floor(next() * characters.length)];
  return out;
}
export const PRINTABLE = ' !"#$%&\'()*+,-./0123456789:;<=>?@ABCXYZ[\\]^_`abcxyz{|}~';
export const UNICODE = `${PRINTABLE}éßñ€中文😀\t\n`;

/** A random JSON value (no U+0000, no lone surrogates: those have their own test). */
export function aJsonValue(depth: number): unknown {
  const kind = depth > 4 ? Math.floor(next() * 4) : Math.floor(next() * 6);
  switch (kind) {
    case 0:
      return null;
    case 1:
      return next() < 0.5;
    case 2:
      return next() < 0.5 ? Math.floor((next() - 0.5) * 1e9) : Math.floor(next() * 1e6) / 1e3;
    case 3:
      return text(20, UNICODE);
    case 4:
      return Array.from({ length: Math.floor(next() * 4) }, () => aJsonValue(depth + 1));
    default: {
      const object: Record<string, unknown> = {};
      for (let i = Math.floor(next() * 4); i > 0; i -= 1) {
        const key = text(8, UNICODE);
        if (key !== '__proto__') object[key] = aJsonValue(depth + 1);
      }
      return object;
    }
  }
}

/** SQL metacharacters and injection attempts; no CR/LF where the value ends up in a header. */
export const NASTY = [
  "'; DROP TABLE inbox; --",
  '" OR "1"="1',
  "' OR '1'='1' --",
  '1; SELECT pg_sleep(10)',
  '$1 $2 $$body$$',
  '\\',
  "\\'; --",
  '%_%',
  '/* */ UNION SELECT * FROM outbox',
  '); DELETE FROM outbox; --',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion the server must store as text
  '`whoami` $(id) ${HOME}',
  '{{ source }} {{ eventType }}',
  "E'\\x27' ::jsonb",
  '[0] $.a ?(@ == 1)',
  "Robert'); DROP TABLE students;--",
];
/** Values for fields that are not sent as headers (event type, aggregate id) may also hold line breaks. */
export const NASTY_MULTILINE = ["a'\r\nb; --", '\t\n\u000b\f', 'line1\nDROP TABLE inbox'];
