import { randomUUID } from 'node:crypto';
import { type RelayInboxRow, type Store, StoreUnavailableError } from '@queuebox/core';
import { dropSchemasAfterPass, freshSchemaName, testPool } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  claimOutboxStatement,
  createOutboxClaim,
  createPgExecutor,
  createPostgresStore,
  createPreparedGuard,
  type QueryOptions,
  type SqlExecutor,
  translateError,
} from '../src/index.ts';
import { anInboxMessage, anOutboxMessage } from './messages.ts';

const schema = freshSchemaName('pg_prepared');
dropSchemasAfterPass(() => [schema]);

const LEASE = { leaseMs: 60_000 };

describe('the outbox claims as named prepared statements', () => {
  let executor: SqlExecutor;
  let store: Store;
  beforeAll(async () => {
    executor = createPgExecutor(testPool(2));
    store = createPostgresStore({ executor, schema });
    await store.migrate();
  });
  afterAll(async () => {
    await executor.close();
  });
  beforeEach(async () => {
    await executor.query(`TRUNCATE "${schema}".outbox`);
  });

  /** The store's executor, recording the name (or '-') of every statement; `fail` may throw instead of running. */
  function recording(fail?: (name: string | undefined) => Error | undefined) {
    const names: string[] = [];
    const recorder: SqlExecutor = {
      query(text, values, options?: QueryOptions) {
        names.push(options?.name ?? '-');
        const error = fail?.(options?.name);
        if (error) return Promise.reject(error);
        return executor.query(text, values, options);
      },
      transaction: (fn) => executor.transaction(fn),
      close: async () => undefined,
    };
    return { recorder, names };
  }

  it('runs the light claim and the whole claim named, each under its own name', async () => {
    // Prepare
    const { recorder, names } = recording();
    const claim = createOutboxClaim({ executor: recorder, schema });
    const unkeyed = await store.outbox.insert([anOutboxMessage(), anOutboxMessage()]);
    // Act: the light claim twice (the second on a connection that has it prepared, or prepares it), then a key
    // arrives and the light claim hands over to the whole one.
    const first = await claim({ batchSize: 1, ...LEASE });
    const second = await claim({ batchSize: 1, ...LEASE });
    const [keyed] = await store.outbox.insert([anOutboxMessage({ key: 'k' })]);
    const third = await claim({ batchSize: 5, ...LEASE });
    // Assess
    expect([...first, ...second].map((r) => r.id)).toEqual(unkeyed);
    expect(third.map((r) => r.id)).toEqual([keyed]);
    expect(names).toHaveLength(4);
    expect(names.every((n) => /^queuebox_[0-9a-f]{24}$/.test(n))).toBe(true);
    // Its texts: from the oldest (the first claim of a store) and from a random point (after a full claim), each
    // with the batch size in it (the third claim's light statement, a batch of 5, is another text); then the
    // whole claim, which the third ran when its light statement found the key.
    expect(new Set(names).size).toBe(4);
  });

  it('runs it unnamed for pauseMs when the unnamed probe after a slow named execution was 4× faster', async () => {
    // Prepare: a clock that the recorder moves 100 ms forward during the second claim's statement.
    let clock = 0;
    const { recorder, names } = recording(() => {
      if (names.length === 2) clock += 100;
      return undefined;
    });
    const prepared = createPreparedGuard({ slowMs: 50, pauseMs: 1_000, now: () => clock });
    const claim = createOutboxClaim({ executor: recorder, schema, prepared });
    await store.outbox.insert(Array.from({ length: 5 }, () => anOutboxMessage()));
    // Act
    await claim({ batchSize: 1, ...LEASE });
    await claim({ batchSize: 1, ...LEASE });
    await claim({ batchSize: 1, ...LEASE });
    clock += 999;
    await claim({ batchSize: 1, ...LEASE });
    clock += 2;
    const last = await claim({ batchSize: 1, ...LEASE });
    // Assess: named, named (slow), the unnamed probe (fast), unnamed until the pause is over, named.
    expect(names.map((n) => (n === '-' ? '-' : 'named'))).toEqual(['named', 'named', '-', '-', 'named']);
    expect(last).toHaveLength(1);
  });

  it('goes on naming it when the unnamed probe was slow too (a loaded database, not a bad plan)', async () => {
    // Prepare: the second and the third statements each take 100 ms on the guard's clock.
    let clock = 0;
    const { recorder, names } = recording(() => {
      if (names.length === 2 || names.length === 3) clock += 100;
      return undefined;
    });
    const prepared = createPreparedGuard({ slowMs: 50, pauseMs: 1_000, now: () => clock });
    const claim = createOutboxClaim({ executor: recorder, schema, prepared });
    await store.outbox.insert(Array.from({ length: 4 }, () => anOutboxMessage()));
    // Act
    for (let i = 0; i < 4; i++) await claim({ batchSize: 1, ...LEASE });
    // Assess: named, named (slow), the unnamed probe (as slow), named again.
    expect(names.map((n) => (n === '-' ? '-' : 'named'))).toEqual(['named', 'named', '-', 'named']);
  });

  it('runs it again unnamed, and unnamed from then on, when a pooler does not keep prepared statements', async () => {
    // Prepare: every named statement fails as PgBouncer in transaction mode answers it.
    // As the pg executor throws it: translated, the driver's error as the cause.
    const lost = translateError(
      Object.assign(new Error('prepared statement "queuebox_x" does not exist'), { code: '26000' }),
    );
    const { recorder, names } = recording((name) => (name === undefined ? undefined : lost));
    const claim = createOutboxClaim({ executor: recorder, schema });
    const ids = await store.outbox.insert([anOutboxMessage(), anOutboxMessage()]);
    // Act
    const first = await claim({ batchSize: 1, ...LEASE });
    const second = await claim({ batchSize: 1, ...LEASE });
    // Assess
    expect([...first, ...second].map((r) => r.id)).toEqual(ids);
    expect(names.map((n) => (n === '-' ? '-' : 'named'))).toEqual(['named', '-', '-']);
  });

  it('in an explicit transaction, fails as unavailable instead of running it again there, and runs unnamed after', async () => {
    // Prepare: the pooler's error aborts the transaction it came in (PgBouncer before 1.21 in transaction mode).
    const lost = translateError(
      Object.assign(new Error('prepared statement "queuebox_x" does not exist'), { code: '26000' }),
    );
    const { recorder, names } = recording((name) => (name === undefined ? undefined : lost));
    const prepared = createPreparedGuard();
    const text = 'SELECT $1::int AS n';

    // Act
    const first = await executor
      .transaction(() => prepared.query(recorder, text, [1], { inTransaction: true }))
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    const again = await executor.transaction(() =>
      prepared.query<{ n: number }>(recorder, text, [2], { inTransaction: true }),
    );

    // Assess: the try again of the transaction (the relay's) ran it unnamed.
    expect(first).toBeInstanceOf(StoreUnavailableError);
    expect(again.rows).toEqual([{ n: 2 }]);
    expect(names.map((n) => (n === '-' ? '-' : 'named'))).toEqual(['named', '-']);
  });

  it('passes any other failure of a named statement on', async () => {
    // Prepare
    const broken = Object.assign(new Error('division by zero'), { code: '22012' });
    const { recorder } = recording((name) => (name === undefined ? undefined : broken));
    const claim = createOutboxClaim({ executor: recorder, schema });
    await store.outbox.insert([anOutboxMessage()]);
    // Act / Assess
    await expect(claim({ batchSize: 1, ...LEASE })).rejects.toThrow('division by zero');
  });
});

