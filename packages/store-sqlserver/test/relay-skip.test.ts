/**
 * The relay's claim that skips held aggregate ids on SQL Server (`skippedSteps` in inbox-claim.ts), checked as text
 * (no SQL Server runs here; test/contract/inbox-relay-order-contract.ts runs the semantics where one does): the
 * plain claim carries no trace of skipping; a skipping claim reads the due rows without keeping a lock, passes over
 * the skipped ids exactly, locks only what it keeps, probes each skipped id for a processing row, and answers the
 * rows holding blocked rows back (`blocked_by`) as the store reads them.
 */
import { MAX_SKIP_SCAN_ROWS, MAX_SKIPPED_AGGREGATES } from '@queuebox/core';
import mssql from 'mssql';
import { describe, expect, it } from 'vitest';
import type { QueryResult, SqlExecutor, SqlParams } from '../src/executor.ts';
import { claimInboxStatement } from '../src/inbox-claim.ts';
import { createSqlServerInboxStore } from '../src/inbox-store.ts';
import type { RawRow } from '../src/rows.ts';
import type { Ast } from './parse-tables.ts';
import { OPENJSON_WITH, RCLOCK, TOP } from './parse-tables.ts';
import { SCHEMA } from './statements.ts';
import { checkTsql } from './tsql-check.ts';

const t = `[${SCHEMA}].[inbox]`;
const TAKEN = 'WITH (UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK';
const NOW = 'CAST(SYSUTCDATETIME() AS DATETIME2(3))';
const relay = {
  sources: ['stripe'],
  batchSize: 100,
  leaseMs: 300_000,
  takeOverExpired: false,
  payload: false,
};
const plain = claimInboxStatement(SCHEMA, relay);
const skipping = claimInboxStatement(SCHEMA, { ...relay, skipAggregatesOf: ['41', '7'] });

/** The `@name`s a text binds (not DECLAREd), as parameters.test.ts reads them. */
function boundNames(text: string): string[] {
  const code = text.replace(/N?'(?:[^']|'')*'/g, "''");
  const declared = new Set([...code.matchAll(/DECLARE @([A-Za-z_]\w*)/g)].map((m) => m[1]));
  const used = [...code.matchAll(/(?<!@)@([A-Za-z_]\w*)/g)].map((m) => m[1] ?? '');
  return [...new Set(used.filter((name) => !declared.has(name)))].sort();
}

