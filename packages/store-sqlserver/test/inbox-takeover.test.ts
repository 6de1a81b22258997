/**
 * The pull claim's takeover on SQL Server, checked at the statement level (no SQL Server runs here): like the
 * PostgreSQL claim (store-postgres test/inbox-takeover.integration.test.ts, which runs), a claim that takes over
 * an expired row claims that row alone — so a row that crashes its worker is retried by itself — and counts an
 * attempt for it only; a claim without takeover is the plain pending → processing claim.
 */
import { describe, expect, it } from 'vitest';
import { claimInboxStatement } from '../src/inbox-claim.ts';
import { checkTsql } from './tsql-check.ts';

const SCHEMA = 'qb_test';
const options = { sources: ['invoices'], batchSize: 10, leaseMs: 60_000 };
const takeover = claimInboxStatement(SCHEMA, { ...options, takeOverExpired: true });
const plain = claimInboxStatement(SCHEMA, { ...options, takeOverExpired: false });

interface Ast {
  readonly type?: string;
  readonly with?: readonly { readonly name?: { readonly value?: string } }[];
}

/** The names of the CTEs of the batch's UPDATE, as node-sql-parser's T-SQL grammar reads them. */
function cteNames(text: string): string[] {
  const { parsed } = checkTsql(text);
  const statements = (Array.isArray(parsed.ast) ? parsed.ast : [parsed.ast]) as Ast[];
  const update = statements.find((s) => s.type === 'update');
  return (update?.with ?? []).map((cte) => cte.name?.value ?? '?');
}

describe('claimInboxStatement with takeover on SQL Server', () => {
  it('numbers the candidates in claim order, expired rows (rank 0, oldest lease first) before pending ones', () => {
    expect(takeover.text).toContain(
      'WITH due AS (\n  SELECT TOP (@batchSize) c.id, ROW_NUMBER() OVER (ORDER BY c.rank, c.since, c.id) AS n, MIN(c.rank) OVER () AS first_rank\n',
    );
    expect(takeover.text).toContain('SELECT e.id, 0 AS rank, e.lease_until AS since');
    expect(takeover.text).toContain('ORDER BY i.lease_until, i.id\n    ) AS e');
    expect(takeover.text).toContain('SELECT d.id, 1 AS rank, d.scheduled_at AS since');
  });

  it('claims the first candidate alone when it is expired, else every candidate', () => {
    expect(takeover.text).toContain(
      '\n),\nchosen AS (\n  SELECT r.id FROM due AS r WHERE r.n = 1 OR r.first_rank = 1\n)\nUPDATE i\n',
    );
    expect(takeover.text).toContain('INNER JOIN chosen ON chosen.id = i.id');
    expect(cteNames(takeover.text)).toEqual(['due', 'chosen']);
  });

  it('counts an attempt for a taken-over row only, as the PostgreSQL claim does', () => {
    expect(takeover.text).toContain(
      "SET attempt = i.attempt + CASE WHEN i.state = N'processing' THEN 1 ELSE 0 END,",
    );
  });

  it('leaves the claim without takeover (the relay) as one CTE of pending rows', () => {
    expect(plain.text).not.toContain('ROW_NUMBER()');
    expect(plain.text).not.toContain('i.lease_until <');
    expect(cteNames(plain.text)).toEqual(['chosen']);
  });
});