describe('database.preparedStatements: false (the executor without named statements)', () => {
  /** How many prepared statements named `name` the session of a one-connection executor holds. */
  async function preparedOnSession(namedStatements: boolean | undefined, name: string): Promise<number> {
    const executor = createPgExecutor(testPool(1), namedStatements === undefined ? {} : { namedStatements });
    try {
      await executor.query('SELECT $1::int AS n', [1], { name });
      await executor.transaction((tx) => tx.query('SELECT $1::int + 1 AS n', [1], { name: `${name}_tx` }));
      // The executor prepares a name under a suffix of its own (see replanAfterMs).
      const { rows } = await executor.query<{ count: number }>(
        "SELECT count(*)::int AS count FROM pg_prepared_statements WHERE name ~ ('^' || $1 || '(_tx)?_[0-9a-z]+$')",
        [name],
      );
      return rows[0]?.count ?? -1;
    } finally {
      await executor.close();
    }
  }

  it('runs a named statement unnamed, in and outside a transaction; by default it is prepared', async () => {
    // Act
    const byDefault = await preparedOnSession(undefined, 'queuebox_probe_default');
    const off = await preparedOnSession(false, 'queuebox_probe_off');
    // Assess
    expect({ byDefault, off }).toEqual({ byDefault: 2, off: 0 });
  });
});

