/** The Data API form of the store's `pg` statements (no database: text in, text and parameters out). */
import { StoreError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { splitStatements, toDataApiStatement } from '../src/data-api-sql.ts';
import { claimOutboxStatement } from '../src/outbox-claim.ts';
import { markOutboxSentStatement } from '../src/outbox-sql.ts';
import { OUTBOX_COLUMNS, qualified } from '../src/rows.ts';

describe('toDataApiStatement', () => {
  it('names the placeholders and types each value as a Data API field', () => {
    const { sql, parameters } = toDataApiStatement(
      'SELECT $1::text, $2::int, $3::float8, $4::boolean, $5, $1 AS again',
      ['a', 7, 1.5, true, null],
    );

    expect(sql).toBe('SELECT :p1::text, :p2::int, :p3::float8, :p4::boolean, :p5, :p1 AS again');
    expect(parameters).toEqual([
      { name: 'p1', value: { stringValue: 'a' } },
      { name: 'p2', value: { longValue: 7 } },
      { name: 'p3', value: { doubleValue: 1.5 } },
      { name: 'p4', value: { booleanValue: true } },
      { name: 'p5', value: { isNull: true } },
    ]);
  });

  it('passes an array as one JSON text parameter unpacked in order, for every use of the placeholder', () => {
    const statement = markOutboxSentStatement('qb', [
      { id: '12', claimToken: 'T1', destination: 'billing' },
      { id: '3', claimToken: 't2', destination: 'events' },
    ]);

    const { sql, parameters } = toDataApiStatement(statement.text, statement.values);

    expect(sql).not.toMatch(/\$\d/);
    expect(sql).toContain(
      'ARRAY(SELECT e.v::bigint FROM pg_catalog.jsonb_array_elements_text(:p1::jsonb) WITH ORDINALITY AS e(v, n) ORDER BY e.n)',
    );
    expect(sql.match(/:p1::jsonb/g)).toHaveLength(2);
    expect(parameters).toEqual([
      { name: 'p1', value: { stringValue: '["12","3"]' } },
      { name: 'p2', value: { stringValue: '["t1","t2"]' } },
      { name: 'p3', value: { stringValue: '["billing","events"]' } },
    ]);
  });

  it('leaves $n inside strings, quoted names, comments and dollar-quoted bodies alone', () => {
    const text = `SELECT '$1' AS "$2", E'it\\'s $1', $$ $1 $$, $tag$ ; $1 $tag$ -- $1
/* $1 ; */ , $1::text`;

    const { sql, parameters } = toDataApiStatement(text, ['x']);

    expect(sql).toBe(text.replace('$1::text', ':p1::text'));
    expect(parameters).toHaveLength(1);
  });

  it('refuses an array without an explicit ::type[] cast, and a missing value', () => {
    expect(() => toDataApiStatement('SELECT * FROM t WHERE id = ANY($1)', [['1']])).toThrow(StoreError);
    expect(() => toDataApiStatement('SELECT $2::text', ['a'])).toThrow(/\$2, but 1 values/);
  });
});

describe('splitStatements', () => {
  it('cuts at ; outside quotes and bodies, drops empty and comment-only pieces', () => {
    const text = `-- header
CREATE TABLE a (x text DEFAULT ';');
CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_notify('c', ';'); RETURN NEW; END;
$$;
/* ; */
COMMENT ON TABLE a IS 'a;b';
`;

    const statements = splitStatements(text);

    expect(statements).toHaveLength(3);
    expect(statements[1]).toMatch(/^CREATE FUNCTION[\s\S]*END;\n\$\$$/);
    expect(statements[2]).toBe("/* ; */\nCOMMENT ON TABLE a IS 'a;b'");
  });
});

describe('statement texts with and without result limits', () => {
  const claim = (inlineBytes?: number) =>
    claimOutboxStatement('qb', {
      batchSize: 100,
      unkeyedReserve: 50,
      leaseMs: 1000,
      startAfterKey: null,
      keyScanLimit: 1000,
      claimToken: '00000000-0000-0000-0000-000000000000',
      ...(inlineBytes === undefined ? {} : { inlineBytes }),
    }).text;

  it('pg and PGlite keep the plain column list (no size expression in their claim)', () => {
    expect(claim()).toContain(`RETURNING ${qualified(OUTBOX_COLUMNS, 'o')}\n`);
    expect(claim()).not.toContain('octet_length');
  });

  it('with a limit the large columns are inline only when the row fits, and `outside` flags the rest', () => {
    const text = claim(7_000);

    expect(text).toContain(
      'CASE WHEN (pg_catalog.octet_length(o.payload::text) + pg_catalog.octet_length(o.headers::text)',
    );
    expect(text).toContain('+ 512 <= 7000) THEN o.payload END AS payload');
    expect(text).toContain('AS outside');
  });
});