describe("the relay's claim on SQL Server, skipping held aggregate ids", () => {
  it('is the plain claim when nothing is skipped: no skipping step, no @skip', () => {
    const empty = claimInboxStatement(SCHEMA, { ...relay, skipAggregatesOf: [] });

    expect(empty).toEqual(plain);
    for (const name of ['@skip', '@skipped', '@unlocked', '@held', '@skipScan'])
      expect(plain.text).not.toContain(name);
    expect(Object.keys(plain.values).sort()).toEqual(['batchSize', 'leaseMs', 'perSource', 'sources']);
    expect(boundNames(plain.text)).toEqual(['batchSize', 'leaseMs', 'perSource', 'sources']);
  });

  it('parses, binds exactly the @names its text uses, each typed, and passes the skipped row ids as JSON', () => {
    const { verbatim, setAside, parsed } = checkTsql(skipping.text);
    const types = (Array.isArray(parsed.ast) ? parsed.ast : [parsed.ast]).map((st) => (st as Ast).type);

    expect({ verbatim, setAside }).toEqual({ verbatim: 'failed', setAside: [TOP, OPENJSON_WITH, RCLOCK] });
    expect(types).toEqual([
      ...['set', 'set', 'set'],
      ...Array.from({ length: 9 }, () => 'declare'),
      undefined, // BEGIN TRANSACTION
      // @skipped, @unlocked, @window, @earlier, @candidates, @blocked, @held, @blockedBy, the UPDATE, the answer
      ...['insert', 'insert', 'insert', 'insert', 'insert', 'select', 'insert', 'select', 'update', 'select'],
      undefined, // COMMIT TRANSACTION
      ...['set', 'set'],
    ]);
    expect(boundNames(skipping.text)).toEqual(Object.keys(skipping.values).sort());
    expect(skipping.values.skip).toEqual({ type: mssql.NVarChar(mssql.MAX), value: '["41","7"]' });
    expect(skipping.values.skipScan).toEqual({ type: mssql.Int, value: MAX_SKIP_SCAN_ROWS });
  });

  it('reads the due rows without keeping a lock, at most @skipScan per source, and passes over the skipped ids exactly', () => {
    expect(skipping.text).toContain(
      [
        'INSERT INTO @skipped (id, source, aggregate_id)',
        'SELECT r.id, r.source, r.aggregate_id',
        "FROM OPENJSON(@skip) WITH (id BIGINT '$') AS k",
        `INNER JOIN ${t} AS r WITH (FORCESEEK) ON r.id = k.id`,
        'WHERE r.aggregate_id IS NOT NULL;',
      ].join('\n'),
    );
    expect(skipping.text).toContain(
      'DECLARE @skipped TABLE (id BIGINT NOT NULL PRIMARY KEY, source NVARCHAR(200) COLLATE Latin1_General_100_BIN2 NOT NULL, aggregate_id NVARCHAR(450) COLLATE Latin1_General_100_BIN2 NOT NULL, UNIQUE (source, aggregate_id, id));',
    );
    expect(skipping.text).toContain(
      [
        '  SELECT TOP (@perSource) c.id',
        '  FROM (',
        '    SELECT TOP (@skipScan) c.id, c.source, c.aggregate_id, c.scheduled_at',
        `    FROM ${t} AS c WITH (READPAST, ROWLOCK, READCOMMITTEDLOCK, INDEX(inbox_due))`,
        `    WHERE c.source = s.source COLLATE Latin1_General_100_BIN2 AND DATALENGTH(c.source) = DATALENGTH(s.source) AND c.state = N'pending' AND c.scheduled_at <= ${NOW}`,
        '    ORDER BY c.scheduled_at, c.id',
        '  ) AS c',
        '  WHERE c.aggregate_id IS NULL OR NOT EXISTS (',
        '    SELECT 1 FROM @skipped AS k',
        '    WHERE k.source = c.source AND DATALENGTH(k.source) = DATALENGTH(c.source)',
        '      AND k.aggregate_id = c.aggregate_id COLLATE Latin1_General_100_BIN2 AND DATALENGTH(k.aggregate_id) = DATALENGTH(c.aggregate_id)',
        '  )',
        '  ORDER BY c.scheduled_at, c.id',
        ') AS u;',
      ].join('\n'),
    );
  });

  it('locks only the rows it keeps, by primary key, pending and due again: still two taking reads, the window and the heads', () => {
    expect(skipping.text).toContain(
      [
        'FROM @unlocked AS u',
        `INNER JOIN ${t} AS d ${TAKEN}, FORCESEEK) ON d.id = u.id`,
        `WHERE d.state = N'pending' AND d.scheduled_at <= ${NOW};`,
      ].join('\n'),
    );
    expect(skipping.text.split(TAKEN).length - 1).toBe(2);
    expect(skipping.text).not.toContain(`${t} AS i ${TAKEN})`);
    // The rest of the claim is the plain one's, but for the probe of the skipped ids and their place in @blockedBy.
    const rest = (text: string) => text.slice(text.indexOf('INSERT INTO @earlier'));
    const probe = /INSERT INTO @held[\s\S]*?;\n(?=SELECT @blockedBy)/;
    const held = '\n    UNION ALL\n    SELECT h.id, 0 FROM @held AS h';
    expect(skipping.text).toMatch(probe);
    expect(skipping.text).toContain(held);
    expect(rest(skipping.text).replace(probe, '').replace(held, '')).toEqual(rest(plain.text));
  });

  it('names a skipped id again while its oldest active row is processing (an inbox row against an inbox row), before the ids of the window', () => {
    expect(skipping.text).toContain(
      [
        'INSERT INTO @held (id)',
        'SELECT DISTINCT e.id',
        'FROM @skipped AS k',
        `INNER JOIN ${t} AS r WITH (FORCESEEK) ON r.id = k.id`,
        'CROSS APPLY (',
        '  SELECT TOP (1) e.id',
        `  FROM ${t} AS e`,
        '  WHERE e.source = r.source AND DATALENGTH(e.source) = DATALENGTH(r.source)',
        '    AND e.aggregate_id = r.aggregate_id',
        '    AND e.aggregate_id = r.aggregate_id COLLATE Latin1_General_100_BIN2 AND DATALENGTH(e.aggregate_id) = DATALENGTH(r.aggregate_id)',
        "    AND e.state IN (N'pending', N'processing') AND e.aggregate_id IS NOT NULL",
        '  ORDER BY e.id',
        ') AS e',
        `INNER JOIN ${t} AS a WITH (FORCESEEK) ON a.id = e.id`,
        "WHERE a.state = N'processing';",
      ].join('\n'),
    );
    for (const text of [plain.text, skipping.text]) {
      expect(text).toContain(
        `SELECT @blockedBy = (\n  SELECT TOP (${MAX_SKIPPED_AGGREGATES}) CAST(b.id AS NVARCHAR(20)) AS id\n`,
      );
      expect(text).toContain('  ORDER BY b.window_row, b.id\n  FOR JSON PATH\n);\n');
    }
  });
});

