import type { RowClaim } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { isClaimToken, settleable } from '../src/settle.ts';

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

describe('tokens', () => {
  it('accepts UNIQUEIDENTIFIER text in either case', () => {
    expect(isClaimToken(TOKEN) && isClaimToken(TOKEN.toUpperCase())).toBe(true);
    expect(isClaimToken(`{${TOKEN}}`) || isClaimToken(TOKEN.replaceAll('-', ''))).toBe(false);
  });
});
