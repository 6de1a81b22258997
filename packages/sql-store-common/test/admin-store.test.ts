/**
 * The outbox requeue of `createSqlAdminStore` on a scripted dialect, without a database: each statement is a tag
 * with its arguments, and the executor answers it from a small table of dead rows. Both SQL stores run this code;
 * their own tests check it with their statements (store-postgres on a real server, store-sqlserver scripted).
 */
import type { RowId } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import {
  type AdminFilter,
  type AdminStatements,
  createSqlAdminStore,
  type SqlAdminStoreOptions,
} from '../src/admin-store.ts';
import type { ColumnReaders, QueryResult, SqlExecutor } from '../src/dialect.ts';

/** A statement of the scripted dialect: its name and arguments. */
type Call = { readonly step: string; readonly args: unknown[] };

const READERS: ColumnReaders = {
  toRowId: (value) => String(value),
  toJson: (value) => value as never,
  toDate: (value) => new Date(String(value)),
  toClaimToken: () => null,
};

/** Each statement function answers `{ text: step, values: args }`. */
function statements(): AdminStatements<unknown[]> {
  const tag =
    (step: string) =>
    (...args: unknown[]) => ({ text: step, values: args });
  return {
    adminStateCountsStatement: tag('state counts'),
    adminOldestPendingStatement: tag('oldest pending'),
    adminGaugeCountsStatement: tag('gauge counts'),
    adminDeadCountStatement: tag('dead count'),
    adminDeadGroupsStatement: tag('dead groups'),
    adminNextDueStatement: tag('next due'),
    adminListStatement: tag('list'),
    adminRequeuePreviewStatement: tag('preview'),
    adminRequeueStatement: tag('update'),
    adminRequeueCandidatesStatement: tag('candidates'),
    adminLockPendingKeyRowsStatement: tag('key heads'),
    adminKeysInFlightStatement: tag('keys in flight'),
    adminReplayStatement: tag('replay'),
    adminRedactStatement: tag('redact'),
    adminRowStateStatement: tag('row state'),
    adminPurgeStatement: tag('purge'),
    getOutboxStatement: tag('get'),
  };
}

/**
 * Dead outbox rows `dead` (id → key), of which a candidates statement takes the first `batchSize` still dead, and the
 * update requeues the ids it names that are still dead. Keys in `busy` are held by another transaction: the try-lock
 * leaves them out. Records every statement, and whether it ran in a transaction.
 */
function scripted(dead: ReadonlyMap<RowId, string | null>, busy: ReadonlySet<string> = new Set()) {
  const rows = new Map(dead);
  const calls: Call[] = [];
  const tried: string[][] = [];
  let inTransaction = false;
  const answer = <R>(found: unknown[], rowCount = found.length) =>
    ({ rows: found, rowCount }) as unknown as QueryResult<R>;
  const executor: SqlExecutor<unknown[]> = {
    async query<R>(step: string, args: unknown[] = []) {
      calls.push({ step: `${inTransaction ? 'transaction' : 'autocommit'}: ${step}`, args });
      if (step === 'candidates') {
        const batchSize = args[2] as number;
        return answer<R>([...rows].slice(0, batchSize).map(([id, key]) => ({ id, key })));
      }
      if (step === 'update') {
        const ids = ((args[2] as AdminFilter).ids ?? []).filter((id) => rows.has(id));
        for (const id of ids) rows.delete(id);
        return answer<R>(ids.map((id) => ({ id })));
      }
      if (step === 'purge') return answer<R>([], Math.min(args[4] as number, 7));
      return answer<R>([]);
    },
    async transaction(fn) {
      inTransaction = true;
      try {
        return await fn(executor);
      } finally {
        inTransaction = false;
      }
    },
  };
  const options = (overrides: Partial<SqlAdminStoreOptions<unknown[]>> = {}) => ({
    executor,
    schema: 'qb',
    statements: statements(),
    readers: READERS,
    lockOutboxKeys: async () => {
      throw new Error('a requeue never waits for a key lock');
    },
    tryLockOutboxKeys: async (tx: SqlExecutor<unknown[]>, keys: readonly string[]) => {
      expect(tx).toBe(executor);
      expect(inTransaction).toBe(true);
      tried.push([...keys]);
      return new Set(keys.filter((key) => !busy.has(key)));
    },
    ...overrides,
  });
  return { options, calls, tried, rows };
}