describe('a named statement is planned again once it is replanAfterMs old', () => {
  const planSchemas: string[] = [];
  dropSchemasAfterPass(() => planSchemas);

  /** The names prepared on the session of a one-connection executor. */
  const preparedNames = async (executor: SqlExecutor) =>
    (
      await executor.query<{ name: string }>('SELECT name FROM pg_prepared_statements ORDER BY name')
    ).rows.map((r) => r.name);
  /** The texts prepared on that session. */
  const preparedTexts = async (executor: SqlExecutor) =>
    (
      await executor.query<{ statement: string }>(
        'SELECT statement FROM pg_prepared_statements ORDER BY name',
      )
    ).rows.map((r) => r.statement);

  it('prepares it under a new name and deallocates the old one', async () => {
    // Prepare: one connection, a clock the test moves.
    let clock = 0;
    const executor = createPgExecutor(testPool(1), { replanAfterMs: 1_000, now: () => clock });
    try {
      // Act
      await executor.query('SELECT $1::int AS n', [1], { name: 'queuebox_probe_replan' });
      const first = await preparedNames(executor);
      const firstTexts = await preparedTexts(executor);
      clock += 999;
      await executor.query('SELECT $1::int AS n', [2], { name: 'queuebox_probe_replan' });
      const young = await preparedNames(executor);
      clock += 1;
      const { rows } = await executor.query<{ n: number }>('SELECT $1::int AS n', [3], {
        name: 'queuebox_probe_replan',
      });
      const old = await preparedNames(executor);
      const oldTexts = await preparedTexts(executor);
      // Assess
      expect(first).toHaveLength(1);
      // The text differs too: PgBouncer 1.21+ keeps prepared statements by their text, whatever their name.
      expect(firstTexts).toEqual([`SELECT $1::int AS n\n/* ${first[0]} */`]);
      expect(oldTexts).toEqual([`SELECT $1::int AS n\n/* ${old[0]} */`]);
      expect(first[0]).toMatch(/^queuebox_probe_replan_[0-9a-z]+$/);
      expect(young).toEqual(first);
      expect(old).toHaveLength(1);
      expect(old[0]).toMatch(/^queuebox_probe_replan_[0-9a-z]+$/);
      expect(old[0]).not.toBe(first[0]);
      expect(rows).toEqual([{ n: 3 }]);
    } finally {
      await executor.close();
    }
  });

  /**
   * The plans of the light claim's two statements (from the oldest, from a random point) prepared on a
   * one-connection executor's session, generic plans forced: first made while the table held two due rows, then,
   * once `after` ms had passed and 20,000 sent rows had come, used again.
   */
  async function lightClaimPlansAfterGrowth(
    analyzeWhileSmall: boolean,
    replanAfterMs: number,
    after: number,
  ) {
    const planSchema = freshSchemaName('pg_plan');
    planSchemas.push(planSchema);
    let clock = 0;
    const executor = createPgExecutor(testPool(1), { replanAfterMs, now: () => clock });
    try {
      const planStore = createPostgresStore({ executor, schema: planSchema });
      await planStore.migrate();
      const table = `"${planSchema}".outbox`;
      // No ANALYZE behind the test's back: autovacuum would make the plans again from the grown table.
      await executor.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
      await executor.query('SET plan_cache_mode = force_generic_plan');
      await planStore.outbox.insert([anOutboxMessage(), anOutboxMessage()]);
      if (analyzeWhileSmall) await executor.query(`ANALYZE ${table}`);
      // Full claims of one: the oldest, then from a random point.
      for (let i = 0; i < 2; i++)
        expect(await planStore.outbox.claim({ batchSize: 1, ...LEASE })).toHaveLength(1);
      await executor.query(
        `INSERT INTO ${table} (topic, payload, state, attempt, max_attempts, sent_at)
         SELECT 't', '{"n":0}', 'sent', 1, 3, now() FROM generate_series(1, 20000)`,
      );
      clock += after;
      await planStore.outbox.insert(Array.from({ length: 3 }, () => anOutboxMessage()));
      // Light claims 3 and 4 start at a random point, 5 at the oldest.
      for (let i = 0; i < 3; i++)
        expect(await planStore.outbox.claim({ batchSize: 1, ...LEASE })).toHaveLength(1);
      const names = await preparedNames(executor);
      expect(names).toHaveLength(2);
      const plans: string[] = [];
      for (const name of names) {
        const { rows } = await executor.query<{ 'QUERY PLAN': string }>(
          `EXPLAIN EXECUTE "${name}"(60000, '00000000-0000-4000-8000-000000000000', 0.5)`,
        );
        plans.push(rows.map((r) => r['QUERY PLAN']).join('\n'));
      }
      return plans;
    } finally {
      await executor.close();
    }
  }

  it('the light claim made while the outbox was small and never analyzed reads it by index once it has grown', async () => {
    // Act: no new plan in between (replanAfterMs far away).
    const plans = await lightClaimPlansAfterGrowth(false, 3_600_000, 0);
    // Assess: neither the key test nor the update scans the table (EXISTS and ctid = ANY (ARRAY) did).
    for (const plan of plans) {
      expect(plan).toContain('outbox_active_key');
      expect(plan).toContain('Tid Scan');
      expect(plan).not.toContain('Seq Scan');
    }
  });

  it('the light claim keeps its generic plan on a grown, analyzed table: it is not planned again at every claim', async () => {
    // Prepare: one connection, PostgreSQL's own choice between generic and custom plans (plan_cache_mode auto).
    const planSchema = freshSchemaName('pg_plan');
    planSchemas.push(planSchema);
    const executor = createPgExecutor(testPool(1));
    try {
      const planStore = createPostgresStore({ executor, schema: planSchema });
      await planStore.migrate();
      const table = `"${planSchema}".outbox`;
      await executor.query(
        `INSERT INTO ${table} (topic, payload, max_attempts) SELECT 't', '{"n":0}', 3 FROM generate_series(1, 20000)`,
      );
      await executor.query(`ANALYZE ${table}`);
      const claim = createOutboxClaim({ executor, schema: planSchema, randomStart: () => 0.5 });
      // Act: twelve claims of ten; every fourth starts at the oldest, the others at the middle.
      for (let i = 0; i < 12; i++) expect(await claim({ batchSize: 10, ...LEASE })).toHaveLength(10);
      const { rows } = await executor.query<{ generic: number; custom: number }>(
        `SELECT generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements
         WHERE statement LIKE 'WITH active%' ORDER BY custom_plans + generic_plans DESC`,
      );
      // Assess: the statement from the middle ran nine times, and PostgreSQL planned it five times at most (its
      // custom plans before it compares them with the generic one), not nine.
      expect(rows.map((r) => r.generic + r.custom)).toEqual([9, 3]);
      expect(rows[0]?.generic).toBeGreaterThanOrEqual(4);
    } finally {
      await executor.close();
    }
  });

  it('runs markSent as a named statement, one name for every batch of one claim and destination', async () => {
    // Prepare
    const planSchema = freshSchemaName('pg_plan');
    planSchemas.push(planSchema);
    const executor = createPgExecutor(testPool(1));
    try {
      const planStore = createPostgresStore({ executor, schema: planSchema });
      await planStore.migrate();
      await planStore.outbox.insert(Array.from({ length: 6 }, () => anOutboxMessage()));
      // Act: three claims of two, each settled.
      for (let i = 0; i < 3; i++) {
        const rows = await planStore.outbox.claim({ batchSize: 2, ...LEASE });
        const report = await planStore.outbox.markSent(
          rows.map((r) => ({ id: r.id, claimToken: r.claimToken ?? '', destination: 'd' })),
        );
        expect(report.settled).toHaveLength(2);
      }
      const { rows } = await executor.query<{ executions: number }>(
        `SELECT (generic_plans + custom_plans)::int AS executions FROM pg_prepared_statements
         WHERE statement LIKE '%SET state = ''sent''%'`,
      );
      // Assess
      expect(rows).toEqual([{ executions: 3 }]);
    } finally {
      await executor.close();
    }
  });

  /**
   * The generic plan of the whole claim prepared on a one-connection executor's session: made while the table held
   * two keyed rows and had never been analyzed, then, once `after` ms had passed and 20,000 sent rows and due rows
   * of both kinds had come, used again.
   */
  async function wholeClaimPlanAfterGrowth(after: number): Promise<string> {
    const planSchema = freshSchemaName('pg_plan');
    planSchemas.push(planSchema);
    let clock = 0;
    const executor = createPgExecutor(testPool(1), { replanAfterMs: 10_000, now: () => clock });
    try {
      const planStore = createPostgresStore({ executor, schema: planSchema });
      await planStore.migrate();
      const table = `"${planSchema}".outbox`;
      await executor.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
      await executor.query('SET plan_cache_mode = force_generic_plan');
      await planStore.outbox.insert([anOutboxMessage({ key: 'a' }), anOutboxMessage({ key: 'b' })]);
      expect(await planStore.outbox.claim({ batchSize: 1, ...LEASE })).toHaveLength(1);
      await executor.query(
        `INSERT INTO ${table} (topic, payload, state, attempt, max_attempts, sent_at)
         SELECT 't', '{"n":0}', 'sent', 1, 3, now() FROM generate_series(1, 20000)`,
      );
      clock += after;
      await planStore.outbox.insert([anOutboxMessage({ key: 'c' }), anOutboxMessage()]);
      expect(await planStore.outbox.claim({ batchSize: 2, ...LEASE })).toHaveLength(2);
      const { rows } = await executor.query<{ name: string }>(
        `SELECT name FROM pg_prepared_statements WHERE statement LIKE 'WITH RECURSIVE walk%'`,
      );
      expect(rows).toHaveLength(1);
      const explained = await executor.query<{ 'QUERY PLAN': string }>(
        `EXPLAIN EXECUTE "${rows[0]?.name}"(2, 1, NULL, 1000, 60000, '00000000-0000-4000-8000-000000000000')`,
      );
      return explained.rows.map((r) => r['QUERY PLAN']).join('\n');
    } finally {
      await executor.close();
    }
  }

  it('the whole claim made while the outbox was small and never analyzed is planned again from the grown table', async () => {
    // Act: the same plan while it is younger than replanAfterMs, a new one after.
    const stale = await wholeClaimPlanAfterGrowth(0);
    const replanned = await wholeClaimPlanAfterGrowth(10_000);
    // Assess: planned for ten pages, the update read the table in full (the guard's unnamed probe catches a slow
    // one in between); planned again, the walk and the unkeyed places go by index and the update by TID.
    expect(stale).toContain('Seq Scan');
    expect(replanned).toContain('outbox_active_key');
    expect(replanned).toContain('outbox_due_unkeyed');
    expect(replanned).toContain('Tid Scan');
    expect(replanned).not.toContain('Seq Scan');
  });

  it('the light claim made while the outbox was small and analyzed as such is planned again from the grown table', async () => {
    // Act: the table was analyzed at one row, so that generic plan scans it; the claim after replanAfterMs prepares
    // it again.
    const stale = await lightClaimPlansAfterGrowth(true, 10_000, 0);
    const replanned = await lightClaimPlansAfterGrowth(true, 10_000, 10_000);
    // Assess
    for (const plan of stale) expect(plan).toContain('Seq Scan');
    for (const plan of replanned) expect(plan).not.toContain('Seq Scan');
  });
});