describe("the SQL Server store's relay claim and forward-and-claim, skipping", () => {
  /** An executor that answers each claim with `answer` and anything else with nothing; records every query. */
  function scriptedExecutor(answer: RawRow[]) {
    const seen: { text: string; values: SqlParams }[] = [];
    const executor: SqlExecutor = {
      async query<R>(text: string, values?: SqlParams) {
        seen.push({ text, values: values ?? {} });
        const rows = text.includes('DECLARE @claimToken') ? answer : [];
        return { rows, rowCount: rows.length } as unknown as QueryResult<R>;
      },
      transaction: (fn) => fn(executor),
      close: async () => {},
    };
    return { executor, seen };
  }

  it('passes the valid, distinct ids (at most MAX_SKIPPED_AGGREGATES) and reads blocked_by into blockedBy', async () => {
    const { executor, seen } = scriptedExecutor([
      { blocked: 0, blocked_by: '[{"id":"41"},{"id":"9"}]', id: null },
    ]);
    const inbox = createSqlServerInboxStore({ executor, schema: SCHEMA });
    const many = Array.from({ length: MAX_SKIPPED_AGGREGATES + 5 }, (_, i) => String(i + 1));

    const claimed = await inbox.claimForRelay({
      sources: ['stripe'],
      batchSize: 10,
      leaseMs: 1000,
      skipAggregatesOf: ['41', 'x', '41', '0', ...many],
    });

    expect(claimed).toHaveLength(0);
    expect(claimed.blocked).toBeUndefined();
    expect(claimed.blockedBy).toEqual(['41', '9']);
    const skip = JSON.parse(String(seen[0]?.values.skip?.value)) as string[];
    expect(skip).toHaveLength(MAX_SKIPPED_AGGREGATES);
    expect(skip.slice(0, 3)).toEqual(['41', '1', '2']);
  });

  it('skips in the claim of forwardAndClaim too, and answers no blockedBy when blocked_by is NULL', async () => {
    const { executor, seen } = scriptedExecutor([{ blocked: 2, blocked_by: null, id: null }]);
    const inbox = createSqlServerInboxStore({ executor, schema: SCHEMA });

    const step = await inbox.forwardAndClaim([], {
      sources: ['stripe'],
      batchSize: 10,
      leaseMs: 1000,
      skipAggregatesOf: ['41'],
    });
    const claim = seen.find((q) => q.text.includes('DECLARE @claimToken'));

    expect(claim?.values.skip?.value).toBe('["41"]');
    expect(claim?.text).toContain('INSERT INTO @unlocked (id)');
    expect(step.claimed.blocked).toBe(2);
    expect(step.claimed.blockedBy).toBeUndefined();
  });
});