describe('an outbox requeue of createSqlAdminStore', () => {
  it("tries the keys' locks without waiting and leaves the rows of a busy key dead (key_busy)", async () => {
    const { options, calls, tried, rows } = scripted(
      new Map<RowId, string | null>([
        ['5', 'Q'],
        ['6', 'R'],
        ['7', null],
        ['8', 'Q'],
      ]),
      new Set(['Q']),
    );

    const result = await createSqlAdminStore(options()).requeue('outbox', { topic: 'orders' });

    expect(tried).toEqual([['Q', 'R']]);
    expect(calls.map((call) => call.step)).toEqual([
      'transaction: candidates',
      'transaction: key heads',
      'transaction: update',
      'autocommit: keys in flight',
    ]);
    // Only the head of the key obtained is locked, and only the rows of free keys (or none) are updated.
    expect(calls[1]?.args[1]).toEqual(['R']);
    expect((calls[2]?.args[2] as AdminFilter | undefined)?.ids).toEqual(['6', '7']);
    expect([...rows.keys()]).toEqual(['5', '8']);
    expect(result).toEqual({
      dryRun: false,
      count: 2,
      ids: ['6', '7'],
      more: false,
      keyBusy: {
        reason: 'key_busy',
        count: 2,
        rows: [
          { id: '5', key: 'Q' },
          { id: '8', key: 'Q' },
        ],
      },
    });
  });

  it('runs a batch larger than maxRowsPerStatement as several transactions, answered as one', async () => {
    const dead = new Map<RowId, string | null>(
      Array.from({ length: 25 }, (_, i) => [String(i + 1), null] as const),
    );
    const { options, calls } = scripted(dead);

    const result = await createSqlAdminStore(options({ maxRowsPerStatement: 10 })).requeue(
      'outbox',
      { topic: 'orders' },
      { batchSize: 30 },
    );
    const purged = await createSqlAdminStore(options({ maxRowsPerStatement: 10 })).purge({
      table: 'inbox',
      state: 'Dead',
      olderThanMs: 3_600_000,
      batchSize: 30,
    });

    const sizes = (step: string) => calls.filter((c) => c.step.endsWith(step)).map((c) => c.args.at(-1));
    expect(sizes('candidates')).toEqual([10, 10, 10]);
    expect(result).toMatchObject({ count: 25, more: false });
    expect(result.ids).toHaveLength(25);
    // The purge statement answers 7 rows: short, so the first part was the last.
    expect([sizes('purge'), purged]).toEqual([[10], 7]);
  });

  it('stops at a part that requeued nothing, which reports what it left dead', async () => {
    const { options, calls } = scripted(
      new Map<RowId, string | null>([
        ['1', 'Q'],
        ['2', 'Q'],
        ['3', null],
      ]),
      new Set(['Q']),
    );

    const result = await createSqlAdminStore(options({ maxRowsPerStatement: 2 })).requeue(
      'outbox',
      { topic: 'orders' },
      { batchSize: 4 },
    );

    expect(calls.filter((c) => c.step.endsWith('candidates'))).toHaveLength(1);
    expect(calls.at(-1)?.step).toBe('autocommit: keys in flight');
    expect(result).toMatchObject({ count: 0, ids: [], more: true, keyBusy: { count: 2 } });
  });
});

describe('a redact of createSqlAdminStore', () => {
  /**
   * An executor whose redact statement answers the changed id when `changes` says so (in turn), and whose state read
   * answers `states` in turn (`undefined`: no row).
   */
  function redactScript(changes: readonly boolean[], states: readonly (string | undefined)[]) {
    const steps: string[] = [];
    let changed = 0;
    let read = 0;
    const executor = {
      async query(step: string, args: unknown[] = []) {
        steps.push(step);
        expect(args.slice(1)).toEqual(['outbox', '5']);
        if (step === 'redact') return { rows: changes[changed++] ? [{ id: '5' }] : [], rowCount: 0 };
        const state = states[read++];
        return { rows: state === undefined ? [] : [{ state }], rowCount: 0 };
      },
      transaction: () => Promise.reject(new Error('a redact takes no transaction')),
    } as unknown as SqlExecutor<unknown[]>;
    const { options } = scripted(new Map());
    return { store: createSqlAdminStore(options({ executor })), steps };
  }

  it('is one statement when the row is final', async () => {
    const { store, steps } = redactScript([true], []);

    expect(await store.redact('outbox', '5')).toEqual({ status: 'redacted' });
    expect(steps).toEqual(['redact']);
  });

  it('reads the state of a row it did not change: not_found, or not_final with the state', async () => {
    const missing = redactScript([false], [undefined]);
    const live = redactScript([false], ['processing']);

    expect(await missing.store.redact('outbox', '5')).toEqual({ status: 'not_found' });
    expect(await live.store.redact('outbox', '5')).toEqual({ status: 'not_final', state: 'Processing' });
    expect(live.steps).toEqual(['redact', 'row state']);
  });

  it('redacts a row that became final between its two statements (a settle committed in between)', async () => {
    const { store, steps } = redactScript([false, true], ['sent']);

    expect(await store.redact('outbox', '5')).toEqual({ status: 'redacted' });
    expect(steps).toEqual(['redact', 'row state', 'redact']);
  });

  it('answers not_found for an id that names no row, without a statement', async () => {
    const { store, steps } = redactScript([], []);

    expect(await store.redact('outbox', 'x')).toEqual({ status: 'not_found' });
    expect(steps).toEqual([]);
  });
});

