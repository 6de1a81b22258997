/**
 * The per-key outbox lock on SQL Server without a server (none runs here): the lock batch's parameters, and the
 * sequence of statements the store's insert and forward hand to the executor. The executor below only records
 * what it is given and answers what SQL Server would; the batch's T-SQL is parsed in sql-parse.test.ts. That SQL
 * Server grants, queues and releases the locks as described is not exercised here (test/contract where a server
 * is available, and PostgreSQL's twin in store-postgres/test/key-order.integration.test.ts).
 */
import { createHash } from 'node:crypto';
import { StoreError, StoreUnavailableError } from '@queuebox/core';
import mssql from 'mssql';
import { describe, expect, it } from 'vitest';
import { isDeadlock } from '../src/errors.ts';
import { type QueryResult, retryDeadlocks, type SqlExecutor, type SqlParams } from '../src/executor.ts';
import { createSqlServerInboxStore } from '../src/inbox-store.ts';
import { outboxKeyLockResource } from '../src/outbox-key-lock.ts';
import {
  KEY_LOCK_TIMEOUT_MS,
  LOCKS_PER_BATCH,
  lockOutboxKeysStatement,
  MAX_ROWS_PER_STATEMENT,
} from '../src/outbox-sql.ts';
import { createSqlServerOutboxStore } from '../src/outbox-store.ts';
import { anOutboxMessage, SCHEMA } from './statements.ts';

const TOKEN = '6f1c2b8e-3d4a-4f5b-9c6d-7e8f9a0b1c2d';

/** The resources a lock batch binds, in the order it requests them. */
const resourcesOf = (values: SqlParams) =>
  Object.entries(values)
    .filter(([name]) => /^resource\d+$/.test(name))
    .map(([, p]) => p.value as string);

/** What SQL Server answers each kind of batch: lock status, OUTPUT ids. */
type Answer = (text: string, values: SqlParams) => QueryResult<Record<string, unknown>>;

/** Records each statement (with `tx:` inside a transaction) and answers `answer(text)`. */
function recordingExecutor(answer: Answer, options: { retryDeadlocks?: number } = {}) {
  const seen: { label: string; values: SqlParams }[] = [];
  const label = (text: string) =>
    text.includes('sp_getapplock')
      ? 'lock'
      : text.startsWith('INSERT INTO')
        ? 'insert'
        : text.startsWith('UPDATE b')
          ? 'complete'
          : 'other';
  const make = (inTransaction: boolean): SqlExecutor => {
    const executor: SqlExecutor = {
      async query<R>(text: string, values?: SqlParams) {
        seen.push({ label: `${inTransaction ? 'tx:' : ''}${label(text)}`, values: values ?? {} });
        return answer(text, values ?? {}) as unknown as QueryResult<R>;
      },
      transaction: (fn) => {
        if (inTransaction) return fn(executor);
        // Like createSqlServerExecutor: a whole transaction runs again when it was a deadlock victim.
        return retryDeadlocks(() => {
          seen.push({ label: 'begin', values: {} });
          return fn(make(true));
        }, options.retryDeadlocks ?? 0);
      },
      close: async () => {},
    };
    return executor;
  };
  return { executor: make(false), seen, labels: () => seen.map((s) => s.label) };
}

/** Grants every lock; an insert answers one id per message; a complete answers the items it was given. */
const granting: Answer = (text, values) => {
  if (text.includes('sp_getapplock')) return { rows: [{ status: 0 }], rowCount: 1 };
  const json = JSON.parse(String(values.messages?.value ?? values.items?.value ?? '[]')) as { id?: string }[];
  const rows = json.map((item, i) => ({ id: item.id ?? String(100 + i), state: 'processed' }));
  return { rows, rowCount: rows.length };
};

