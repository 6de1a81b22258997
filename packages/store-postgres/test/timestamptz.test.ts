import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { isoTimestamptzMs, readTimestamptz } from '../src/timestamptz.ts';

const pad = (n: number, width: number) => String(n).padStart(width, '0');

/** A deterministic generator (mulberry32), so a failure names a reproducible text. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Texts as PostgreSQL prints timestamptz with DateStyle ISO: every fraction length, offsets with minutes and seconds. */
function texts(count: number): string[] {
  const next = random(20261205);
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const date = `${pad(int(1000, 9999), 4)}-${pad(int(1, 12), 2)}-${pad(int(1, 28), 2)}`;
    const time = `${pad(int(0, 23), 2)}:${pad(int(0, 59), 2)}:${pad(int(0, 59), 2)}`;
    const digits = int(0, 6);
    const fraction = digits === 0 ? '' : `.${pad(int(0, 10 ** digits - 1), digits)}`;
    const sign = next() < 0.5 ? '+' : '-';
    const shape = int(0, 2);
    const offset =
      shape === 0
        ? pad(int(0, 14), 2)
        : shape === 1
          ? `${pad(int(0, 14), 2)}:${pad(int(0, 59), 2)}`
          : `${pad(int(0, 14), 2)}:${pad(int(0, 59), 2)}:${pad(int(0, 59), 2)}`;
    out.push(`${date} ${time}${fraction}${sign}${offset}`);
  }
  return out;
}

/** pg's own reader of timestamptz text (postgres-date). */
const postgresDate = pg.types.getTypeParser(1184, 'text') as (text: string) => unknown;

const asMs = (value: unknown) => (value instanceof Date ? value.getTime() : value);

describe('timestamptz reader', () => {
  it("reads PostgreSQL's ISO texts to the instant postgres-date reads", () => {
    const samples = [
      '2026-12-05 17:06:00.123456+00',
      '2026-12-05 17:06:00+00',
      '2026-12-05 17:06:00.5+00',
      '2026-12-05 17:06:00.05+05:30',
      '2024-02-29 23:59:59.999999-03:30',
      '1883-11-18 12:03:57.5-04:56:02',
      '2000-01-01 00:00:00.000001+14',
      '9999-12-31 23:59:59.999999+00',
      ...texts(20_000),
    ];
    for (const text of samples) {
      const fast = isoTimestamptzMs(text);
      expect(Number.isNaN(fast), text).toBe(false);
      expect(fast, text).toBe(asMs(postgresDate(text)));
    }
  });

  it('leaves every other text to postgres-date, answering what it answers', () => {
    const others = [
      'infinity',
      '-infinity',
      '0044-03-15 12:00:00+00 BC',
      '12026-12-05 17:06:00+00',
      '2026-12-05 17:06:00.1234567+00',
      '2026-12-05T17:06:00Z',
      '2026-12-05 17:06:00',
      '2026-12-05',
    ];
    for (const text of others) {
      expect(Number.isNaN(isoTimestamptzMs(text)), text).toBe(true);
      expect(asMs(readTimestamptz(text)), text).toStrictEqual(asMs(postgresDate(text)));
    }
  });

  it('answers a Date of the instant, milliseconds truncated', () => {
    expect((readTimestamptz('2026-12-05 17:06:00.123956+00') as Date).toISOString()).toBe(
      '2026-12-05T17:06:00.123Z',
    );
    expect((readTimestamptz('2026-12-05 18:36:00-01:30') as Date).toISOString()).toBe(
      '2026-12-05T20:06:00.000Z',
    );
  });
});