/** An executor answering each step from `answers` (a function of its arguments, or rows); records the calls. */
function scriptedAnswers(answers: Record<string, (args: unknown[]) => unknown[]>) {
  const calls: { step: string; args: unknown[] }[] = [];
  const executor: SqlExecutor<unknown[]> = {
    async query<R>(step: string, args: unknown[] = []) {
      calls.push({ step, args });
      const rows = answers[step]?.(args) ?? [];
      return { rows, rowCount: rows.length } as unknown as QueryResult<R>;
    },
    transaction: (fn) => fn(executor),
  };
  const store = createSqlAdminStore({
    executor,
    schema: 'qb',
    statements: statements(),
    readers: READERS,
    tryLockOutboxKeys: async (_tx, keys) => new Set(keys),
  });
  return { store, calls };
}

const updateNamed = (args: unknown[]) => ((args[2] as AdminFilter).ids ?? []).map((id: RowId) => ({ id }));

/**
 * An outbox requeue batch of `createSqlAdminStore` waits for no lock: a key whose head the dialect's statement could
 * not lock (`held_key`: a claim or settle held it) is left dead like a key whose insert lock was held (`key_busy`),
 * and a batch that took whole keys (more rows than it asked for) is full by the rows it asked for (`taken`).
 * Scripted dialect, no database (store-postgres's admin-requeue-no-wait test runs the real statements).
 */
describe('an outbox requeue batch of createSqlAdminStore', () => {
  it("leaves the rows of a key whose head another transaction held dead (key_busy), and requeues the others'", async () => {
    // Prepare: Q's head is held (a claim of it under way); R's is free.
    const { store, calls } = scriptedAnswers({
      candidates: () => [
        { id: '5', key: 'Q', taken: 3 },
        { id: '6', key: 'R', taken: 3 },
        { id: '7', key: 'Q', taken: 3 },
      ],
      'key heads': () => [{ held_key: 'Q' }],
      update: updateNamed,
    });

    // Act
    const result = await store.requeue('outbox', { topic: 'orders' }, { batchSize: 10 });

    // Assess
    expect(calls.find((c) => c.step === 'key heads')?.args[1]).toEqual(['Q', 'R']);
    expect((calls.find((c) => c.step === 'update')?.args[2] as AdminFilter | undefined)?.ids).toEqual(['6']);
    expect(result).toEqual({
      dryRun: false,
      count: 1,
      ids: ['6'],
      more: false,
      keyBusy: {
        reason: 'key_busy',
        count: 2,
        rows: [
          { id: '5', key: 'Q' },
          { id: '7', key: 'Q' },
        ],
      },
    });
  });

  it('asks for whole keys up to 10,000 rows, and is full (more) by the rows it asked for, not those it took', async () => {
    // Prepare: a batch of 2 whose keys hold 4 dead rows.
    const { store, calls } = scriptedAnswers({
      candidates: () => [
        { id: '1', key: 'A', taken: 2 },
        { id: '2', key: 'B', taken: 2 },
        { id: '3', key: 'A', taken: 2 },
        { id: '4', key: 'B', taken: 2 },
      ],
      update: updateNamed,
    });

    // Act
    const result = await store.requeue('outbox', { topic: 'orders' }, { batchSize: 2 });

    // Assess
    expect(calls.find((c) => c.step === 'candidates')?.args.slice(2)).toEqual([2, 10_000]);
    expect(result).toEqual({ dryRun: false, count: 4, ids: ['1', '2', '3', '4'], more: true });
  });
});