describe('lockOutboxKeysStatement', () => {
  it('locks each distinct key once, in ascending resource order, as NVARCHAR(255) parameters', () => {
    const { values } = lockOutboxKeysStatement(SCHEMA, ['b', 'a', 'b', '']);

    const expected = ['b', 'a', ''].map((key) => outboxKeyLockResource(SCHEMA, key)).sort();
    expect(resourcesOf(values)).toEqual(expected);
    expect(Object.keys(values)).toEqual(['lockTimeoutMs', 'resource0', 'resource1', 'resource2']);
    for (const [name, param] of Object.entries(values)) {
      if (name === 'lockTimeoutMs') continue;
      const type = param.type as { type: unknown; length: number };
      expect([type.type, type.length]).toEqual([mssql.NVarChar, 255]);
    }
  });

  it(`takes at most ${LOCKS_PER_BATCH} keys, and refuses an invalid schema name`, () => {
    const keys = Array.from({ length: LOCKS_PER_BATCH + 1 }, (_, i) => `k${i}`);

    expect(resourcesOf(lockOutboxKeysStatement(SCHEMA, keys.slice(1)).values)).toHaveLength(LOCKS_PER_BATCH);
    expect(() => lockOutboxKeysStatement(SCHEMA, keys)).toThrow(StoreError);
    expect(() => lockOutboxKeysStatement('bad]name', ['k'])).toThrow(/not a valid schema name/);
  });

  it(`waits at most ${KEY_LOCK_TIMEOUT_MS} ms per key by default (@LockTimeout), or as long as asked`, () => {
    const byDefault = lockOutboxKeysStatement(SCHEMA, ['a', 'b']);
    const asked = lockOutboxKeysStatement(SCHEMA, ['a'], 250.7);

    expect(byDefault.values.lockTimeoutMs).toEqual({ type: mssql.Int, value: KEY_LOCK_TIMEOUT_MS });
    expect(asked.values.lockTimeoutMs?.value).toBe(250);
    expect(byDefault.text.match(/@LockTimeout = @lockTimeoutMs;/g)).toHaveLength(2);
  });

  it.each([
    [-1, 'got -1'],
    [Number.NaN, 'got NaN'],
    [Number.POSITIVE_INFINITY, 'got Infinity'],
    [2_147_483_648, 'got 2147483648'],
    ['5000', 'got the string "5000"'],
  ])(
    'refuses the key-lock wait %s with a RangeError naming it, instead of waiting 0 ms',
    (lockTimeoutMs, got) => {
      const build = () => lockOutboxKeysStatement(SCHEMA, ['a'], lockTimeoutMs as number);

      expect(build).toThrow(RangeError);
      expect(build).toThrow(
        `keyLockTimeoutMs must be a number of milliseconds from 0 to 2147483647 (${got})`,
      );
    },
  );

  it('names a resource that fits sp_getapplock for the longest schema and key, and tells case apart', () => {
    const resource = outboxKeyLockResource('s'.repeat(63), '🔑'.repeat(225));

    expect(resource.length).toBeLessThanOrEqual(255);
    expect(resource).toMatch(/^queuebox\.outbox-key:s{63}:[0-9a-f]{64}$/);
    expect(outboxKeyLockResource(SCHEMA, 'A')).not.toBe(outboxKeyLockResource(SCHEMA, 'a'));
  });

  it('names one lock for a schema however its letters are cased, as SQL Server resolves the schema', () => {
    // Prepare: QueueBox configured as `QueueBox`, an application enqueueing with `{ schema: 'queuebox' }`: one
    // table under a case-insensitive collation, while sp_getapplock compares resource names binary.
    const configured = lockOutboxKeysStatement('QueueBox', ['order-1']);
    const application = lockOutboxKeysStatement('queuebox', ['order-1']);

    // Assess
    expect(resourcesOf(configured.values)).toEqual(resourcesOf(application.values));
    expect(outboxKeyLockResource('QUEUEBOX', 'k')).toBe(outboxKeyLockResource('queuebox', 'k'));
    expect(outboxKeyLockResource('Tenant_A1', 'k')).toMatch(/^queuebox\.outbox-key:tenant_a1:/);
  });
});

