/**
 * A list page of one state reads that state's rows, never the primary key past the rows of the other states. Found by
 * a scale audit: the list statement filtered by state and ordered by id, so PostgreSQL walked `*_pkey` from the
 * cursor over every sent row before the first pending one (1.78 s a page at 5,000,000 rows; 39,355 buffers and 0.9 s
 * at 2,000,000), and the state was a parameter, which proves no partial index's predicate in a generic plan.
 *
 * Dead rows and unknown literals are read from their indexes in id order (0007, 0008). Pending rows have no such
 * index, on purpose (every stored row would write it): their page walks a bounded stretch of the primary key, and
 * when that does not fill the page reads the ids from the claims' indexes (adminListStatement, `pendingPageText`).
 *
 * The tables here hold 100,000 sent (processed) rows first, a few pending rows among them (retries), then the rows of
 * the other states, as an outbox does whose backlog is younger than what retention keeps; before the outbox's backlog,
 * a run of keyed processing rows, which the keyed ids of `outbox_active_key` hold too. Plans are checked both as the
 * store runs the statement (unnamed: planned with the values) and as a generic plan (a named statement after its
 * fifth run, or a pooler's).
 */
import { MessageState, type Store, type Table } from '@queuebox/core';
import {
  dropSchemasAfterPass,
  ensurePlanTestDatabase,
  freshSchemaName,
  planTestPostgresUrl,
  testPool,
} from '@queuebox/testing';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AdminFilter,
  adminListStatement,
  adminNextDueStatement,
  adminOldestPendingStatement,
  adminStateCountsStatement,
  createPgExecutor,
  MIGRATIONS,
  PENDING_WALK_ROWS_PER_ROW,
  runMigrations,
  type SqlExecutor,
  type Statement,
} from '../src/index.ts';
import { openPostgresStore } from '../src/store.ts';

const schema = freshSchemaName('pg_admin_list_plans');
const upgraded = freshSchemaName('pg_admin_list_mig8');
// In the plan tests' own database, which the rest of the suite's open transactions do not keep from being vacuumed.
dropSchemasAfterPass(() => [schema, upgraded], planTestPostgresUrl());

const SENT_ROWS = 100_000;
/** Every this many sent rows, one is pending instead (a retry of an old row). */
const RETRY_EVERY = 10_000;
/** Rows after the sent ones: most pending, the others processing, dead, or of a literal a newer version wrote. */
const BACKLOG = 4_000;
/** Keyed processing rows of the outbox between the sent rows and the backlog. */
const KEYED_PROCESSING = 80;
/** A page as the admin route asks for it: 50 rows, and one more to tell whether another page exists. */
const PAGE = 51;
/** The most rows of the primary key a page of pending rows may read: its bounded walk. */
const WALK = PAGE * PENDING_WALK_ROWS_PER_ROW;

interface PlanNode {
  readonly 'Node Type': string;
  readonly 'Relation Name'?: string;
  readonly 'Index Name'?: string;
  readonly 'Index Cond'?: string;
  readonly 'Shared Hit Blocks'?: number;
  readonly 'Shared Read Blocks'?: number;
  readonly 'Actual Rows'?: number;
  readonly 'Actual Loops'?: number;
  readonly 'Rows Removed by Filter'?: number;
  readonly Plans?: readonly PlanNode[];
}

/** Every node of `plan`, depth first. */
function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/** Every node of `plan` that reads a table or an index: `Seq Scan outbox`, `Index Scan outbox_dead`, … */
function scans(plan: PlanNode): string[] {
  return nodes(plan).flatMap((node) => {
    const own = node['Index Name'] ?? node['Relation Name'];
    return own === undefined ? [] : [`${node['Node Type']} ${own}`];
  });
}

