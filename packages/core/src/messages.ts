import type { MessageState } from './states.ts';

/** A JSON value as stored in a payload column. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** Message headers: names as received or configured, string values. */
export type Headers = Record<string, string>;

/** Row ids are 64-bit identities; they travel as decimal strings so no precision is lost. */
export type RowId = string;

/** What an application (or the relay) asks the outbox to deliver. */
export interface NewOutboxMessage {
  readonly topic: string;
  /** Rows of one key are delivered in insert order; `null`/absent means unordered. */
  readonly key?: string | null;
  readonly payload: JsonValue;
  readonly headers?: Headers;
  /** Attempts before the row goes dead. */
  readonly maxAttempts: number;
  /** Delay before the first attempt, in milliseconds. Default 0. */
  readonly delayMs?: number;
}

/** An outbox row as the store reads it. */
export interface OutboxRow {
  readonly id: RowId;
  readonly topic: string;
  readonly key: string | null;
  readonly payload: JsonValue;
  readonly headers: Headers;
  readonly state: MessageState;
  /** Attempts made so far (a failed delivery and an expired lease each count one). */
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly scheduledAt: Date;
  readonly claimToken: string | null;
  readonly leaseUntil: Date | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
  readonly sentAt: Date | null;
  readonly lastError: string | null;
  /** The destination the router chose, once routed. */
  readonly destination: string | null;
  /**
   * The random part of the row's message id (migration 0009: a uuid made at insert), or null for a row written before
   * it; absent where a row was not read from a store (see `outboxMessageId`).
   */
  readonly messageUid?: string | null;
}

/** What a source stores in the inbox. */
export interface NewInboxMessage {
  readonly source: string;
  readonly idempotencyKey: string;
  readonly eventType?: string | null;
  readonly aggregateId?: string | null;
  readonly correlationId?: string | null;
  readonly payload: JsonValue;
  readonly headers?: Headers;
  readonly maxAttempts: number;
}

/** An inbox row as the store reads it. */
export interface InboxRow {
  readonly id: RowId;
  readonly source: string;
  readonly idempotencyKey: string;
  readonly eventType: string | null;
  readonly aggregateId: string | null;
  readonly correlationId: string | null;
  readonly payload: JsonValue;
  readonly headers: Headers;
  readonly state: MessageState;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly scheduledAt: Date;
  readonly claimToken: string | null;
  readonly leaseUntil: Date | null;
  readonly receivedAt: Date;
  readonly processedAt: Date | null;
  readonly lastError: string | null;
}

/** A claimed row, named by id and the token of the claim that holds it. Every settle is fenced by both. */
export interface RowClaim {
  readonly id: RowId;
  readonly claimToken: string;
}
