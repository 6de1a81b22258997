/**
 * What the repositories make of a claim's answer, without a server (the executor below answers as SQL Server
 * would): a lock wait that ran out (error 1222) is "nothing claimable now", and a claimed row that cannot be read
 * goes dead alone while the others are answered. That SQL Server raises 1222 under LOCK_TIMEOUT is documented
 * (SET LOCK_TIMEOUT); the contract suite's "unreadable row" cases run the same path against real databases.
 */
import { type OutboxRow, StoreError } from '@queuebox/core';
import mssql from 'mssql';
import { describe, expect, it } from 'vitest';
import { translateError } from '../src/errors.ts';
import type { QueryResult, SqlExecutor, SqlParams } from '../src/executor.ts';
import { createSqlServerInboxStore } from '../src/inbox-store.ts';
import { DEFERRED_PAYLOAD } from '../src/large-columns.ts';
import { createSqlServerOutboxStore } from '../src/outbox-store.ts';
import type { RawRow } from '../src/rows.ts';
import { SCHEMA } from './statements.ts';

const TOKEN = '6F1C2B8E-3D4A-4F5B-9C6D-7E8F9A0B1C2D';

/** A request error as mssql raises it for server error `number`. */
function aRequestError(number: number): Error {
  const original = Object.assign(new Error(`server error ${number}`), {
    info: { number, state: 1, class: 16 },
  });
  return new mssql.RequestError(original as never, 'EREQUEST');
}

/** An executor that answers each query with `answer` (or its error, translated as the real executor does). */
function scriptedExecutor(answer: (text: string, values: SqlParams) => RawRow[] | Error) {
  const seen: { text: string; values: SqlParams }[] = [];
  const executor: SqlExecutor = {
    async query<R>(text: string, values?: SqlParams) {
      seen.push({ text, values: values ?? {} });
      const result = answer(text, values ?? {});
      if (result instanceof Error) throw translateError(result);
      return { rows: result, rowCount: result.length } as unknown as QueryResult<R>;
    },
    transaction: (fn) => fn(executor),
    close: async () => {},
  };
  return { executor, seen };
}

function anOutboxRecord(id: string, overrides: RawRow = {}): RawRow {
  const at = new Date('2026-12-01T10:00:00.000Z');
  return {
    id,
    topic: 'orders.created',
    key: null,
    payload: '{"n":1}',
    headers: '{}',
    state: 'processing',
    attempt: 0,
    max_attempts: 5,
    scheduled_at: at,
    claim_token: TOKEN,
    lease_until: at,
    created_at: at,
    updated_at: at,
    sent_at: null,
    last_error: null,
    destination: null,
    ...overrides,
  };
}

function anInboxRecord(id: string, overrides: RawRow = {}): RawRow {
  const at = new Date('2026-12-01T10:00:00.000Z');
  return {
    id,
    source: 'stripe',
    idempotency_key: `evt_${id}`,
    event_type: null,
    aggregate_id: null,
    correlation_id: null,
    payload: '{"n":1}',
    headers: '{}',
    state: 'processing',
    attempt: 0,
    max_attempts: 5,
    scheduled_at: at,
    claim_token: TOKEN,
    lease_until: at,
    received_at: at,
    updated_at: at,
    processed_at: null,
    last_error: null,
    ...overrides,
  };
}

const isClaim = (text: string) => text.includes('DECLARE @claimToken');

describe('a claim that waited past LOCK_TIMEOUT (error 1222)', () => {
  const timingOut = () => scriptedExecutor(() => aRequestError(1222));

  it('answers that nothing is claimable now, in the outbox and the inbox', async () => {
    const { executor } = timingOut();
    const outbox = createSqlServerOutboxStore({ executor, schema: SCHEMA });
    const inbox = createSqlServerInboxStore({ executor, schema: SCHEMA });

    expect(await outbox.claim({ batchSize: 10, leaseMs: 1000 })).toEqual([]);
    expect(await outbox.reclaimExpired(10)).toEqual({ returned: 0, dead: 0 });
    expect(await inbox.claim({ sources: ['stripe'], batchSize: 10, leaseMs: 1000 })).toEqual([]);
    expect(await inbox.reclaimExpired(['stripe'], 10)).toEqual({ returned: 0, dead: 0 });
  });

  it('still fails on any other error', async () => {
    const { executor } = scriptedExecutor(() => aRequestError(208));

    await expect(
      createSqlServerOutboxStore({ executor, schema: SCHEMA }).claim({ batchSize: 10, leaseMs: 1000 }),
    ).rejects.toBeInstanceOf(StoreError);
  });
});