/** The rows the executed plan read from index `index` (returned or filtered out, over every loop). */
function rowsRead(plan: PlanNode, index: string): number {
  return nodes(plan)
    .filter((node) => node['Index Name'] === index)
    .reduce(
      (sum, node) =>
        sum +
        (node['Actual Rows'] ?? 0) * (node['Actual Loops'] ?? 1) +
        (node['Rows Removed by Filter'] ?? 0),
      0,
    );
}

function buffersOf(plan: PlanNode): number {
  return (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0);
}

/** The plan of an `EXPLAIN (FORMAT JSON)` answer. */
function planOf(rows: readonly { 'QUERY PLAN': readonly { Plan: PlanNode }[] }[]): PlanNode {
  const plan = rows[0]?.['QUERY PLAN'][0]?.Plan;
  if (plan === undefined) throw new Error('EXPLAIN answered no plan');
  return plan;
}

/** The index each state's page reads in id order (see adminListStatement); pending rows have none. */
const STATE_INDEX: Readonly<Record<string, (table: Table) => string>> = {
  Processing: (table) => `${table}_lease`,
  Dead: (table) => `${table}_dead`,
  Failed: (table) => `${table}_unknown_state`,
};

/** The claims' indexes a page of pending rows reads their ids from when its walk does not fill it. */
const CLAIM_INDEXES: Readonly<Record<Table, readonly string[]>> = {
  outbox: ['outbox_due_unkeyed', 'outbox_active_key'],
  inbox: ['inbox_due'],
};

/**
 * VACUUM ANALYZE `table` until the visibility map marks its pages all-visible, as autovacuum keeps a table whose rows
 * are mostly old. A VACUUM marks none while a transaction that started before the inserts runs (another test file's,
 * in parallel), and the planner then prices each read of an index without the table as a read of the table too,
 * which on a table this small turns the pending rows' ids to a read of the primary key from the cursor.
 */
