import { describe, expect, it } from 'vitest';
import { isRawJsonNumber, parseJsonText } from '../src/index.ts';

const numberAt = (text: string): unknown => (parseJsonText(`{"n":${text}}`) as { n: unknown }).n;

describe('parseJsonText', () => {
  it.each([
    ['9007199254740993', 'an odd integer above 2^53'],
    ['1234567890123456789', 'a 19-digit id'],
    ['-9007199254740993', 'its negative'],
    ['1e400', 'a value that overflows to Infinity'],
    ['1e-400', 'a value that underflows to 0'],
    ['0.12345678901234567890123', 'more digits than a double keeps'],
  ])('keeps %s as its source text (%s)', (text) => {
    // Act
    const value = numberAt(text);

    // Assess
    expect(isRawJsonNumber(value)).toBe(true);
    expect(JSON.stringify({ n: value })).toBe(`{"n":${text}}`);
  });

  it.each([
    ['9007199254740992', 9007199254740992],
    ['9007199254740991', Number.MAX_SAFE_INTEGER],
    ['0.30000000000000004', 0.30000000000000004],
    ['3.141592653589793', Math.PI],
    ['1000000000000000000000', 1e21],
    ['1e+21', 1e21],
    ['5e-324', 5e-324],
    ['-2.5e-7', -2.5e-7],
    ['1.7976931348623157e+308', Number.MAX_VALUE],
    [
      '179769313486231570000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000',
      Number.MAX_VALUE,
    ],
    ['-0', -0],
    ['12.50', 12.5],
  ])('reads %s as the plain number it denotes exactly', (text, expected) => {
    expect(numberAt(text)).toBe(expected);
  });

  it('keeps two ids that one double would merge apart', () => {
    // Act
    const a = JSON.stringify(parseJsonText('{"id": 9007199254740993}'));
    const b = JSON.stringify(parseJsonText('{"id": 9007199254740992}'));

    // Assess
    expect(a).toBe('{"id":9007199254740993}');
    expect(b).toBe('{"id":9007199254740992}');
  });
});
