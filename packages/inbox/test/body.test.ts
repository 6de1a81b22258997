import { describe, expect, it } from 'vitest';
import {
  MAX_JSON_DEPTH,
  MAX_NUMBER_GROWTH_BYTES,
  numberGrowth,
  parseJsonBody,
  unstorableJsonReason,
} from '../src/body.ts';

const bytes = (text: string) => new TextEncoder().encode(text);
const nested = (depth: number) => `${'['.repeat(depth)}1${']'.repeat(depth)}`;

describe('parseJsonBody', () => {
  it('accepts ordinary JSON, including escaped astral characters and the deepest allowed nesting', () => {
    // Prepare
    const bodies = ['{"a":[1,{"b":"x"}]}', '"\\ud83d\\ude00"', nested(MAX_JSON_DEPTH), '{"k\\u00e9":null}'];
    // Act
    const parsed = bodies.map((b) => parseJsonBody(bytes(b)));
    // Assess
    expect(parsed.map((p) => p.ok)).toEqual([true, true, true, true]);
  });

  it('refuses JSON no store can keep, saying why, without overflowing the stack on deep documents', () => {
    // Prepare
    const cases: [string, RegExp][] = [
      [nested(MAX_JSON_DEPTH + 1), /nests deeper than 256/],
      [nested(200_000), /nests deeper/],
      // A number kept as its source text makes the parser recurse: a deep document holding one is still too deep.
      [`${'{"a":'.repeat(100_000)}1e400${'}'.repeat(100_000)}`, /nests deeper than 256/],
      ['{"a":"x\\u0000y"}', /U\+0000/],
      ['{"x\\u0000":1}', /U\+0000/],
      ['["\\ud800"]', /unpaired UTF-16 surrogate/],
      ['{"a":"\\udc00z"}', /unpaired UTF-16 surrogate/],
      ['{', /not JSON/],
    ];
    for (const [body, reason] of cases) {
      // Act
      const parsed = parseJsonBody(bytes(body));
      // Assess
      expect(parsed.ok, body.slice(0, 40)).toBe(false);
      if (!parsed.ok) expect(parsed.reason).toMatch(reason);
    }
  });

  it('refuses a number whose text PostgreSQL reads with a scale over 16383, trailing zeros included', () => {
    // Prepare: the value of each refused text is in range; the digits after the point minus the exponent are not.
    const refused = ['1.0e-16383', '100e-16385', '0.10e-16382', '1e-16384', '5e-99999999999999999999'];
    const taken = ['1e-16383', '0.1e-16382', '1.000e131071', '123e-16383', '1e400'];
    // Act
    const verdicts = [...refused, ...taken].map((n) => [n, parseJsonBody(bytes(`{"n":${n}}`)).ok]);
    // Assess
    expect(verdicts).toEqual([...refused.map((n) => [n, false]), ...taken.map((n) => [n, true])]);
  });

  it('refuses numbers that, printed in full as the database prints them, make the body more than MAX_NUMBER_GROWTH_BYTES longer', () => {
    // Prepare: jsonb keeps 1e131071 in a few bytes and prints it as 131,072 digits at every read; 4,200 of them in a
    // 38 KB body made each claim of the relayed row read 550 MB of text and crash the process (outside audit).
    const many = (n: number, text: string) => `[${Array.from({ length: n }, () => text).join(',')}]`;
    const perHuge = numberGrowth('1e131071');
    const hugeTaken = Math.floor(MAX_NUMBER_GROWTH_BYTES / perHuge);
    // Doubles too: 1e300 is a double (kept as a JS number) and is printed with 301 digits.
    const perDouble = numberGrowth(String(1e300));
    const doublesTaken = Math.floor(MAX_NUMBER_GROWTH_BYTES / perDouble);
    // Act
    const verdicts = [
      parseJsonBody(bytes(many(4_200, '1e131071'))),
      parseJsonBody(bytes(many(hugeTaken + 1, '1e131071'))),
      parseJsonBody(bytes(many(hugeTaken, '1e131071'))),
      parseJsonBody(bytes(many(doublesTaken + 1, '1e300'))),
      parseJsonBody(bytes(many(doublesTaken, '1e300'))),
      parseJsonBody(bytes(many(doublesTaken + 1, '-5e-300'))),
    ];
    // Assess
    expect(verdicts.map((v) => v.ok)).toEqual([false, false, true, false, true, false]);
    const first = verdicts[0];
    expect(first?.ok === false && first.reason).toMatch(/written out in full/);
  });

  it('counts a number as long as PostgreSQL prints it (lengths read from PostgreSQL 15, jsonb::text)', () => {
    // Prepare: [text, length PostgreSQL printed]; numbers printed shorter than written grow by 0
    const printed: [string, number][] = [
      ['1e400', 401],
      ['1e-400', 402],
      ['123.45', 6],
      ['-1.5e10', 12],
      ['0e-400', 402],
      ['100e-5', 7],
      ['5e-324', 326],
      ['1.7976931348623157e308', 309],
      ['1e+21', 22],
      ['0.1e-16382', 16385],
      ['1.000e131071', 131072],
      ['-123e-16381', 16384],
    ];
    // Act + Assess
    for (const [text, length] of printed)
      expect([text, text.length + numberGrowth(text)]).toEqual([text, length]);
    expect(numberGrowth('1.000e3')).toBe(0);
  });

  it('refuses bytes that are not UTF-8 with no text', () => {
    const parsed = parseJsonBody(new Uint8Array([0x7b, 0xff, 0x7d]));
    expect(parsed).toEqual({ ok: false, text: null, reason: 'The body is not UTF-8 JSON' });
  });

  it('checks values built in code the same way', () => {
    expect(unstorableJsonReason({ a: ['ok', { b: 'x\u0000' }] })).toMatch(/U\+0000/);
    expect(unstorableJsonReason({ a: ['ok', { b: '\u{1F600}' }] })).toBeUndefined();
  });
});
