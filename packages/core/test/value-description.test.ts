import { describe, expect, it } from 'vitest';
import { describeValue } from '../src/value-description.ts';

describe('describeValue', () => {
  class Order {}

  it.each([
    [undefined, 'undefined'],
    [null, 'null'],
    [true, 'true'],
    [5, '5'],
    [-1, '-1'],
    [Number.NaN, 'NaN'],
    [5n, 'the BigInt 5n'],
    ['', 'an empty string'],
    ['5', 'the string "5"'],
    ['x'.repeat(41), 'a string of 41 characters'],
    [Symbol('s'), 'a symbol'],
    [() => 1, 'a function'],
    [[1, 2], 'an array of 2 items'],
    [[1], 'an array of 1 item'],
    [{ a: 1 }, 'an object'],
    [Object.create(null), 'an object'],
    [new Map(), 'a Map'],
    [new Headers(), 'a Headers'],
    [new Error('x'), 'an Error'],
    [new Order(), 'an Order'],
  ])('describes %s as %s', (value, text) => {
    expect(describeValue(value)).toBe(text);
  });

  it('describes a revoked proxy as an object instead of throwing', () => {
    const revoked = Proxy.revocable({}, {});
    revoked.revoke();
    expect(describeValue(revoked.proxy)).toBe('an object');
  });
});
