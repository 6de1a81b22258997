import type { RowClaim } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import type { QueryResult, SqlExecutor, SqlParams } from '../src/executor.ts';
import { markInboxDeadStatement, retryInboxStatement } from '../src/inbox-sql.ts';
import {
  MAX_ROWS_PER_STATEMENT,
  markOutboxDeadStatement,
  markOutboxSentStatement,
  retryOutboxStatement,
} from '../src/outbox-sql.ts';
import { outboxState } from '../src/rows.ts';
import { isClaimToken, settle, settleable } from '../src/settle.ts';
import { SCHEMA } from './statements.ts';

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

describe(`a settle of more than ${MAX_ROWS_PER_STATEMENT} items`, () => {
  it('runs one statement per 4,000 distinct items and answers one report in item order', async () => {
    const sizes: number[] = [];
    // Every item's row is processing under its token except id 4001, whose claim is stale.
    const executor: SqlExecutor = {
      async query<R>(_text: string, values?: SqlParams) {
        const items = JSON.parse(String(values?.items?.value)) as { id: string }[];
        sizes.push(items.length);
        const rows = items.filter((i) => i.id !== '4001').map((i) => ({ id: i.id, state: 'sent' }));
        return { rows, rowCount: rows.length } as unknown as QueryResult<R>;
      },
      transaction: (fn) => fn(executor),
      close: async () => {},
    };
    const items = Array.from({ length: 9000 }, (_, i) => ({ ...aClaim(String(i + 1)), destination: 'd' }));

    const report = await settle(
      executor,
      [...items, items[0] as (typeof items)[0]],
      (valid) => markOutboxSentStatement(SCHEMA, valid),
      outboxState,
    );

    expect(sizes).toEqual([4000, 4000, 1000]);
    expect(report.stale).toEqual(['4001']);
    expect(report.settled).toHaveLength(8999);
    expect(report.settled[4000]).toEqual({ id: '4002', state: 'Sent' });
  });
});

describe('error and reason texts', () => {
  // The same text on both dialects: U+0000 and lone surrogates mended to U+FFFD (core's storableErrorText).
  const sent = (statement: { values: SqlParams }) =>
    JSON.parse(String(statement.values.items?.value)) as Record<string, unknown>[];

  it('sends an error or reason holding U+0000 or a lone surrogate mended, the rest as it is', () => {
    const retry = retryOutboxStatement(SCHEMA, [
      { ...aClaim('1'), error: 'HTTP 500: \u0000abc', delayMs: 0 },
      { ...aClaim('2'), error: 'plain', delayMs: 0 },
    ]);
    const dead = markOutboxDeadStatement(SCHEMA, [{ ...aClaim('3'), reason: 'x\uD83D', attempted: true }]);
    const inboxRetry = retryInboxStatement(SCHEMA, [{ ...aClaim('4'), error: '\uDE00', delayMs: 0 }]);
    const inboxDead = markInboxDeadStatement(SCHEMA, [{ ...aClaim('5'), reason: 'a\u0000' }]);

    expect(sent(retry).map((i) => i.error)).toEqual(['HTTP 500: \uFFFDabc', 'plain']);
    expect(sent(dead).map((i) => i.reason)).toEqual(['x\uFFFD']);
    expect(sent(inboxRetry).map((i) => i.error)).toEqual(['\uFFFD']);
    expect(sent(inboxDead).map((i) => i.reason)).toEqual(['a\uFFFD']);
  });
});
