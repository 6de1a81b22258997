import mssql from 'mssql';
import { describe, expect, it } from 'vitest';
import type { SqlParam } from '../src/executor.ts';
import { claimInboxStatement, rowsPerSource } from '../src/inbox-claim.ts';
import { insertInboxStatement } from '../src/inbox-dedupe.ts';
import { reclaimExpiredInboxStatement } from '../src/lease.ts';
import { claimOutboxStatement } from '../src/outbox-claim.ts';
import {
  insertOutboxStatement,
  MAX_DELAY_MS,
  MAX_ROWS_PER_STATEMENT,
  markOutboxDeadStatement,
  retryOutboxStatement,
} from '../src/outbox-sql.ts';
import { tablesOf } from '../src/schema-name.ts';
import { anInboxMessage, anOutboxMessage, SCHEMA, STATEMENTS } from './statements.ts';

const tables = tablesOf(SCHEMA);
const KNOWN_TYPES = new Set<unknown>(Object.values(mssql.TYPES));

/** The `@name`s a statement's text binds: not inside literals or comments, not DECLAREd, not procedure arguments. */
function boundNames(text: string): Set<string> {
  const code = text
    .replace(/N?'(?:[^']|'')*'/g, "''")
    .replace(/--[^\n]*/g, '')
    // `EXEC proc @Argument = value`, also after an IF on its line: the argument names belong to the procedure.
    .replace(/\bEXEC\b.*$/gm, (call) => call.replace(/@[A-Za-z_]\w*\s*=(?!=)/g, ''));
  const declared = new Set([...code.matchAll(/DECLARE @([A-Za-z_]\w*)/g)].map((m) => m[1]));
  const used = [...code.matchAll(/(?<!@)@([A-Za-z_]\w*)/g)].map((m) => m[1] ?? '');
  return new Set(used.filter((name) => !declared.has(name)));
}

function typeIsDeclared(param: SqlParam): boolean {
  const type = param.type as unknown;
  if (KNOWN_TYPES.has(type)) return true;
  return typeof type === 'object' && type !== null && KNOWN_TYPES.has((type as { type?: unknown }).type);
}

/** Every string leaf of a value, looking into JSON text parameters. */
function leaves(value: unknown): string[] {
  if (typeof value === 'string') {
    try {
      const parsed: unknown = JSON.parse(value);
      if (typeof parsed === 'object' && parsed !== null) return leaves(parsed);
    } catch {
      // not JSON: the string itself is the leaf
    }
    return [value];
  }
  if (Array.isArray(value)) return value.flatMap(leaves);
  if (typeof value === 'object' && value !== null) return Object.values(value).flatMap(leaves);
  return [];
}

function itemsOf(param: SqlParam | undefined): Record<string, unknown>[] {
  return JSON.parse(String(param?.value)) as Record<string, unknown>[];
}

describe('parameter binding', () => {
  it.each(Object.entries(STATEMENTS))('%s binds exactly the @names its text uses', (_name, statement) => {
    const names = boundNames(statement.text);

    expect([...names].sort()).toEqual(Object.keys(statement.values).sort());
  });

  it.each(Object.entries(STATEMENTS))('%s declares an mssql type for every value', (_name, statement) => {
    for (const param of Object.values(statement.values)) expect(typeIsDeclared(param)).toBe(true);
  });

  it.each(Object.entries(STATEMENTS))('%s never writes a value into its text', (_name, statement) => {
    // The schema is an identifier, and identifiers are part of the text by design.
    const identifiers = new Set([SCHEMA, tables.schemaMigrations]);
    const values = Object.values(statement.values).flatMap((p) => leaves(p.value));

    for (const value of values.filter((v) => v.length >= 3 && !identifiers.has(v))) {
      expect(statement.text).not.toContain(value);
    }
  });

  it('finds @names the way the server would, so the binding check can fail', () => {
    const text =
      "DECLARE @t INT = 1;\nEXEC sys.sp_x @Arg = @value; -- @comment\nIF @t >= 0 EXEC @t = sys.sp_y @Arg2 = @guarded;\nSELECT N'@literal', @t, @other, @@ROWCOUNT;";

    expect([...boundNames(text)].sort()).toEqual(['guarded', 'other', 'value']);
  });
});