describe('the resource name of a key lock (the documented formula)', () => {
  // Fixed vectors: a writer in another language or in T-SQL must produce exactly these strings (README.md).
  it.each([
    ['order-1', '0bafe22156d2698c143b86040446d366ead863ba600d5c924f3d15c786ef4057'],
    ['café', '850f7dc43910ff890f8879c0ed26fe697c93a067ad93a7d50f466a7028a9bf4e'],
    ['cafe\u0301', '81ef060bcd98adc7824eb5c1ada83c32491b16018e11e79f00ab9d09e04b015a'],
    ['😀', 'f0443a342c5ef54783a111b51ba56c938e474c32324d90c3a60c9c8e3a37e2d9'],
  ])('is queuebox.outbox-key:<lower-case schema>:<SHA-256 of UTF-8, lower-case hex> for %j', (key, hash) => {
    expect(outboxKeyLockResource('queuebox', key)).toBe(`queuebox.outbox-key:queuebox:${hash}`);
    expect(outboxKeyLockResource('QueueBox', key)).toBe(`queuebox.outbox-key:queuebox:${hash}`);
  });

  it("hashes UTF-8, so T-SQL's plain HASHBYTES of an NVARCHAR (UTF-16LE, upper-case hex) names another lock", () => {
    // Prepare: what CONVERT(char(64), HASHBYTES('SHA2_256', @key), 2) gives for an NVARCHAR @key.
    const utf16Name = (key: string) =>
      `queuebox.outbox-key:queuebox:${createHash('sha256').update(Buffer.from(key, 'utf16le')).digest('hex').toUpperCase()}`;

    // Assess: not even an ASCII key gets the same name that way.
    for (const key of ['order-1', 'café', '😀']) {
      expect(outboxKeyLockResource('queuebox', key)).not.toBe(utf16Name(key));
      expect(outboxKeyLockResource('queuebox', key).toLowerCase()).not.toBe(utf16Name(key).toLowerCase());
    }
  });
});

describe('outbox.insert', () => {
  it('inserts unkeyed rows in one autocommit batch, without locks', async () => {
    const { executor, labels } = recordingExecutor(granting);

    const ids = await createSqlServerOutboxStore({ executor, schema: SCHEMA }).insert([
      anOutboxMessage({ key: null }),
    ]);

    expect(ids).toHaveLength(1);
    expect(labels()).toEqual(['insert']);
  });

  it('takes the locks of the keys, then inserts, in one transaction', async () => {
    const { executor, seen, labels } = recordingExecutor(granting);

    await createSqlServerOutboxStore({ executor, schema: SCHEMA }).insert([
      anOutboxMessage({ key: 'o-2' }),
      anOutboxMessage({ key: null }),
      anOutboxMessage({ key: 'o-1' }),
      anOutboxMessage({ key: 'o-2' }),
    ]);

    expect(labels()).toEqual(['begin', 'tx:lock', 'tx:insert']);
    expect(resourcesOf(seen[1]?.values ?? {})).toEqual(
      ['o-1', 'o-2'].map((key) => outboxKeyLockResource(SCHEMA, key)).sort(),
    );
  });

  it(`locks more than ${LOCKS_PER_BATCH} keys in batches that follow one resource order`, async () => {
    const { executor, seen, labels } = recordingExecutor(granting);
    const keys = Array.from({ length: 2 * LOCKS_PER_BATCH + 1 }, (_, i) => `key-${i}`);

    await createSqlServerOutboxStore({ executor, schema: SCHEMA }).insert(
      [...keys, ...keys].map((key) => anOutboxMessage({ key })),
    );

    expect(labels()).toEqual(['begin', 'tx:lock', 'tx:lock', 'tx:lock', 'tx:insert']);
    const batches = seen.filter((s) => s.label === 'tx:lock').map((s) => resourcesOf(s.values));
    expect(batches.map((b) => b.length)).toEqual([LOCKS_PER_BATCH, LOCKS_PER_BATCH, 1]);
    expect(batches.flat()).toEqual(keys.map((key) => outboxKeyLockResource(SCHEMA, key)).sort());
  });

  it('stops with a StoreError and inserts nothing when a lock is refused (-3: deadlock victim)', async () => {
    const { executor, labels } = recordingExecutor((text, values) =>
      text.includes('sp_getapplock') ? { rows: [{ status: -3 }], rowCount: 1 } : granting(text, values),
    );
    const insert = createSqlServerOutboxStore({ executor, schema: SCHEMA }).insert([anOutboxMessage()]);

    await expect(insert).rejects.toThrow(StoreError);
    await expect(insert).rejects.toThrow(/sp_getapplock -3/);
    expect(labels()).toEqual(['begin', 'tx:lock']);
  });
});

