/**
 * A list page of dead rows, of unknown literals or of processing rows names the filtered index that holds that
 * state's rows, and its predicate implies the index's filter, so the optimizer can follow the hint (it refuses a hint
 * it cannot, error 8622, rather than read something else). Without the hint the page was left to the optimizer's
 * costing, which under TOP's row goal prices a walk of the clustered index in id order, past every sent row, below
 * the key lookups of a filtered index; and the state was a parameter (`o.state = @state`), which matches no filtered
 * index at all. The same defect on PostgreSQL walked the primary key over 1,960,000 sent rows for one page
 * (store-postgres's admin-list-plans test). A page of pending rows names no index: no migration creates one that
 * holds them in id order (one would be written by every stored row), and a hint naming an index that does not exist
 * fails the statement (error 308).
 * Nothing here ran against a real SQL Server: the filters are read from the embedded migrations and the statements
 * through node-sql-parser (tsql-check.ts); the store contract runs the pages where a server is available.
 */
import { type MessageState, QueueBoxError, type Table } from '@queuebox/core';
import type { AdminFilter } from '@queuebox/sql-store-common';
import { describe, expect, it } from 'vitest';
import { adminListStatement } from '../src/admin-sql.ts';
import { MIGRATIONS } from '../src/migrations.generated.ts';
import { SCHEMA } from './statements.ts';
import { checkTsql } from './tsql-check.ts';

/**
 * The filter of filtered index `name` as its last migration creates it, as conjuncts (`state = N'dead'`), or
 * undefined when no migration does.
 */
function indexFilter(name: string): string[] | undefined {
  let filter: string | undefined;
  for (const migration of MIGRATIONS) {
    const pattern = new RegExp(`CREATE INDEX ${name} ON [^;]*?\\bWHERE ([^;]*);`, 'g');
    for (const match of migration.sql.matchAll(pattern)) filter = match[1];
  }
  return filter?.replace(/\s+/g, ' ').trim().split(' AND ');
}

/** The table hints of the statement's FROM, as node-sql-parser reads them: `index outbox_dead`. */
function tableHints(text: string): string[] {
  const { parsed } = checkTsql(text);
  const ast = (Array.isArray(parsed.ast) ? parsed.ast[0] : parsed.ast) as {
    from?: { table_hint?: { expr?: { keyword: string; expr: string[] }[] } }[];
  };
  return (ast.from ?? []).flatMap((from) =>
    (from.table_hint?.expr ?? []).map((hint) => `${hint.keyword} ${hint.expr.join(', ')}`),
  );
}

/** The conjuncts of the statement's WHERE. */
function conjuncts(text: string): string[] {
  return (/\nWHERE (.*)\n/.exec(text)?.[1] ?? '').split(' AND ');
}

const INDEX_OF: Readonly<Record<string, (table: Table) => string>> = {
  Processing: (table) => `${table}_lease`,
  Dead: (table) => `${table}_dead`,
  Failed: (table) => `${table}_unknown_state`,
};

const cases = (['outbox', 'inbox'] as const).flatMap((table) =>
  (['Processing', 'Dead', 'Failed'] as const).flatMap((state) =>
    [false, true].map((named) => {
      const filter: AdminFilter = {
        state,
        ...(named ? (table === 'outbox' ? { topic: 'orders.paid' } : { source: 'stripe' }) : {}),
      };
      return [`${table} ${state}${named ? ' by name' : ''}`, table, filter] as const;
    }),
  ),
);

describe('the admin list page of one state on SQL Server', () => {
  it.each(cases)(
    '%s names the filtered index of the state, whose filter its predicate implies',
    (_, table, filter) => {
      // Prepare
      const index = INDEX_OF[filter.state as string]?.(table) ?? '';
      const filterOf = indexFilter(index);
      // Act
      const first = adminListStatement(SCHEMA, table, filter, null, 51);
      const next = adminListStatement(SCHEMA, table, filter, '41', 51);
      // Assess
      expect(filterOf).toBeDefined();
      for (const statement of [first, next]) {
        expect(tableHints(statement.text)).toEqual([`index ${index}`]);
        // Each conjunct of the index's filter appears as a conjunct of the page's, on the page's alias and literal.
        expect(conjuncts(statement.text)).toEqual(
          expect.arrayContaining((filterOf ?? ['none']).map((c) => `o.${c}`)),
        );
        expect(Object.keys(statement.values)).not.toContain('state');
      }
    },
  );

  it.each(
    (['outbox', 'inbox'] as const).flatMap((table) =>
      (['Pending', 'Processing', 'Sent', 'Dead', 'Failed', undefined] as const).map(
        (state) => [table, state] as const,
      ),
    ),
  )('%s %s: every index a page names is one the migrations create', (table, state) => {
    // Act
    const statement = adminListStatement(SCHEMA, table, state === undefined ? {} : { state }, '41', 51);
    // Assess
    for (const hint of tableHints(statement.text)) {
      expect(indexFilter(hint.replace(/^index /, ''))).toBeDefined();
    }
  });

  it.each(['outbox', 'inbox'] as const)(
    '%s: a page of pending rows names no index, and states the pending literal',
    (table) => {
      // Act
      const first = adminListStatement(SCHEMA, table, { state: 'Pending' }, null, 51);
      const next = adminListStatement(SCHEMA, table, { state: 'Pending' }, '41', 51);
      // Assess
      for (const statement of [first, next]) {
        expect(tableHints(statement.text)).toEqual([]);
        expect(conjuncts(statement.text)).toContain("o.state = N'pending'");
        expect(Object.keys(statement.values)).not.toContain('state');
      }
      expect(indexFilter(`${table}_pending`)).toBeUndefined();
    },
  );

  it.each([
    ['outbox', { state: 'Sent' as MessageState }],
    ['outbox', { topic: 'orders.paid' }],
    ['inbox', { state: 'Sent' as MessageState, source: 'stripe' }],
    ['inbox', {}],
  ] as const)('%s: a page of sent rows or of every state reads the clustered index (%j)', (table, filter) => {
    // Act
    const statement = adminListStatement(SCHEMA, table, filter, '41', 51);
    // Assess
    expect(tableHints(statement.text)).toEqual([]);
  });

  it('writes the sent literal of each table, and refuses a state core does not know', () => {
    // Act
    const outbox = adminListStatement(SCHEMA, 'outbox', { state: 'Sent' }, null, 51);
    const inbox = adminListStatement(SCHEMA, 'inbox', { state: 'Sent' }, null, 51);
    // Assess
    expect(conjuncts(outbox.text)).toEqual(["o.state = N'sent'"]);
    expect(conjuncts(inbox.text)).toEqual(["o.state = N'processed'"]);
    expect(() =>
      adminListStatement(SCHEMA, 'outbox', { state: "x' OR 1=1 --" as MessageState }, null, 51),
    ).toThrow(QueueBoxError);
  });
});