async function vacuumUntilAllVisible(client: pg.PoolClient, table: string): Promise<void> {
  for (let attempt = 0; ; attempt += 1) {
    await client.query(`VACUUM ANALYZE ${table}`);
    const { rows } = await client.query<{ visible: boolean }>(
      'SELECT relallvisible >= 0.9 * relpages AS visible FROM pg_class WHERE oid = $1::regclass',
      [table],
    );
    if (rows[0]?.visible) return;
    if (attempt === 40)
      throw new Error(`VACUUM of ${table} left its pages not all-visible: an old transaction runs`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

describe('the admin list pages of one state on a table that holds 100,000 sent rows', () => {
  let pool: pg.Pool;
  let client: pg.PoolClient;
  let store: Store;
  const unknown = { outbox: [] as string[], inbox: [] as string[] };
  /** A cursor inside the backlog, where most rows are pending. */
  const inBacklog = { outbox: '', inbox: '' };

  beforeAll(async () => {
    const url = await ensurePlanTestDatabase();
    pool = testPool(2, url);
    store = await openPostgresStore({ url, schema, poolSize: 2 });
    await store.migrate();
    client = await pool.connect();
    const outbox = `"${schema}".outbox`;
    const inbox = `"${schema}".inbox`;
    await client.query(
      `INSERT INTO ${outbox} (topic, key, payload, state, attempt, max_attempts, sent_at)
       SELECT 't' || (g % 5), CASE WHEN g % 2 = 0 THEN 'r' || (g % 7) END, '{}',
              CASE WHEN g % ${RETRY_EVERY} = 0 THEN 'pending' ELSE 'sent' END, 1, 3,
              CASE WHEN g % ${RETRY_EVERY} <> 0 THEN now() END
       FROM generate_series(1, ${SENT_ROWS}) g`,
    );
    await client.query(
      `INSERT INTO ${outbox} (topic, key, payload, state, max_attempts, lease_until, claim_token)
       SELECT 't' || (g % 5), 'k' || (g % 40), '{}', 'processing', 3, now() + interval '5 minutes', gen_random_uuid()
       FROM generate_series(1, ${KEYED_PROCESSING}) g`,
    );
    // Then the backlog: pending (keyed and not), processing, dead and rows of a literal a newer version wrote.
    await client.query(
      `INSERT INTO ${outbox} (topic, key, payload, state, max_attempts, lease_until, claim_token)
       SELECT 't' || (g % 5), CASE WHEN g % 2 = 0 THEN 'k' || (g % 40) END, '{}', s, 3,
              CASE WHEN s = 'processing' THEN now() + interval '5 minutes' END,
              CASE WHEN s = 'processing' THEN gen_random_uuid() END
       FROM generate_series(1, ${BACKLOG}) g,
            LATERAL (SELECT CASE WHEN g % 40 IN (1, 4) THEN 'processing' WHEN g % 8 = 2 THEN 'dead'
                                 WHEN g % 20 = 3 THEN 'archived' ELSE 'pending' END AS s) x`,
    );
    await client.query(
      `INSERT INTO ${inbox} (source, idempotency_key, payload, state, max_attempts, processed_at)
       SELECT 's' || (g % 5), 'p' || g, '{}', CASE WHEN g % ${RETRY_EVERY} = 0 THEN 'pending' ELSE 'processed' END,
              3, CASE WHEN g % ${RETRY_EVERY} <> 0 THEN now() END
       FROM generate_series(1, ${SENT_ROWS}) g`,
    );
    await client.query(
      `INSERT INTO ${inbox} (source, idempotency_key, payload, state, max_attempts, lease_until, claim_token)
       SELECT 's' || (g % 5), 'n' || g, '{}', s, 3,
              CASE WHEN s = 'processing' THEN now() + interval '5 minutes' END,
              CASE WHEN s = 'processing' THEN gen_random_uuid() END
       FROM generate_series(1, ${BACKLOG}) g,
            LATERAL (SELECT CASE WHEN g % 40 = 1 THEN 'processing' WHEN g % 8 = 2 THEN 'dead'
                                 WHEN g % 20 = 3 THEN 'quarantined' ELSE 'pending' END AS s) x`,
    );
    for (const table of ['outbox', 'inbox'] as const) {
      await vacuumUntilAllVisible(client, `"${schema}".${table}`);
      const { rows } = await client.query<{ id: string }>(
        `SELECT o.id::text AS id FROM "${schema}".${table} o WHERE o.state IN ('archived', 'quarantined') ORDER BY o.id`,
      );
      unknown[table] = rows.map((r) => r.id);
      const { rows: tail } = await client.query<{ id: string }>(
        `SELECT o.id::text AS id FROM "${schema}".${table} o WHERE o.state = 'pending' ORDER BY o.id OFFSET 100 LIMIT 1`,
      );
      inBacklog[table] = tail[0]?.id ?? '';
    }
  });
  afterAll(async () => {
    client.release();
    await pool.end();
    await store.close();
  });

  /** The plan of `statement` as the store runs it: unnamed, so planned with its values. */
  async function customPlan(statement: Statement, analyze = false): Promise<PlanNode> {
    const options = analyze ? 'ANALYZE, BUFFERS, FORMAT JSON' : 'FORMAT JSON';
    const { rows } = await client.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(
      `EXPLAIN (${options}) ${statement.text}`,
      [...statement.values],
    );
    return planOf(rows);
  }

  /** The generic plan of `statement`: the one a named statement keeps after its fifth run, made from its text alone. */
  async function genericPlan(statement: Statement, analyze = false): Promise<PlanNode> {
    const literal = (value: unknown) =>
      typeof value === 'number' ? String(value) : client.escapeLiteral(String(value));
    await client.query(`PREPARE admin_list AS ${statement.text}`);
    try {
      await client.query('SET plan_cache_mode = force_generic_plan');
      const args = statement.values.length > 0 ? `(${statement.values.map(literal).join(', ')})` : '';
      const options = analyze ? 'ANALYZE, BUFFERS, FORMAT JSON' : 'FORMAT JSON';
      const { rows } = await client.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(
        `EXPLAIN (${options}) EXECUTE admin_list${args}`,
      );
      return planOf(rows);
    } finally {
      await client.query('RESET plan_cache_mode');
      await client.query('DEALLOCATE admin_list');
    }
  }

  const named = (table: Table): AdminFilter => (table === 'outbox' ? { topic: 't1' } : { source: 's1' });

  const cases = (['outbox', 'inbox'] as const).flatMap((table) =>
    (['Processing', 'Dead', 'Failed'] as const).flatMap((state) =>
      [false, true].flatMap((byName) =>
        [null, '100'].map((cursor) => {
          const filter: AdminFilter = { state, ...(byName ? named(table) : {}) };
          return [
            `${table} ${state}${byName ? ' by name' : ''}${cursor ? ' after 100' : ''}`,
            table,
            filter,
            cursor,
          ] as const;
        }),
      ),
    ),
  );

  // A generic plan guesses that a LIMIT parameter takes a tenth of the rows, and for the processing rows, which no
  // index holds in id order, on a table this small that guess prices a walk of the primary key below a sort of
  // them all; the store runs the list unnamed, planned with its limit, so only the custom plan is checked there.
  it.each(cases)(
    '%s reads the state index, in a custom and (id order) in a generic plan',
    async (_, table, filter, cursor) => {
      // Prepare
      const statement = adminListStatement(schema, table, filter, cursor, PAGE);
      const index = STATE_INDEX[filter.state as string]?.(table);
      // Act
      const plans = [await customPlan(statement)];
      if (filter.state !== 'Processing') plans.push(await genericPlan(statement));
      // Assess: the state's index, no walk of the primary key and no scan of every row.
      for (const read of plans.map(scans)) {
        expect(read.some((scan) => scan.endsWith(` ${index}`))).toBe(true);
        expect(read.filter((scan) => scan.endsWith(`${table}_pkey`) || scan.startsWith('Seq Scan'))).toEqual(
          [],
        );
      }
    },
  );

  const pendingCases = (['outbox', 'inbox'] as const).flatMap((table) =>
    [false, true].flatMap((byName) =>
      (['first page', 'after 100', 'in the backlog'] as const).flatMap((where) =>
        (['custom', 'generic'] as const).map((kind) => {
          const filter: AdminFilter = { state: 'Pending', ...(byName ? named(table) : {}) };
          return [
            `${table}${byName ? ' by name' : ''}, ${where}, ${kind} plan`,
            table,
            filter,
            where,
            kind,
          ] as const;
        }),
      ),
    ),
  );

  it.each(pendingCases)(
    'a page of pending rows (%s) reads no more of the primary key than its walk, and no table scan',
    async (_, table, filter, where, kind) => {
      // Prepare
      const cursor = where === 'first page' ? null : where === 'after 100' ? '100' : inBacklog[table];
      const statement = adminListStatement(schema, table, filter, cursor, PAGE);
      // Act
      const plan = kind === 'custom' ? await customPlan(statement, true) : await genericPlan(statement, true);
      const read = scans(plan);
      // Assess: the old page read the primary key from the cursor up to its 51st pending row, past 100,000 sent rows.
      expect(read.filter((scan) => scan.startsWith('Seq Scan'))).toEqual([]);
      expect(rowsRead(plan, `${table}_pkey`)).toBeLessThanOrEqual(WALK + PAGE + KEYED_PROCESSING + 100);
      if (where !== 'in the backlog') {
        // The walk from here finds fewer than a page (one pending row in 10,000): the ids come from the claims' indexes.
        for (const index of CLAIM_INDEXES[table])
          expect(read.some((scan) => scan.endsWith(` ${index}`))).toBe(true);
      } else if (filter.topic === undefined && filter.source === undefined) {
        // Inside the backlog the walk fills the page, and nothing else is read.
        expect(rowsRead(plan, `${table}_pkey`)).toBeLessThan(3 * PAGE);
        for (const index of CLAIM_INDEXES[table]) expect(rowsRead(plan, index)).toBe(0);
      }
    },
  );

  it.each(['outbox', 'inbox'] as const)(
    'a page of pending %s rows behind the sent ones reads a bounded number of buffers, not the sent rows',
    async (table) => {
      // Act
      const first = await customPlan(
        adminListStatement(schema, table, { state: 'Pending' }, null, PAGE),
        true,
      );
      const next = await customPlan(
        adminListStatement(schema, table, { state: 'Pending' }, inBacklog[table], PAGE),
        true,
      );
      // Assess: the walk (2,550 rows, about 45 buffers), the claims' indexes, and about two buffers per id looked up
      // (the outbox's skip the 80 keyed processing rows); the walk of the primary key read every sent row's page
      // (about 1,700 buffers). Inside the backlog, the walk alone.
      expect(buffersOf(first)).toBeLessThan(500);
      expect(buffersOf(next)).toBeLessThan(20);
    },
  );

  it('pages through the rows of each state in ascending id order, each row once, as plain SQL lists them', async () => {
    for (const table of ['outbox', 'inbox'] as const) {
      for (const state of [MessageState.Pending, MessageState.Processing, MessageState.Dead] as const) {
        for (const byName of [false, true]) {
          const literal = { Pending: 'pending', Processing: 'processing', Dead: 'dead' }[state];
          const column = table === 'outbox' ? 'topic' : 'source';
          const name = table === 'outbox' ? 't1' : 's1';
          const { rows } = await client.query<{ id: string }>(
            `SELECT o.id::text AS id FROM "${schema}".${table} o
             WHERE o.state = $1 ${byName ? `AND o.${column} = $2` : ''} ORDER BY o.id`,
            byName ? [literal, name] : [literal],
          );
          // Act
          const listed = await allPages(table, state, byName ? name : undefined);
          // Assess
          expect(listed).toEqual(rows.map((r) => r.id));
          expect(listed.length).toBeGreaterThan(byName ? 8 : 40);
        }
      }
      expect(await allPages(table, MessageState.Failed)).toEqual(unknown[table]);
    }
    expect(unknown.outbox).toHaveLength(200);
  });

  it('counts the pending rows from the claims indexes, not the table', async () => {
    for (const table of ['outbox', 'inbox'] as const) {
      // Act
      const statement = adminStateCountsStatement(schema, table);
      const read = scans(await customPlan(statement));
      const { rows } = await client.query<{ state: string; n: string }>(statement.text);
      const { rows: plain } = await client.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${schema}".${table} WHERE state = 'pending'`,
      );
      // Assess
      for (const index of CLAIM_INDEXES[table])
        expect(read.some((scan) => scan.endsWith(` ${index}`))).toBe(true);
      expect(read.filter((scan) => scan.startsWith('Seq Scan') || scan.endsWith(`${table}_pkey`))).toEqual(
        [],
      );
      expect(Number(rows.find((r) => r.state === 'pending')?.n)).toBe(plain[0]?.n);
      expect(plain[0]?.n).toBe(table === 'outbox' ? 3110 : 3210);
    }
  });

  async function allPages(table: Table, state: MessageState, name?: string): Promise<string[]> {
    const ids: string[] = [];
    let cursor: string | null = null;
    do {
      const options = { state, limit: 30, ...(cursor ? { cursor } : {}) };
      const page: { rows: readonly { id: string }[]; nextCursor: string | null } =
        table === 'outbox'
          ? await store.admin.list('outbox', { ...options, ...(name ? { topic: name } : {}) })
          : await store.admin.list('inbox', { ...options, ...(name ? { source: name } : {}) });
      ids.push(...page.rows.map((r) => r.id));
      cursor = page.nextCursor;
    } while (cursor !== null);
    return ids;
  }
});

describe('migration 0008', () => {
  /** The scans of the plan of each gauge and count statement, by name. */
  async function gaugePlans(executor: SqlExecutor, s: string): Promise<Record<string, string[]>> {
    const statements: Record<string, Statement> = {
      'oldest pending, outbox': adminOldestPendingStatement(s, 'outbox'),
      'oldest pending, inbox': adminOldestPendingStatement(s, 'inbox'),
      'next due, outbox': adminNextDueStatement(s, 'outbox', null),
      'next due, inbox': adminNextDueStatement(s, 'inbox', ['s']),
      'counts, outbox': adminStateCountsStatement(s, 'outbox'),
      'counts, inbox': adminStateCountsStatement(s, 'inbox'),
    };
    const plans: Record<string, string[]> = {};
    for (const [name, statement] of Object.entries(statements)) {
      const { rows } = await executor.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(
        `EXPLAIN (FORMAT JSON) ${statement.text}`,
        statement.values,
      );
      plans[name] = scans(planOf(rows));
    }
    return plans;
  }

  it('applies alone to a schema at 0007 that holds rows, indexes the unknown-literal rows by id, and no pending row', async () => {
    // Prepare
    const executor = createPgExecutor(testPool(1, await ensurePlanTestDatabase()));
    try {
      await runMigrations(executor, {
        schema: upgraded,
        migrations: MIGRATIONS.filter((m) => m.version <= 7),
      });
      await executor.query(
        `INSERT INTO "${upgraded}".outbox (topic, key, payload, max_attempts, state)
         SELECT 't', CASE WHEN g % 2 = 0 THEN 'k' || g END, '{}', 3,
                CASE WHEN g % 3 = 0 THEN 'sent' WHEN g % 3 = 1 THEN 'pending' ELSE 'archived' END
         FROM generate_series(1, 3000) g`,
      );
      await executor.query(
        `INSERT INTO "${upgraded}".inbox (source, idempotency_key, payload, max_attempts, state)
         SELECT 's', 'i' || g, '{}', 3, CASE WHEN g % 3 = 0 THEN 'processed' ELSE 'pending' END
         FROM generate_series(1, 3000) g`,
      );
      await executor.query(`VACUUM ANALYZE "${upgraded}".outbox`);
      await executor.query(`VACUUM ANALYZE "${upgraded}".inbox`);
      const indexes = async () =>
        (
          await executor.query<{ indexname: string; indexdef: string }>(
            'SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname',
            [upgraded],
          )
        ).rows.map((r) => r.indexdef.replace(`${upgraded}.`, ''));
      const indexesBefore = await indexes();
      const before = await gaugePlans(executor, upgraded);
      // Act
      const report = await runMigrations(executor, {
        schema: upgraded,
        migrations: MIGRATIONS.filter((m) => m.version <= 8),
      });
      await executor.query(`ANALYZE "${upgraded}".outbox`);
      await executor.query(`ANALYZE "${upgraded}".inbox`);
      const after = await gaugePlans(executor, upgraded);
      const added = (await indexes()).filter((index) => !indexesBefore.includes(index));
      const { rows: counted } = await executor.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${upgraded}".outbox WHERE state NOT IN ('pending', 'processing', 'sent', 'dead')`,
      );
      // Assess: the two unknown-literal indexes and nothing else (no index of the pending rows, which every stored row
      // would write); the gauges and counts planned as at 0007.
      expect(report.applied).toEqual([{ version: 8, name: 'admin_list_indexes' }]);
      expect(added).toEqual([
        "CREATE INDEX inbox_unknown_state ON inbox USING btree (id) WHERE ((state)::text <> ALL ((ARRAY['pending'::character varying, 'processing'::character varying, 'processed'::character varying, 'dead'::character varying])::text[]))",
        "CREATE INDEX outbox_unknown_state ON outbox USING btree (id) WHERE ((state)::text <> ALL ((ARRAY['pending'::character varying, 'processing'::character varying, 'sent'::character varying, 'dead'::character varying])::text[]))",
      ]);
      expect(after).toEqual(before);
      expect(counted[0]?.n).toBe(1000);
    } finally {
      await executor.close();
    }
  });
});