describe('refused key locks', () => {
  const refusing = (status: number, times = Number.POSITIVE_INFINITY) => {
    let refused = 0;
    return (text: string, values: SqlParams) => {
      if (text.includes('sp_getapplock') && refused < times) {
        refused++;
        return { rows: [{ status }], rowCount: 1 };
      }
      return granting(text, values);
    };
  };

  it('reads -1 (timed out) as an unavailable store: another writer holds the key, try later', async () => {
    const { executor } = recordingExecutor(refusing(-1));

    const error = await createSqlServerOutboxStore({ executor, schema: SCHEMA })
      .insert([anOutboxMessage()])
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as StoreUnavailableError).message).toMatch(/Timed out after 10000 ms .*sp_getapplock -1/);
    expect(isDeadlock(error)).toBe(false);
  });

  it('reads -3 (deadlock victim) as a deadlock, so the store runs its transaction again', async () => {
    const { executor, labels } = recordingExecutor(refusing(-3, 1), { retryDeadlocks: 3 });

    const ids = await createSqlServerOutboxStore({ executor, schema: SCHEMA }).insert([anOutboxMessage()]);

    expect(ids).toHaveLength(1);
    expect(labels()).toEqual(['begin', 'tx:lock', 'begin', 'tx:lock', 'tx:insert']);
  });

  it('raises -3 as a StoreError that isDeadlock recognises once the retries are spent', async () => {
    const { executor } = recordingExecutor(refusing(-3), { retryDeadlocks: 2 });

    const error = await createSqlServerOutboxStore({ executor, schema: SCHEMA })
      .insert([anOutboxMessage()])
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(StoreError);
    expect(isDeadlock(error)).toBe(true);
    expect((error as StoreError).context).toMatchObject({ appLockStatus: -3 });
  });
});

describe(`inserts of more than ${MAX_ROWS_PER_STATEMENT} rows`, () => {
  it('go in statements of at most 4,000 rows, in one transaction, answering the ids in order', async () => {
    let next = 1;
    const { executor, seen, labels } = recordingExecutor((_text, values) => {
      const messages = JSON.parse(String(values.messages?.value ?? '[]')) as unknown[];
      // OUTPUT promises no order: answer the chunk's ids reversed.
      const rows = messages.map(() => ({ id: String(next++) })).reverse();
      return { rows, rowCount: rows.length };
    });
    const messages = Array.from({ length: 2 * MAX_ROWS_PER_STATEMENT + 1 }, () =>
      anOutboxMessage({ key: null }),
    );

    const ids = await createSqlServerOutboxStore({ executor, schema: SCHEMA }).insert(messages);

    expect(labels()).toEqual(['begin', 'tx:insert', 'tx:insert', 'tx:insert']);
    const sizes = seen
      .filter((s) => s.label === 'tx:insert')
      .map((s) => (JSON.parse(String(s.values.messages?.value)) as unknown[]).length);
    expect(sizes).toEqual([MAX_ROWS_PER_STATEMENT, MAX_ROWS_PER_STATEMENT, 1]);
    expect(ids).toEqual(Array.from({ length: messages.length }, (_, i) => String(i + 1)));
  });

  it(`stay one autocommit statement up to ${MAX_ROWS_PER_STATEMENT} unkeyed rows`, async () => {
    const { executor, labels } = recordingExecutor(granting);

    await createSqlServerOutboxStore({ executor, schema: SCHEMA }).insert(
      Array.from({ length: MAX_ROWS_PER_STATEMENT }, () => anOutboxMessage({ key: null })),
    );

    expect(labels()).toEqual(['insert']);
  });
});

describe('inbox.forward', () => {
  const item = (id: string, key: string | null) => ({
    id,
    claimToken: TOKEN,
    outbox: anOutboxMessage({ key }),
  });

  it('takes the locks of the outbox keys before the forward, in its transaction', async () => {
    const { executor, seen, labels } = recordingExecutor(granting);

    const report = await createSqlServerInboxStore({ executor, schema: SCHEMA }).forward([
      item('7', 'k-b'),
      item('8', null),
      item('9', 'k-a'),
    ]);

    expect(labels()).toEqual(['begin', 'tx:lock', 'tx:complete', 'tx:insert']);
    expect(resourcesOf(seen[1]?.values ?? {})).toEqual(
      ['k-a', 'k-b'].map((key) => outboxKeyLockResource(SCHEMA, key)).sort(),
    );
    expect(report.outboxIds).toHaveLength(3);
  });

  it('takes no lock when no outbox row has a key', async () => {
    const { executor, labels } = recordingExecutor(granting);

    await createSqlServerInboxStore({ executor, schema: SCHEMA }).forward([item('7', null)]);

    expect(labels()).toEqual(['begin', 'tx:complete', 'tx:insert']);
  });
});
