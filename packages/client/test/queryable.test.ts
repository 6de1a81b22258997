/** The query-function adapters: a statement as a tagged template, and the rows of any driver's answer. */
import { arrayLiteral } from '@queuebox/store-postgres';
import { describe, expect, it } from 'vitest';
import { rowsOf, sqlTemplate, templateOf } from '../src/queryable.ts';

describe('templateOf', () => {
  it('splits at each placeholder and gives its value in the order they occur, repeats included', () => {
    const { strings, values } = templateOf('SELECT $2::int, $1::text, $2::int AS again', ['a', 7]);
    expect([...strings]).toEqual(['SELECT ', '::int, ', '::text, ', '::int AS again']);
    expect(strings.raw).toEqual(['SELECT ', '::int, ', '::text, ', '::int AS again']);
    expect(values).toEqual([7, 'a', 7]);
    expect(Object.isFrozen(strings)).toBe(true);
  });

  it('answers the text as one string when it has no placeholder, and refuses a placeholder without a value', () => {
    const plain = templateOf('SELECT 1', []);
    expect([[...plain.strings], plain.values]).toEqual([['SELECT 1'], []]);
    expect(() => templateOf('SELECT $3', ['a', 'b'])).toThrow(/placeholder \$3 has no value \(2 given\)/);
    expect(() => templateOf('SELECT $0', ['a'])).toThrow(RangeError);
  });
});

describe('sqlTemplate', () => {
  it('calls the tag as JavaScript calls a tagged template, and answers what it answers', async () => {
    const calls: unknown[][] = [];
    const queryable = sqlTemplate(async (strings, ...values) => {
      calls.push([strings.join('?'), values]);
      return [{ id: '1' }];
    });
    expect(await queryable.query('INSERT INTO t VALUES ($1, $2) RETURNING id', ['x', null])).toEqual([
      { id: '1' },
    ]);
    expect(calls).toEqual([['INSERT INTO t VALUES (?, ?) RETURNING id', ['x', null]]]);
    expect(() => sqlTemplate('sql' as never)).toThrow(TypeError);
  });
});

describe('rowsOf', () => {
  it('reads an array, an object with rows, and anything else as no rows', () => {
    expect(rowsOf([{ id: 1 }])).toEqual([{ id: 1 }]);
    expect(rowsOf({ rows: [{ id: 2 }], rowCount: 1 })).toEqual([{ id: 2 }]);
    expect(rowsOf(undefined)).toEqual([]);
    expect(rowsOf({ affectedRows: 1 })).toEqual([]);
  });
});

describe('arrayLiteral', () => {
  it('quotes every string, escapes backslash and double quote, and writes null and numbers bare', () => {
    expect(arrayLiteral(['a', 'b"c', 'd\\e', '', 'NULL', '{x,y}', null, 3, 1.5])).toBe(
      '{"a","b\\"c","d\\\\e","","NULL","{x,y}",NULL,3,1.5}',
    );
    expect(arrayLiteral([])).toBe('{}');
  });
});
