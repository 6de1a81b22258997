/**
 * enqueue on SQL Server without a server (none runs here): the key-lock batches through a real T-SQL parser
 * (node-sql-parser, as store-sqlserver's tests do), their parameters, and the sequence of statements handed to
 * the executor. The executor below only records what it is given and answers what SQL Server would; the
 * statements themselves never ran against a real SQL Server in this package.
 */
import { createRequire } from 'node:module';
import { StoreError } from '@queuebox/core';
import type { QueryResult, SqlExecutor, SqlParams } from '@queuebox/store-sqlserver';
import mssql from 'mssql';
import { describe, expect, it } from 'vitest';
import { outboxKeyLockResource } from '../src/lock-names.ts';
import { toOutboxMessages } from '../src/message.ts';
import {
  enqueueOnSqlServer,
  LOCKS_PER_BATCH,
  lockOutboxKeysStatement,
  lockStatements,
} from '../src/sqlserver.ts';

const require = createRequire(import.meta.url);
const { Parser } = require('node-sql-parser/build/transactsql') as typeof import('node-sql-parser');
const parser = new Parser();

/**
 * Parses one line of T-SQL. node-sql-parser 5.4 reads `EXEC proc` but not `EXEC @status = proc`, and no statement
 * after an IF in the same text: so each line is parsed alone, and the status assignment is set aside after its
 * shape was checked.
 */
function parseLine(line: string): { type: string } {
  const execStatus = /\bEXEC @status = (?=sys\.sp_getapplock )/;
  const text = line.replace(execStatus, 'EXEC ');
  return parser.parse(text, { database: 'transactsql' }).ast as unknown as { type: string };
}

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

describe('lockOutboxKeysStatement', () => {
  it('parses line by line as T-SQL: DECLARE, one IF … EXEC sp_getapplock per resource, SELECT', () => {
    // Act
    const { text } = lockOutboxKeysStatement(['r0', 'r1']);
    // Assess
    const lines = text.split('\n');
    expect(lines.map((line) => parseLine(line).type)).toEqual(['declare', 'if', 'if', 'select']);
    expect(lines[1]).toBe(
      "IF @status >= 0 EXEC @status = sys.sp_getapplock @Resource = @resource0, @LockMode = N'Exclusive', @LockOwner = N'Transaction';",
    );
    expect(lines[3]).toBe('SELECT @status AS status;');
  });

  it('passes every resource as an NVARCHAR(255) parameter named in the text, never in the text', () => {
    const { text, values } = lockOutboxKeysStatement(['queuebox.outbox-key:a', "it's"]);
    expect(Object.keys(values)).toEqual(['resource0', 'resource1']);
    for (const [name, param] of Object.entries(values)) {
      expect(text).toContain(`@Resource = @${name},`);
      const type = param.type as { type: unknown; length: number };
      expect([type.type, type.length]).toEqual([mssql.NVarChar, 255]);
    }
    expect(values.resource1?.value).toBe("it's");
    expect(text).not.toContain("it's");
  });
});

describe('lockStatements', () => {
  it('locks nothing for unkeyed messages', () => {
    expect(lockStatements(SCHEMA, toOutboxMessages([{ topic: 't', payload: 1 }]))).toEqual([]);
  });

  it('locks each key once, in sorted resource order, at most 500 per batch', () => {
    // Prepare
    const keys = Array.from({ length: 1001 }, (_, i) => `key-${i}`);
    const messages = toOutboxMessages([...keys, ...keys].map((key) => ({ topic: 't', key, payload: 1 })));
    // Act
    const batches = lockStatements(SCHEMA, messages);
    // Assess
    expect(batches.map((b) => Object.keys(b.values).length)).toEqual([LOCKS_PER_BATCH, LOCKS_PER_BATCH, 1]);
    const resources = batches.flatMap((b) => Object.values(b.values).map((p) => p.value as string));
    expect(resources).toEqual(keys.map((key) => outboxKeyLockResource(SCHEMA, key)).sort());
  });

  it('names a resource that fits sp_getapplock for the longest schema and key', () => {
    const resource = outboxKeyLockResource('s'.repeat(63), '🔑'.repeat(225));
    expect(resource.length).toBeLessThanOrEqual(255);
    expect(resource).toMatch(/^queuebox\.outbox-key:s{63}:[0-9a-f]{64}$/);
    expect(outboxKeyLockResource(SCHEMA, 'A')).not.toBe(outboxKeyLockResource(SCHEMA, 'a'));
  });

  it('refuses an invalid schema name', () => {
    expect(() =>
      lockStatements('bad]name', toOutboxMessages([{ topic: 't', key: 'k', payload: 1 }])),
    ).toThrow(/not a valid schema name/);
  });
});

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
      outboxKeyLockResource(SCHEMA, 'o-1'),
    ]);
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
});