describe("the inbox group commit's insert as a named prepared statement", () => {
  const schemas: string[] = [];
  dropSchemasAfterPass(() => schemas);

  /** A store of a fresh schema on a one-connection executor whose replan clock the test moves. */
  async function oneConnectionStore() {
    const inboxSchema = freshSchemaName('pg_inbox_plan');
    schemas.push(inboxSchema);
    const clock = { now: 0 };
    const executor = createPgExecutor(testPool(1), { replanAfterMs: 10_000, now: () => clock.now });
    const store = createPostgresStore({ executor, schema: inboxSchema });
    await store.migrate();
    return { executor, store, clock, table: `"${inboxSchema}".inbox` };
  }

  /** The name and the generic plan of the insert prepared on the executor's one connection. */
  async function insertPlan(executor: SqlExecutor): Promise<{ executions: number; plan: string }> {
    const { rows } = await executor.query<{ name: string; executions: number }>(
      `SELECT name, (generic_plans + custom_plans)::int AS executions FROM pg_prepared_statements
        WHERE statement LIKE 'WITH input AS%ON CONFLICT (source, idempotency_key) DO NOTHING%'`,
    );
    expect(rows).toHaveLength(1);
    const arrays =
      "'{s}', '{k}', '{e}', '{NULL}', '{NULL}', '{\"{}\"}', '{\"{}\"}', '{pending}', '{3}', '{NULL}', '{0}'";
    const explained = await executor.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN EXECUTE "${rows[0]?.name}"(${arrays})`,
    );
    return {
      executions: rows[0]?.executions ?? 0,
      plan: explained.rows.map((r) => r['QUERY PLAN']).join('\n'),
    };
  }

  it('runs the insert named: one prepared statement for every batch, stored and repeats answered as before', async () => {
    // Prepare
    const { executor, store } = await oneConnectionStore();
    try {
      const first = anInboxMessage();
      // Act: three batches one after another (each store waits for its answer), the last a repeat.
      const a = await store.inbox.store(first);
      const b = await store.inbox.store(anInboxMessage());
      const again = await store.inbox.store({ ...first, payload: { n: 1 } });
      // Assess
      expect([a.status, b.status, again]).toEqual(['stored', 'stored', { status: 'duplicate', id: a.id }]);
      expect((await insertPlan(executor)).executions).toBe(3);
    } finally {
      await executor.close();
    }
  });

  it('the insert prepared while the inbox was small is planned again from the grown table after replanAfterMs', async () => {
    // Prepare: a generic plan made while the table held one row and had never been analyzed reads it whole to find
    // the repeats of a batch.
    const { executor, store, clock, table } = await oneConnectionStore();
    try {
      await executor.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
      await executor.query('SET plan_cache_mode = force_generic_plan');
      await store.inbox.store(anInboxMessage());
      const stale = await insertPlan(executor);
      await executor.query(
        `INSERT INTO ${table} (source, idempotency_key, payload, max_attempts)
         SELECT 's', 'grown-' || g, '{}', 3 FROM generate_series(1, 20000) g`,
      );
      // No ANALYZE after the growth: it invalidates cached plans by itself, and the test would pass without
      // replanAfterMs (it did, until session 29).
      // Act
      clock.now += 10_000;
      await store.inbox.store(anInboxMessage());
      const replanned = await insertPlan(executor);
      // Assess
      expect(stale.plan).toContain('Seq Scan on inbox b');
      expect(replanned.plan).toContain('Index Scan using inbox_source_idempotency_key_uq on inbox b');
      expect(replanned.plan).not.toContain('Seq Scan');
    } finally {
      await executor.close();
    }
  });
});

describe('the outbox claims commit without waiting for the WAL flush', () => {
  const asyncSchema = freshSchemaName('pg_async');
  dropSchemasAfterPass(() => [asyncSchema]);

  it('sets synchronous_commit off for their own transaction only, light and whole claim alike', async () => {
    // Prepare: one connection, so the session read afterwards is the one that claimed.
    const executor = createPgExecutor(testPool(1));
    try {
      const asyncStore = createPostgresStore({ executor, schema: asyncSchema });
      await asyncStore.migrate();
      await asyncStore.outbox.insert([anOutboxMessage()]);
      const show = async (on: SqlExecutor) =>
        (await on.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0]
          ?.synchronous_commit;
      const session = await show(executor);
      // Act: each claim inside a transaction, where the setting it makes stays readable until COMMIT.
      const claimIn = () =>
        executor.transaction(async (tx) => {
          const claim = createOutboxClaim({ executor: tx, schema: asyncSchema });
          const rows = await claim({ batchSize: 5, ...LEASE });
          return { rows: rows.length, setting: await show(tx) };
        });
      const light = await claimIn();
      await asyncStore.outbox.insert([anOutboxMessage({ key: 'k' })]);
      const whole = await executor.transaction(async (tx) => {
        const { text, values } = claimOutboxStatement(asyncSchema, {
          batchSize: 5,
          unkeyedReserve: 2,
          leaseMs: 60_000,
          startAfterKey: null,
          keyScanLimit: 10,
          claimToken: randomUUID(),
        });
        const { rows } = await tx.query<{ id: unknown }>(text, values);
        return { rows: rows.filter((r) => r.id !== null).length, setting: await show(tx) };
      });
      const after = await show(executor);
      // Assess
      expect(session).toBe('on');
      expect(light).toEqual({ rows: 1, setting: 'off' });
      expect(whole).toEqual({ rows: 1, setting: 'off' });
      expect(after).toBe('on');
    } finally {
      await executor.close();
    }
  });
});

describe("the relay's claim and forward-and-claim as named prepared statements", () => {
  const schemas: string[] = [];
  dropSchemasAfterPass(() => schemas);
  const relayClaim = (batchSize: number) => ({ sources: ['s'], batchSize, ...LEASE });
  const forwardOf = (rows: readonly RelayInboxRow[]) =>
    rows.map((r) => ({
      id: r.id,
      claimToken: r.claimToken ?? '',
      outbox: { topic: 't', key: r.aggregateId, headers: { 'x-inbox-id': r.id }, maxAttempts: 3 },
    }));

  /** `value` as SQL text for EXECUTE's arguments (EXPLAIN EXECUTE takes no bound parameters). */
  function sqlLiteral(value: unknown): string {
    if (value === null || value === undefined) return 'NULL';
    if (typeof value === 'number' || typeof value === 'boolean') return String(value);
    if (!Array.isArray(value)) return pg.escapeLiteral(String(value));
    const element = (e: unknown) =>
      e === null ? 'NULL' : `"${String(e).replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
    return pg.escapeLiteral(`{${value.map(element).join(',')}}`);
  }

  /** A store of a fresh schema on a one-connection executor whose replan clock the test moves. */
  async function oneConnectionStore() {
    const relaySchema = freshSchemaName('pg_relay_plan');
    schemas.push(relaySchema);
    const clock = { now: 0 };
    const executor = createPgExecutor(testPool(1), { replanAfterMs: 10_000, now: () => clock.now });
    // The values of each name's last execution, for EXPLAIN EXECUTE.
    const lastValues = new Map<string, readonly unknown[]>();
    const recorder: SqlExecutor = {
      query(text, values, options?: QueryOptions) {
        if (options?.name !== undefined) lastValues.set(options.name, values ?? []);
        return executor.query(text, values, options);
      },
      transaction: (fn) => executor.transaction(fn),
      close: () => executor.close(),
    };
    const store = createPostgresStore({ executor: recorder, schema: relaySchema });
    await store.migrate();
    return { executor, store, clock, lastValues, table: `"${relaySchema}".inbox` };
  }

  /** The generic plans of the relay's statements prepared on the executor's one connection, run with their last values. */
  async function relayPlans(executor: SqlExecutor, lastValues: ReadonlyMap<string, readonly unknown[]>) {
    const { forward, claim } = await relayStatements(executor);
    const plans: string[] = [];
    for (const { name } of [...claim, ...forward]) {
      const values = [...lastValues].find(([given]) => name.startsWith(`${given}_`))?.[1] ?? [];
      const { rows } = await executor.query<{ 'QUERY PLAN': string }>(
        `EXPLAIN EXECUTE "${name}"(${values.map(sqlLiteral).join(', ')})`,
      );
      plans.push(rows.map((r) => r['QUERY PLAN']).join('\n'));
    }
    expect(plans).toHaveLength(2);
    return plans;
  }

  /** Claims and forwards batches of `batchSize` the way the relay does, until a claim takes nothing. */
  async function relayAll(store: Store, batchSize: number): Promise<number> {
    let forwarded = 0;
    let batch = await store.inbox.claimForRelay(relayClaim(batchSize));
    while (batch.length > 0) {
      const step = await store.inbox.forwardAndClaim(forwardOf(batch), relayClaim(batchSize));
      forwarded += step.forwarded.settled.length;
      batch = step.claimed;
    }
    return forwarded;
  }

  /** The relay's prepared statements on the executor's one connection: the claim, and the forward with the claim. */
  async function relayStatements(executor: SqlExecutor) {
    const { rows } = await executor.query<{ name: string; statement: string; executions: number }>(
      `SELECT name, statement, (generic_plans + custom_plans)::int AS executions FROM pg_prepared_statements
        WHERE statement LIKE 'WITH due AS%' OR statement LIKE '%FROM forwarded%' ORDER BY name`,
    );
    const forward = rows.filter((r) => r.statement.includes('FROM forwarded'));
    const claim = rows.filter((r) => !r.statement.includes('FROM forwarded'));
    return { forward, claim };
  }

  it('runs them named: one prepared statement each for every batch, the rows forwarded as before', async () => {
    // Prepare
    const { executor, store, table } = await oneConnectionStore();
    try {
      for (let i = 0; i < 12; i++) await store.inbox.store(anInboxMessage());
      // Act: batches of 3 — a claim, then four forwards each with the claim of the next (the last takes nothing).
      const forwarded = await relayAll(store, 3);
      const { forward, claim } = await relayStatements(executor);
      const { rows } = await executor.query<{ state: string; n: number }>(
        `SELECT state, count(*)::int AS n FROM ${table} GROUP BY state`,
      );
      // Assess
      expect(forwarded).toBe(12);
      expect(rows).toEqual([{ state: 'processed', n: 12 }]);
      expect(claim.map((r) => r.executions)).toEqual([1]);
      expect(forward.map((r) => r.executions)).toEqual([4]);
      expect([...claim, ...forward].every((r) => /^queuebox_[0-9a-f]{24}_/.test(r.name))).toBe(true);
    } finally {
      await executor.close();
    }
  });

  it("the relay's claim prepared while the inbox was small is planned again from the grown table after replanAfterMs", async () => {
    // Prepare: generic plans made while the table held a few rows and had never been analyzed.
    const { executor, store, clock, lastValues, table } = await oneConnectionStore();
    try {
      await executor.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
      await executor.query('SET plan_cache_mode = force_generic_plan');
      for (let i = 0; i < 2; i++) await store.inbox.store(anInboxMessage());
      await relayAll(store, 1);
      const stale = await relayPlans(executor, lastValues);
      await executor.query(
        `INSERT INTO ${table} (source, idempotency_key, payload, max_attempts, state)
         SELECT 's', 'grown-' || g, '{}', 3, 'processed' FROM generate_series(1, 20000) g`,
      );
      for (let i = 0; i < 2; i++) await store.inbox.store(anInboxMessage());
      // No ANALYZE after the growth: it invalidates cached plans by itself, and the test would pass without
      // replanAfterMs (it did, until session 29).
      // Act
      clock.now += 10_000;
      await relayAll(store, 1);
      const replanned = await relayPlans(executor, lastValues);
      // Assess
      expect(stale.join('\n')).toContain('Seq Scan on inbox');
      for (const plan of replanned) expect(plan).not.toContain('Seq Scan on inbox');
    } finally {
      await executor.close();
    }
  });
});
