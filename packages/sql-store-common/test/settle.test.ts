import { MessageState, type RowClaim, type RowId } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { compareIds } from '../src/rows.ts';
import { isRowId, settleable, settleReport, uniqueClaims } from '../src/settle.ts';

const TOKEN = '6f1c2b8e-3d4a-4f5b-9c6d-7e8f9a0b1c2d';

function aClaim(id: string, claimToken = TOKEN): RowClaim {
  return { id, claimToken };
}

describe('what a settle sends', () => {
  it('sends by default every item whose id can name a row, whatever its token', () => {
    const { unique, valid } = settleable([aClaim('abc'), aClaim('7', 'not-a-guid'), aClaim('8')]);

    expect(valid).toEqual([aClaim('7', 'not-a-guid'), aClaim('8')]);
    expect(unique).toHaveLength(3);
  });

  it("refuses an id that is not a string with a TypeError naming it: a caller's mistake, not a lost claim", () => {
    const numeric = { id: 42, claimToken: TOKEN } as unknown as RowClaim;

    expect(() => settleable([aClaim('7'), numeric])).toThrow(TypeError);
    expect(() => settleable([numeric])).toThrow(/id must be the row id as a decimal string.*\(got 42\)/);
  });

  it("asks the dialect's isSettleable when given one", () => {
    const { valid } = settleable([aClaim('7'), aClaim('8')], (item) => item.id === '8');

    expect(valid).toEqual([aClaim('8')]);
  });
});

describe('what a settle reports', () => {
  it('reports rows the server changed as settled with their new state, the others as stale, in item order', () => {
    const states = new Map<RowId, MessageState>([
      ['2', MessageState.Dead],
      ['3', MessageState.Pending],
    ]);

    const report = settleReport([aClaim('3'), aClaim('1'), aClaim('2'), aClaim('x')], states);

    expect(report).toEqual({
      settled: [
        { id: '3', state: MessageState.Pending },
        { id: '2', state: MessageState.Dead },
      ],
      stale: ['1', 'x'],
    });
  });
});

describe('ids', () => {
  it('accepts BIGINT identity values only', () => {
    expect(['1', '42', '9223372036854775807'].every(isRowId)).toBe(true);
    expect(['0', '-1', '01', '1.0', ' 1', '9223372036854775808', ''].some(isRowId)).toBe(false);
  });

  it('keeps the first claim of each id', () => {
    expect(uniqueClaims([aClaim('1'), aClaim('2'), aClaim('1', 'other')])).toEqual([
      aClaim('1'),
      aClaim('2'),
    ]);
  });

  it('sorts ids as numbers, not as text', () => {
    expect(['10', '9', '100', '9007199254740993', '9007199254740992'].sort(compareIds)).toEqual([
      '9',
      '10',
      '100',
      '9007199254740992',
      '9007199254740993',
    ]);
  });
});
