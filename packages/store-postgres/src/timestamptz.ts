/**
 * A faster reader of PostgreSQL's `timestamptz` text, for the store's pool (`storeTypeParser`). `pg` reads every
 * timestamp with `postgres-date` (three regular expressions and a `Date.UTC` per value: 0.32–0.38 µs each in
 * isolation here, 0.10–0.13 µs this way); a claimed outbox row carries four of them, and in the store's claim +
 * settle loop they were about an eighth of Node's busy samples outside the socket writes (bench/README.md,
 * "Session 9"). This reads the text PostgreSQL prints with `DateStyle` ISO (its default and what `pg` expects),
 * `YYYY-MM-DD HH:MM:SS[.ffffff]±HH[:MM[:SS]]`, digit by digit, and gives every other text (BC dates, years beyond
 * 9999, `infinity`, another `DateStyle`) to `postgres-date` as before. Its answers are `postgres-date`'s: the same
 * instant, milliseconds truncated (tested against it in timestamptz.test.ts).
 */
import pg from 'pg';

/** PostgreSQL's type OID of `timestamptz`. */
export const TIMESTAMPTZ_OID = 1184;

const defaultParse = pg.types.getTypeParser(TIMESTAMPTZ_OID, 'text') as (text: string) => unknown;

const ZERO = 48;

/** The value of the `count` ASCII digits of `text` at `at`, or -1 when one of them is not a digit. */
function digits(text: string, at: number, count: number): number {
  let value = 0;
  for (let i = at; i < at + count; i++) {
    const d = text.charCodeAt(i) - ZERO;
    if (d < 0 || d > 9) return -1;
    value = value * 10 + d;
  }
  return value;
}

/**
 * Epoch milliseconds of an ISO `timestamptz` text with a four-digit year, or NaN when `text` has another shape.
 * The offset is `+HH`, `+HH:MM` or `+HH:MM:SS` (PostgreSQL prints only what is not zero).
 */
export function isoTimestamptzMs(text: string): number {
  // "YYYY-MM-DD HH:MM:SS" is 19 characters; at least "+HH" follows.
  if (text.length < 22 || text.charCodeAt(4) !== 45 || text.charCodeAt(7) !== 45) return Number.NaN;
  if (text.charCodeAt(10) !== 32 || text.charCodeAt(13) !== 58 || text.charCodeAt(16) !== 58)
    return Number.NaN;
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 2);
  const day = digits(text, 8, 2);
  const hour = digits(text, 11, 2);
  const minute = digits(text, 14, 2);
  const second = digits(text, 17, 2);
  if (year < 1000 || month < 1 || day < 1 || hour < 0 || minute < 0 || second < 0) return Number.NaN;
  let at = 19;
  let ms = 0;
  if (text.charCodeAt(at) === 46) {
    // Fraction: up to six digits; milliseconds are the first three, truncated (as Date.UTC truncates).
    at++;
    const start = at;
    while (at < text.length && at - start < 6) {
      const d = text.charCodeAt(at) - ZERO;
      if (d < 0 || d > 9) break;
      if (at - start < 3) ms = ms * 10 + d;
      at++;
    }
    const read = at - start;
    if (read === 0) return Number.NaN;
    if (read === 1) ms *= 100;
    else if (read === 2) ms *= 10;
  }
  const sign = text.charCodeAt(at);
  if (sign !== 43 && sign !== 45) return Number.NaN;
  const rest = text.length - at - 1;
  if (rest !== 2 && rest !== 5 && rest !== 8) return Number.NaN;
  const offsetHours = digits(text, at + 1, 2);
  const offsetMinutes = rest >= 5 && text.charCodeAt(at + 3) === 58 ? digits(text, at + 4, 2) : 0;
  const offsetSeconds = rest === 8 && text.charCodeAt(at + 6) === 58 ? digits(text, at + 7, 2) : 0;
  if (offsetHours < 0 || offsetMinutes < 0 || offsetSeconds < 0) return Number.NaN;
  if (rest >= 5 && text.charCodeAt(at + 3) !== 58) return Number.NaN;
  if (rest === 8 && text.charCodeAt(at + 6) !== 58) return Number.NaN;
  const offsetMs = (offsetHours * 3600 + offsetMinutes * 60 + offsetSeconds) * 1000;
  const utc = Date.UTC(year, month - 1, day, hour, minute, second, ms);
  return sign === 43 ? utc - offsetMs : utc + offsetMs;
}

/** Reads a `timestamptz` text as `postgres-date` does: a `Date`, or for `infinity` / `-infinity` a number. */
export function readTimestamptz(text: string): unknown {
  const ms = isoTimestamptzMs(text);
  return Number.isNaN(ms) ? defaultParse(text) : new Date(ms);
}