describe('a claimed row that cannot be read', () => {
  it('goes dead alone in the outbox (no attempt counted); the other rows are answered', async () => {
    const { executor, seen } = scriptedExecutor((text) =>
      isClaim(text)
        ? [anOutboxRecord('3'), anOutboxRecord('2', { payload: '1,2' }), anOutboxRecord('1')]
        : [{ id: '2', state: 'dead' }],
    );

    const rows = await createSqlServerOutboxStore({ executor, schema: SCHEMA }).claim({
      batchSize: 10,
      leaseMs: 1000,
    });

    expect(rows.map((r) => r.id)).toEqual(['1', '3']);
    expect(seen).toHaveLength(2);
    expect(seen[1]?.text).toMatch(/^UPDATE o\nSET state = N'dead'/);
    expect(JSON.parse(String(seen[1]?.values.items?.value))).toEqual([
      {
        id: '2',
        claimToken: TOKEN.toLowerCase(),
        reason: 'unreadable row: The payload column does not hold JSON',
        destination: null,
        attempted: false,
        maxAttempts: null,
      },
    ]);
  });

  it('goes dead alone in the inbox; the other rows are answered', async () => {
    const { executor, seen } = scriptedExecutor((text) =>
      isClaim(text)
        ? [anInboxRecord('5', { headers: '{"a":' }), anInboxRecord('4')]
        : [{ id: '5', state: 'dead' }],
    );

    const rows = await createSqlServerInboxStore({ executor, schema: SCHEMA }).claim({
      sources: ['stripe'],
      batchSize: 10,
      leaseMs: 1000,
    });

    expect(rows.map((r) => r.id)).toEqual(['4']);
    expect(seen[1]?.text).toMatch(/^UPDATE b\nSET state = N'dead'/);
    expect(JSON.parse(String(seen[1]?.values.items?.value))).toEqual([
      {
        id: '5',
        claimToken: TOKEN.toLowerCase(),
        reason: 'unreadable row: The headers column does not hold JSON',
      },
    ]);
  });

  it('still answers the readable rows when dead-lettering the unreadable one fails', async () => {
    const { executor } = scriptedExecutor((text) =>
      isClaim(text) ? [anOutboxRecord('1'), anOutboxRecord('2', { payload: '' })] : aRequestError(40613),
    );

    const rows = await createSqlServerOutboxStore({ executor, schema: SCHEMA }).claim({
      batchSize: 10,
      leaseMs: 1000,
    });

    expect(rows.map((r) => r.id)).toEqual(['1']);
  });

  it('fails the claim when even its id or claim token cannot be read (it could not be settled)', async () => {
    const { executor } = scriptedExecutor(() => [anOutboxRecord('1', { payload: '1,2', claim_token: null })]);

    await expect(
      createSqlServerOutboxStore({ executor, schema: SCHEMA }).claim({ batchSize: 10, leaseMs: 1000 }),
    ).rejects.toThrow(/payload column does not hold JSON/);
  });
});

/**
 * Answers a claim's OUTPUT list as SQL Server would for `stored` rows: `DATALENGTH` of an NVARCHAR is 2 bytes per
 * UTF-16 code unit, and the two CASE items of a claim that leaves large payloads out are evaluated with the bound
 * `@inlinePayloadBytes`. A claim whose OUTPUT list answers `inserted.payload` whole answers every payload.
 */
function answerClaimOutput(text: string, values: SqlParams, stored: readonly RawRow[]): RawRow[] {
  const output = text.split('\n').find((line) => line.startsWith('OUTPUT ')) ?? '';
  const small = 'DATALENGTH(inserted.payload) <= @inlinePayloadBytes';
  const defers =
    output.includes(`CASE WHEN ${small} THEN inserted.payload END AS payload`) &&
    output.includes(
      `CASE WHEN ${small} THEN NULL ELSE DATALENGTH(inserted.payload) / 2 END AS payload_bytes`,
    );
  if (!defers) return [...stored];
  const limit = Number(values.inlinePayloadBytes?.value);
  return stored.map((row) => {
    const datalength = 2 * String(row.payload).length;
    // tedious answers BIGINT (DATALENGTH of NVARCHAR(MAX)) as a decimal string.
    return datalength <= limit
      ? { ...row, payload_bytes: null }
      : { ...row, payload: null, payload_bytes: String(datalength / 2) };
  });
}

