/**
 * enqueue on SQL Server without a server (none runs here): the sequence of statements handed to the executor —
 * store-sqlserver's key locks, then its insert — and what a refused lock does. The executor below only records
 * what it is given and answers what SQL Server would; the lock statements themselves are parsed and their
 * parameters checked in store-sqlserver's tests, and they never ran against a real SQL Server in this package.
 */
import { StoreError, StoreUnavailableError } from '@queuebox/core';
import type { QueryResult, SqlExecutor, SqlParams } from '@queuebox/store-sqlserver';
import { describe, expect, it } from 'vitest';
import { outboxKeyLockResource } from '../src/lock-names.ts';
import { toOutboxMessages } from '../src/message.ts';
import { enqueueOnSqlServer } from '../src/sqlserver.ts';

const SCHEMA = 'qb_test';

/** Records each statement and answers `answer(text)`, as SQL Server would for that batch. */
function recordingExecutor(answer: (text: string) => QueryResult<Record<string, unknown>>) {
  const seen: { text: string; values: SqlParams }[] = [];
  const executor: SqlExecutor = {
    async query<R>(text: string, values?: SqlParams) {
      seen.push({ text, values: values ?? {} });
      return answer(text) as unknown as QueryResult<R>;
    },
    transaction: (fn) => fn(executor),
    close: async () => {},
  };
  return { executor, seen };
}

const granted = (text: string) =>
  text.includes('sp_getapplock') ? { rows: [{ status: 0 }], rowCount: 1 } : { rows: [], rowCount: 0 };

describe('enqueueOnSqlServer', () => {
  it("takes the key locks, then runs store-sqlserver's insert; answers the ids in message order", async () => {
    // Prepare: OUTPUT promises no order, so the answer comes back shuffled.
    const { executor, seen } = recordingExecutor((text) =>
      text.includes('sp_getapplock')
        ? { rows: [{ status: 0 }], rowCount: 1 }
        : { rows: [{ id: '12' }, { id: '10' }, { id: '11' }], rowCount: 3 },
    );
    const messages = toOutboxMessages([
      { topic: 'orders.created', key: 'o-1', payload: { n: 1 }, headers: { h: 'v' }, maxAttempts: 3 },
      { topic: 'orders.created', payload: 'two', delayMs: 2500 },
      { topic: 'orders.created', key: 'o-1', payload: null },
    ]);
    // Act
    const ids = await enqueueOnSqlServer(executor, SCHEMA, messages);
    // Assess
    expect(ids).toEqual(['10', '11', '12']);
    expect(seen).toHaveLength(2);
    const [lock, insert] = seen;
    expect(lock?.text).toContain('sys.sp_getapplock');
    expect(Object.values(lock?.values ?? {}).map((p) => p.value)).toEqual([
      10_000,
      outboxKeyLockResource(SCHEMA, 'o-1'),
    ]);
    expect(lock?.text).toContain('@LockTimeout = @lockTimeoutMs;');
    expect(insert?.text).toMatch(/^INSERT INTO \[qb_test\]\.\[outbox\] \(topic, \[key\], payload, headers/);
    expect(JSON.parse(String(insert?.values.messages?.value))).toEqual([
      {
        topic: 'orders.created',
        key: 'o-1',
        payload: '{"n":1}',
        headers: '{"h":"v"}',
        maxAttempts: 3,
        delayMs: 0,
      },
      { topic: 'orders.created', key: null, payload: '"two"', headers: '{}', maxAttempts: 10, delayMs: 2500 },
      { topic: 'orders.created', key: 'o-1', payload: 'null', headers: '{}', maxAttempts: 10, delayMs: 0 },
    ]);
  });

  it('runs only the insert when no message has a key', async () => {
    const { executor, seen } = recordingExecutor((text) =>
      text.includes('sp_getapplock') ? granted(text) : { rows: [{ id: '1' }], rowCount: 1 },
    );
    await enqueueOnSqlServer(executor, SCHEMA, toOutboxMessages([{ topic: 't', payload: 1 }]));
    expect(seen.map((s) => s.text.split(' ')[0])).toEqual(['INSERT']);
  });

  it('stops with a StoreError and inserts nothing when a lock is refused (-3: deadlock victim)', async () => {
    const { executor, seen } = recordingExecutor((text) =>
      text.includes('sp_getapplock') ? { rows: [{ status: -3 }], rowCount: 1 } : { rows: [], rowCount: 0 },
    );
    const messages = toOutboxMessages([{ topic: 't', key: 'k', payload: 1 }]);
    await expect(enqueueOnSqlServer(executor, SCHEMA, messages)).rejects.toThrow(StoreError);
    await expect(enqueueOnSqlServer(executor, SCHEMA, messages)).rejects.toThrow(/sp_getapplock -3/);
    expect(seen.every((s) => s.text.includes('sp_getapplock'))).toBe(true);
  });

  it('passes keyLockTimeoutMs to sp_getapplock, and reads -1 (timed out) as StoreUnavailableError', async () => {
    const { executor, seen } = recordingExecutor((text) =>
      text.includes('sp_getapplock') ? { rows: [{ status: -1 }], rowCount: 1 } : { rows: [], rowCount: 0 },
    );
    const messages = toOutboxMessages([{ topic: 't', key: 'k', payload: 1 }]);

    const error = await enqueueOnSqlServer(executor, SCHEMA, messages, { keyLockTimeoutMs: 2500 }).catch(
      (e: unknown) => e,
    );

    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).message).toMatch(/Timed out after 2500 ms/);
    expect(seen[0]?.values.lockTimeoutMs?.value).toBe(2500);
  });

  it('inserts more than 4,000 messages in statements of at most 4,000 on the same transaction', async () => {
    let next = 1;
    const { executor, seen } = recordingExecutor(() => ({ rows: [], rowCount: 0 }));
    executor.query = async <R>(text: string, values?: SqlParams) => {
      seen.push({ text, values: values ?? {} });
      const count = (JSON.parse(String(values?.messages?.value ?? '[]')) as unknown[]).length;
      const rows = Array.from({ length: count }, () => ({ id: String(next++) }));
      return { rows, rowCount: rows.length } as unknown as QueryResult<R>;
    };
    const messages = toOutboxMessages(Array.from({ length: 8001 }, (_, n) => ({ topic: 't', payload: n })));

    const ids = await enqueueOnSqlServer(executor, SCHEMA, messages);

    expect(seen.map((s) => (JSON.parse(String(s.values.messages?.value)) as unknown[]).length)).toEqual([
      4000, 4000, 1,
    ]);
    expect(ids).toHaveLength(8001);
    expect(ids[8000]).toBe('8001');
  });
});
