import { MessageState, StoreError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { type RawRow, toInboxRow, toOutboxRow, toRowId, toUtcDate } from '../src/rows.ts';

/**
 * An outbox row as mssql 12 / tedious 19 return it: BIGINT as a decimal string, INT as a number, DATETIME2 as a
 * Date read as UTC, UNIQUEIDENTIFIER upper-case, NVARCHAR(MAX) JSON as text, NULL as null.
 */
function anOutboxRecord(overrides: RawRow = {}): RawRow {
  return {
    id: '9007199254740993',
    topic: 'orders.created',
    key: 'order-1',
    payload: '{"orderId":"order-1","total":42}',
    headers: '{"x-trace":"abc"}',
    state: 'processing',
    attempt: 1,
    max_attempts: 5,
    scheduled_at: new Date('2026-11-30T10:00:00.123Z'),
    claim_token: '6F1C2B8E-3D4A-4F5B-9C6D-7E8F9A0B1C2D',
    lease_until: new Date('2026-11-30T10:05:00.123Z'),
    created_at: new Date('2026-11-30T09:59:59.999Z'),
    updated_at: new Date('2026-11-30T10:00:00.123Z'),
    sent_at: null,
    last_error: null,
    destination: null,
    message_uid: '9B2E4C1D-0A8F-4E7B-9C3D-2E1F0A9B8C7D',
    ...overrides,
  };
}

/** An inbox row as mssql returns it (see anOutboxRecord). */
function anInboxRecord(overrides: RawRow = {}): RawRow {
  return {
    id: '12',
    source: 'stripe',
    idempotency_key: 'evt_1',
    event_type: 'invoice.paid',
    aggregate_id: null,
    correlation_id: 'corr-1',
    payload: '"just a string"',
    headers: '{}',
    state: 'processed',
    attempt: 0,
    max_attempts: 10,
    scheduled_at: new Date('2026-11-30T10:00:00.000Z'),
    claim_token: null,
    lease_until: null,
    received_at: new Date('2026-11-30T10:00:00.000Z'),
    updated_at: new Date('2026-11-30T10:00:01.000Z'),
    processed_at: new Date('2026-11-30T10:00:01.000Z'),
    last_error: null,
    ...overrides,
  };
}

describe('outbox rows', () => {
  it('maps every column, keeping a 64-bit id exact as a decimal string', () => {
    const row = toOutboxRow(anOutboxRecord());

    expect(row).toEqual({
      id: '9007199254740993',
      topic: 'orders.created',
      key: 'order-1',
      payload: { orderId: 'order-1', total: 42 },
      headers: { 'x-trace': 'abc' },
      state: MessageState.Processing,
      attempt: 1,
      maxAttempts: 5,
      scheduledAt: new Date('2026-11-30T10:00:00.123Z'),
      claimToken: '6f1c2b8e-3d4a-4f5b-9c6d-7e8f9a0b1c2d',
      leaseUntil: new Date('2026-11-30T10:05:00.123Z'),
      createdAt: new Date('2026-11-30T09:59:59.999Z'),
      updatedAt: new Date('2026-11-30T10:00:00.123Z'),
      sentAt: null,
      lastError: null,
      destination: null,
      // UNIQUEIDENTIFIER arrives upper case, as the claim token does.
      messageUid: '9b2e4c1d-0a8f-4e7b-9c3d-2e1f0a9b8c7d',
    });
  });

  it.each([
    ['pending', MessageState.Pending],
    ['processing', MessageState.Processing],
    ['sent', MessageState.Sent],
    ['dead', MessageState.Dead],
    ['processed', MessageState.Failed],
    ['paused', MessageState.Failed],
    ['PENDING', MessageState.Failed],
  ])('reads the state literal %s as %s', (literal, state) => {
    expect(toOutboxRow(anOutboxRecord({ state: literal })).state).toBe(state);
  });

  it('parses scalar payloads, which the payload check admits', () => {
    expect(toOutboxRow(anOutboxRecord({ payload: '42' })).payload).toBe(42);
    expect(toOutboxRow(anOutboxRecord({ payload: 'null' })).payload).toBeNull();
    expect(toOutboxRow(anOutboxRecord({ payload: '"{\\"a\\":1}"' })).payload).toBe('{"a":1}');
  });

  it('reads header values that are not strings as their JSON text, and drops null ones', () => {
    const row = toOutboxRow(anOutboxRecord({ headers: '{"a":"x","n":1,"o":{"k":true},"z":null}' }));

    expect(row.headers).toEqual({ a: 'x', n: '1', o: '{"k":true}' });
  });

  it('fails with a StoreError on a payload that is not JSON', () => {
    expect(() => toOutboxRow(anOutboxRecord({ payload: '{oops' }))).toThrow(StoreError);
  });
});

describe('inbox rows', () => {
  it('maps every column and reads processed as Sent', () => {
    const row = toInboxRow(anInboxRecord());

    expect(row).toEqual({
      id: '12',
      source: 'stripe',
      idempotencyKey: 'evt_1',
      eventType: 'invoice.paid',
      aggregateId: null,
      correlationId: 'corr-1',
      payload: 'just a string',
      headers: {},
      state: MessageState.Sent,
      attempt: 0,
      maxAttempts: 10,
      scheduledAt: new Date('2026-11-30T10:00:00.000Z'),
      claimToken: null,
      leaseUntil: null,
      receivedAt: new Date('2026-11-30T10:00:00.000Z'),
      processedAt: new Date('2026-11-30T10:00:01.000Z'),
      lastError: null,
    });
  });

  it('reads the outbox literal sent as Failed', () => {
    expect(toInboxRow(anInboxRecord({ state: 'sent' })).state).toBe(MessageState.Failed);
  });
});

describe('ids and times', () => {
  it('accepts the numeric shapes a driver might choose for BIGINT', () => {
    expect(toRowId('42')).toBe('42');
    expect(toRowId(42)).toBe('42');
    expect(toRowId(9223372036854775807n)).toBe('9223372036854775807');
  });

  it('refuses an id that is not an integer', () => {
    expect(() => toRowId(1.5)).toThrow(StoreError);
    expect(() => toRowId('12abc')).toThrow(StoreError);
    expect(() => toRowId(null)).toThrow(StoreError);
  });

  it('reads a DATETIME2 string without a zone as UTC, and keeps a stated offset', () => {
    expect(toUtcDate('2026-11-30 10:00:00.123')).toEqual(new Date('2026-11-30T10:00:00.123Z'));
    expect(toUtcDate('2026-11-30T10:00:00.123+02:00')).toEqual(new Date('2026-11-30T08:00:00.123Z'));
    expect(() => toUtcDate('yesterday')).toThrow(StoreError);
  });
});