describe('JSON parameters', () => {
  it('sends outbox messages in the order given, with payload and headers as JSON text', () => {
    const messages = [
      anOutboxMessage({ payload: 'a string', headers: undefined, key: undefined, delayMs: undefined }),
      anOutboxMessage({ payload: null, delayMs: -5 }),
      anOutboxMessage({ payload: [1, { two: 2 }], delayMs: Number.MAX_VALUE }),
    ];

    const items = itemsOf(insertOutboxStatement(SCHEMA, messages).values.messages);

    expect(items.map((i) => JSON.parse(String(i.payload)))).toEqual(['a string', null, [1, { two: 2 }]]);
    expect(items[0]).toMatchObject({ key: null, headers: '{}', delayMs: 0, maxAttempts: 5 });
    expect(items[1]).toMatchObject({ key: 'order-1', headers: '{"x-trace":"abc"}', delayMs: 0 });
    expect(items[2]?.delayMs).toBe(MAX_DELAY_MS);
  });

  it('sends settle items with their id, claim token and fields, keeping absent optional fields null', () => {
    const claim = { id: '7', claimToken: '6f1c2b8e-3d4a-4f5b-9c6d-7e8f9a0b1c2d' };

    const retry = itemsOf(
      retryOutboxStatement(SCHEMA, [{ ...claim, error: 'e', delayMs: 1500.4 }]).values.items,
    );
    const dead = itemsOf(markOutboxDeadStatement(SCHEMA, [{ ...claim, reason: 'r' }]).values.items);

    expect(retry).toEqual([{ ...claim, error: 'e', delayMs: 1500, destination: null }]);
    expect(dead).toEqual([{ ...claim, reason: 'r', destination: null, attempted: false, maxAttempts: null }]);
    const lowered = itemsOf(
      markOutboxDeadStatement(SCHEMA, [{ ...claim, reason: 'r', maxAttempts: 2 }]).values.items,
    );
    expect(lowered).toEqual([{ ...claim, reason: 'r', destination: null, attempted: false, maxAttempts: 2 }]);
  });

  it('binds the claim size and lease as integers, and inbox sources as a JSON array', () => {
    const outbox = claimOutboxStatement(SCHEMA, { batchSize: 50.7, leaseMs: 30_000.2 });
    const inbox = claimInboxStatement(SCHEMA, {
      sources: ['a', "o'brien"],
      batchSize: 5,
      leaseMs: 1000,
      takeOverExpired: false,
    });

    expect(outbox.values.batchSize?.value).toBe(50);
    expect(outbox.values.leaseMs?.value).toBe(30_000);
    expect(JSON.parse(String(inbox.values.sources?.value))).toEqual(['a', "o'brien"]);
  });

  it('shares the rows one statement locks among the sources, keeping sources × per-source TOP within 4,000', () => {
    // Prepare: a relay claiming for 60 sources with a batch of 100 (6,000 U-locks on one reference of the inbox
    // if each source took its full TOP: past the 5,000 at which SQL Server escalates to a table lock).
    const sources = Array.from({ length: 60 }, (_, i) => `source-${i}`);

    // Act
    const plain = claimInboxStatement(SCHEMA, {
      sources,
      batchSize: 100,
      leaseMs: 1000,
      takeOverExpired: false,
    });
    const takeover = claimInboxStatement(SCHEMA, {
      sources,
      batchSize: 100,
      leaseMs: 1000,
      takeOverExpired: true,
    });
    const reclaim = reclaimExpiredInboxStatement(SCHEMA, sources, 1000);

    // Assess: the per-source reads take @perSource, the claim as a whole still @batchSize.
    for (const statement of [plain, takeover, reclaim]) {
      const perSource = Number(statement.values.perSource?.value);
      expect(perSource).toBe(66);
      expect(sources.length * perSource).toBeLessThanOrEqual(MAX_ROWS_PER_STATEMENT);
      expect(statement.text).not.toMatch(/CROSS APPLY \(\n\s*SELECT TOP \((?!@perSource\))/);
    }
    expect(plain.values.batchSize?.value).toBe(100);
    expect(plain.text.match(/CROSS APPLY \(\n\s*SELECT TOP \(@perSource\)/g)).toHaveLength(1);
    expect(takeover.text.match(/CROSS APPLY \(\n\s*SELECT TOP \(@perSource\)/g)).toHaveLength(2);
    expect(reclaim.values.limit?.value).toBe(1000);
  });

  it.each([
    [1, 100, 100],
    [1, 9_000, MAX_ROWS_PER_STATEMENT],
    [40, 100, 100],
    [60, 100, 66],
    [4_000, 100, 1],
    [9_000, 100, 1],
  ])('gives each of %i sources of a %i-row claim %i rows', (sources, rows, expected) => {
    expect(rowsPerSource(sources, rows)).toBe(expected);
  });

  it('counts repeated sources once when it shares the rows', () => {
    const statement = claimInboxStatement(SCHEMA, {
      sources: ['a', 'b', 'a'],
      batchSize: 3_000,
      leaseMs: 1000,
      takeOverExpired: false,
    });

    expect(statement.values.perSource?.value).toBe(2_000);
  });

  it('takes over expired claims only when asked', () => {
    const options = { sources: ['a'], batchSize: 5, leaseMs: 1000 };
    const plain = claimInboxStatement(SCHEMA, { ...options, takeOverExpired: false });
    const takeover = claimInboxStatement(SCHEMA, { ...options, takeOverExpired: true });

    expect(plain.text).not.toContain("i.state = N'processing' AND i.lease_until");
    expect(takeover.text).toContain("i.state = N'processing' AND i.lease_until");
    expect(takeover.text).toContain('ORDER BY c.rank, c.since, c.id');
  });

  it('stores a dead inbox row with its reason, and a pending one with none', () => {
    const pending = insertInboxStatement(SCHEMA, anInboxMessage(), 'pending', null);
    const dead = insertInboxStatement(SCHEMA, anInboxMessage(), 'dead', 'body is not JSON');

    expect([pending.values.state?.value, pending.values.lastError?.value]).toEqual(['pending', null]);
    expect([dead.values.state?.value, dead.values.lastError?.value]).toEqual(['dead', 'body is not JSON']);
  });
});