describe('an outbox claim asked to leave large payloads out (deferPayloadsOverBytes)', () => {
  const small = JSON.stringify({ n: 'x'.repeat(100) });
  const large = JSON.stringify({ blob: 'x'.repeat(70_000) });
  // 40,000 characters of 3 bytes of UTF-8 each: 120 KB of UTF-8, but 40,000 code units, within 64 Ki of them.
  const wide = JSON.stringify({ text: '日'.repeat(40_000) });
  const stored = [
    anOutboxRecord('1', { payload: small }),
    anOutboxRecord('2', { payload: large }),
    anOutboxRecord('3', { payload: wide }),
  ];

  it('answers a payload over the limit as null, the row marked with its size in UTF-16 code units', async () => {
    // Prepare
    const { executor, seen } = scriptedExecutor((text, values) => answerClaimOutput(text, values, stored));
    const outbox = createSqlServerOutboxStore({ executor, schema: SCHEMA });

    // Act
    const rows = await outbox.claim({
      batchSize: 10,
      leaseMs: 1000,
      deferPayloadsOverBytes: 64 * 1024,
    } as never);

    // Assess
    expect(seen[0]?.values.inlinePayloadBytes?.value).toBe(2 * 64 * 1024);
    expect(rows.map((r) => r.id)).toEqual(['1', '2', '3']);
    const [first, second, third] = rows as [OutboxRow, OutboxRow, OutboxRow];
    expect(first.payload).toEqual(JSON.parse(small));
    expect((first as unknown as Record<symbol, unknown>)[DEFERRED_PAYLOAD]).toBeUndefined();
    expect(second.payload).toBeNull();
    expect((second as unknown as Record<symbol, unknown>)[DEFERRED_PAYLOAD]).toBe(large.length);
    expect(third.payload).toEqual(JSON.parse(wide));
    // Nothing went dead: a left-out payload is not an unreadable row.
    expect(seen).toHaveLength(1);
  });

  it("keeps the mark through a copy by spread, as core's withMessageIds copies the rows", async () => {
    // Prepare
    const { executor } = scriptedExecutor((text, values) => answerClaimOutput(text, values, stored));

    // Act
    const rows = await createSqlServerOutboxStore({ executor, schema: SCHEMA }).claim({
      batchSize: 10,
      leaseMs: 1000,
      deferPayloadsOverBytes: 64 * 1024,
    } as never);

    // Assess
    const copy = { ...(rows[1] as OutboxRow) };
    expect((copy as unknown as Record<symbol, unknown>)[DEFERRED_PAYLOAD]).toBe(large.length);
    expect(JSON.stringify(copy)).not.toContain('deferred');
  });

  it.each([
    ['not asked', {}],
    ['asked for 0 bytes', { deferPayloadsOverBytes: 0 }],
    ['asked for a fraction', { deferPayloadsOverBytes: 1.5 }],
  ])('answers every payload whole when %s', async (_name, extra) => {
    // Prepare
    const { executor, seen } = scriptedExecutor((text, values) => answerClaimOutput(text, values, stored));

    // Act
    const rows = await createSqlServerOutboxStore({ executor, schema: SCHEMA }).claim({
      batchSize: 10,
      leaseMs: 1000,
      ...extra,
    } as never);

    // Assess
    expect(rows.map((r) => r.payload)).toEqual(stored.map((r) => JSON.parse(String(r.payload))));
    expect(seen[0]?.text).not.toContain('DATALENGTH(inserted.payload)');
    expect(seen[0]?.values.inlinePayloadBytes).toBeUndefined();
  });

  it('reads a left-out payload whole with get', async () => {
    // Prepare
    const { executor, seen } = scriptedExecutor((text, values) =>
      isClaim(text) ? answerClaimOutput(text, values, stored) : [stored[1] as RawRow],
    );
    const outbox = createSqlServerOutboxStore({ executor, schema: SCHEMA });
    const [, deferred] = await outbox.claim({
      batchSize: 10,
      leaseMs: 1000,
      deferPayloadsOverBytes: 64 * 1024,
    } as never);

    // Act
    const read = await outbox.get((deferred as OutboxRow).id);

    // Assess
    expect(seen[1]?.text).toMatch(/^SELECT id, topic, \[key\], payload, /);
    expect(read?.payload).toEqual(JSON.parse(large));
    expect(read?.claimToken).toBe((deferred as OutboxRow).claimToken);
  });
});
