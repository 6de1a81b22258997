/**
 * The JSON an operator sees: rows and stats with state literals (`sent` on the outbox, `processed` on the
 * inbox, `failed` for a literal this version does not know) and times as ISO-8601 text.
 */
import type {
  AdminStats,
  AdminTableStats,
  InboxRow,
  JsonValue,
  MessageState,
  OutboxRow,
  Table,
} from '@queuebox/core';
import { stateWord } from './input.ts';

function time(value: Date | null): string | null {
  return value === null ? null : value.toISOString();
}

/** An outbox row as JSON. */
export function outboxRowView(row: OutboxRow): JsonValue {
  return {
    id: row.id,
    topic: row.topic,
    key: row.key,
    state: stateWord('outbox', row.state),
    attempt: row.attempt,
    maxAttempts: row.maxAttempts,
    scheduledAt: time(row.scheduledAt),
    claimToken: row.claimToken,
    leaseUntil: time(row.leaseUntil),
    createdAt: time(row.createdAt),
    updatedAt: time(row.updatedAt),
    sentAt: time(row.sentAt),
    lastError: row.lastError,
    destination: row.destination,
    headers: row.headers,
    payload: row.payload,
  };
}

/** An inbox row as JSON. */
export function inboxRowView(row: InboxRow): JsonValue {
  return {
    id: row.id,
    source: row.source,
    idempotencyKey: row.idempotencyKey,
    eventType: row.eventType,
    aggregateId: row.aggregateId,
    correlationId: row.correlationId,
    state: stateWord('inbox', row.state),
    attempt: row.attempt,
    maxAttempts: row.maxAttempts,
    scheduledAt: time(row.scheduledAt),
    claimToken: row.claimToken,
    leaseUntil: time(row.leaseUntil),
    receivedAt: time(row.receivedAt),
    processedAt: time(row.processedAt),
    lastError: row.lastError,
    headers: row.headers,
    payload: row.payload,
  };
}

/** Counts keyed by the table's literals (`pending`, `processing`, `sent`/`processed`, `dead`, `failed`). */
export function countsView(table: Table, counts: AdminTableStats['counts']): Record<string, number> {
  const view: Record<string, number> = {};
  for (const [state, n] of Object.entries(counts)) view[stateWord(table, state as MessageState)] = n;
  return view;
}

/** `AdminStore.stats()` as JSON. */
export function statsView(stats: AdminStats): JsonValue {
  return {
    outbox: {
      counts: countsView('outbox', stats.outbox.counts),
      oldestPendingAgeMs: stats.outbox.oldestPendingAgeMs,
      deadByTopic: { ...stats.outbox.deadByTopic },
    },
    inbox: {
      counts: countsView('inbox', stats.inbox.counts),
      oldestPendingAgeMs: stats.inbox.oldestPendingAgeMs,
      deadBySource: { ...stats.inbox.deadBySource },
    },
  };
}
