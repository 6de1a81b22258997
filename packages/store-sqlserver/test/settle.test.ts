import { MessageState, type RowClaim, type RowId } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { compareIds } from '../src/rows.ts';
import { isClaimToken, isRowId, settleable, settleReport, uniqueClaims } from '../src/settle.ts';

const TOKEN = '6f1c2b8e-3d4a-4f5b-9c6d-7e8f9a0b1c2d';

function aClaim(id: string, claimToken = TOKEN): RowClaim {
  return { id, claimToken };
}

describe('what a settle sends', () => {
  it('sends each id once, the first item for it winning', () => {
    const { unique, valid } = settleable([aClaim('5'), aClaim('6'), aClaim('5', TOKEN.toUpperCase())]);

    expect(unique).toEqual([aClaim('5'), aClaim('6')]);
    expect(valid).toEqual([aClaim('5'), aClaim('6')]);
  });

  it('keeps back ids and tokens no row could have, which SQL Server would fail the statement converting', () => {
    const items = [
      aClaim('abc'),
      aClaim('0'),
      aClaim('9223372036854775808'),
      aClaim('7', 'not-a-guid'),
      aClaim('8'),
    ];

    const { unique, valid } = settleable(items);

    expect(valid).toEqual([aClaim('8')]);
    expect(unique).toHaveLength(5);
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

describe('ids and tokens', () => {
  it('accepts BIGINT identity values only', () => {
    expect(['1', '42', '9223372036854775807'].every(isRowId)).toBe(true);
    expect(['0', '-1', '01', '1.0', ' 1', '9223372036854775808', ''].some(isRowId)).toBe(false);
  });

  it('accepts UNIQUEIDENTIFIER text in either case', () => {
    expect(isClaimToken(TOKEN) && isClaimToken(TOKEN.toUpperCase())).toBe(true);
    expect(isClaimToken(`{${TOKEN}}`) || isClaimToken(TOKEN.replaceAll('-', ''))).toBe(false);
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
