import type { NewInboxMessage, NewOutboxMessage } from '@queuebox/core';
import * as adminSql from '../src/admin-sql.ts';
import type { Statement } from '../src/executor.ts';
import * as inboxClaim from '../src/inbox-claim.ts';
import * as inboxDedupe from '../src/inbox-dedupe.ts';
import * as inboxSql from '../src/inbox-sql.ts';
import * as lease from '../src/lease.ts';
import {
  acquireMigrationLock,
  boundedBatch,
  createSchemaIfMissing,
  createSchemaMigrationsIfMissing,
  insertAppliedVersion,
  selectAppliedVersions,
  selectVersionTableColumns,
} from '../src/migrator.ts';
import * as outboxClaim from '../src/outbox-claim.ts';
import * as outboxSql from '../src/outbox-sql.ts';
import { readServerSettingsStatement } from '../src/settings.ts';

/** The schema every catalogued statement is built for. */
export const SCHEMA = 'qb_test';

const TOKEN = '6f1c2b8e-3d4a-4f5b-9c6d-7e8f9a0b1c2d';

/** An outbox message with every field set; override what a case needs. */
export function anOutboxMessage(overrides: Partial<NewOutboxMessage> = {}): NewOutboxMessage {
  return {
    topic: 'orders.created',
    key: 'order-1',
    payload: { orderId: 'order-1', total: 42 },
    headers: { 'x-trace': 'abc' },
    maxAttempts: 5,
    delayMs: 0,
    ...overrides,
  };
}

/** An inbox message with every field set; override what a case needs. */
export function anInboxMessage(overrides: Partial<NewInboxMessage> = {}): NewInboxMessage {
  return {
    source: 'stripe',
    idempotencyKey: 'evt_1',
    eventType: 'invoice.paid',
    aggregateId: 'in_1',
    correlationId: 'corr-1',
    payload: { id: 'evt_1' },
    headers: { 'stripe-signature': 't=1,v1=x' },
    maxAttempts: 10,
    ...overrides,
  };
}

const claim = { id: '41', claimToken: TOKEN };

/**
 * Every statement the package's statement functions (*-sql.ts, outbox-claim.ts, inbox-claim.ts, inbox-dedupe.ts,
 * lease.ts) (and the migrator's statement functions) produce, by a name
 * that the parse table of README.md uses. Functions with variants appear once per variant.
 */
export const STATEMENTS: Readonly<Record<string, Statement>> = {
  insertOutboxStatement: outboxSql.insertOutboxStatement(SCHEMA, [
    anOutboxMessage(),
    anOutboxMessage({ key: null }),
  ]),
  lockOutboxKeysStatement: outboxSql.lockOutboxKeysStatement(SCHEMA, ['order-2', 'order-1', 'order-2']),
  claimOutboxStatement: outboxClaim.claimOutboxStatement(SCHEMA, { batchSize: 100, leaseMs: 300_000 }),
  'claimOutboxStatement (payloads over 64 KiB left out)': outboxClaim.claimOutboxStatement(SCHEMA, {
    batchSize: 100,
    leaseMs: 300_000,
    deferBytes: 64 * 1024,
  }),
  markOutboxSentStatement: outboxSql.markOutboxSentStatement(SCHEMA, [{ ...claim, destination: 'billing' }]),
  retryOutboxStatement: outboxSql.retryOutboxStatement(SCHEMA, [
    { ...claim, error: 'HTTP 503', delayMs: 1000 },
  ]),
  markOutboxDeadStatement: outboxSql.markOutboxDeadStatement(SCHEMA, [{ ...claim, reason: 'no route' }]),
  releaseOutboxStatement: outboxSql.releaseOutboxStatement(SCHEMA, [claim]),
  reclaimExpiredOutboxStatement: lease.reclaimExpiredOutboxStatement(SCHEMA, 1000),
  getOutboxStatement: outboxSql.getOutboxStatement(SCHEMA, '41'),
  insertInboxStatement: inboxDedupe.insertInboxStatement(SCHEMA, anInboxMessage(), 'pending', null),
  'insertInboxStatement (dead)': inboxDedupe.insertInboxStatement(
    SCHEMA,
    anInboxMessage(),
    'dead',
    'not JSON',
  ),
  selectInboxIdStatement: inboxDedupe.selectInboxIdStatement(SCHEMA, 'stripe', 'evt_1'),
  claimInboxStatement: inboxClaim.claimInboxStatement(SCHEMA, {
    sources: ['stripe'],
    batchSize: 100,
    leaseMs: 300_000,
    takeOverExpired: false,
  }),
  'claimInboxStatement (takeOverExpired)': inboxClaim.claimInboxStatement(SCHEMA, {
    sources: ['stripe', 'github'],
    batchSize: 100,
    leaseMs: 300_000,
    takeOverExpired: true,
  }),
  'claimInboxStatement (relay, no payload)': inboxClaim.claimInboxStatement(SCHEMA, {
    sources: ['stripe'],
    batchSize: 100,
    leaseMs: 300_000,
    takeOverExpired: false,
    payload: false,
  }),
  markInboxProcessedStatement: inboxSql.markInboxProcessedStatement(SCHEMA, [claim]),
  forwardOutboxStatement: inboxSql.forwardOutboxStatement(SCHEMA, [
    { ...claim, outbox: { ...anOutboxMessage(), payload: undefined } },
    { id: '42', claimToken: TOKEN, outbox: anOutboxMessage({ key: null }) },
  ]),
  retryInboxStatement: inboxSql.retryInboxStatement(SCHEMA, [{ ...claim, error: 'boom', delayMs: 5000 }]),
  markInboxDeadStatement: inboxSql.markInboxDeadStatement(SCHEMA, [{ ...claim, reason: 'gave up' }]),
  reclaimExpiredInboxStatement: lease.reclaimExpiredInboxStatement(SCHEMA, ['stripe'], 1000),
  getInboxStatement: inboxSql.getInboxStatement(SCHEMA, '41'),
  adminStateCountsStatement: adminSql.adminStateCountsStatement(SCHEMA, 'outbox'),
  adminOldestPendingStatement: adminSql.adminOldestPendingStatement(SCHEMA, 'inbox'),
  'adminOldestPendingStatement (outbox)': adminSql.adminOldestPendingStatement(SCHEMA, 'outbox'),
  adminGaugeCountsStatement: adminSql.adminGaugeCountsStatement(SCHEMA, 'outbox'),
  'adminGaugeCountsStatement (inbox)': adminSql.adminGaugeCountsStatement(SCHEMA, 'inbox'),
  adminDeadCountStatement: adminSql.adminDeadCountStatement(SCHEMA, 'outbox'),
  adminDeadGroupsStatement: adminSql.adminDeadGroupsStatement(SCHEMA, 'outbox', 100),
  adminNextDueStatement: adminSql.adminNextDueStatement(SCHEMA, 'outbox', null),
  'adminNextDueStatement (inbox, sources)': adminSql.adminNextDueStatement(SCHEMA, 'inbox', ['github']),
  adminListStatement: adminSql.adminListStatement(
    SCHEMA,
    'outbox',
    { state: 'Dead', topic: 'orders.created' },
    '41',
    51,
  ),
  'adminListStatement (inbox, Failed, first page)': adminSql.adminListStatement(
    SCHEMA,
    'inbox',
    { state: 'Failed', source: 'stripe' },
    null,
    51,
  ),
  adminRequeuePreviewStatement: adminSql.adminRequeuePreviewStatement(
    SCHEMA,
    'outbox',
    { ids: ['41', '42'], topic: 'orders.created' },
    500,
  ),
  adminRequeueStatement: adminSql.adminRequeueStatement(SCHEMA, 'outbox', { topic: 'orders.created' }, 500),
  'adminRequeueStatement (inbox, ids)': adminSql.adminRequeueStatement(
    SCHEMA,
    'inbox',
    { ids: ['41'], source: 'stripe' },
    500,
  ),
  adminRequeueCandidatesStatement: adminSql.adminRequeueCandidatesStatement(
    SCHEMA,
    { ids: ['41', '42'], topic: 'orders.created' },
    500,
  ),
  adminTryLockKeysStatement: adminSql.adminTryLockKeysStatement(SCHEMA, ['order-2', 'order-1', 'order-2']),
  adminLockPendingKeyRowsStatement: adminSql.adminLockPendingKeyRowsStatement(SCHEMA, ['order-1', 'order-2']),
  adminKeysInFlightStatement: adminSql.adminKeysInFlightStatement(
    SCHEMA,
    'outbox',
    { topic: 'orders.created' },
    100,
  ),
  'adminKeysInFlightStatement (inbox)': adminSql.adminKeysInFlightStatement(
    SCHEMA,
    'inbox',
    { source: 'stripe' },
    100,
  ),
  adminReplayStatement: adminSql.adminReplayStatement(SCHEMA, '41'),
  adminRedactStatement: adminSql.adminRedactStatement(SCHEMA, 'outbox', '41'),
  'adminRedactStatement (inbox)': adminSql.adminRedactStatement(SCHEMA, 'inbox', '41'),
  adminRowStateStatement: adminSql.adminRowStateStatement(SCHEMA, 'inbox', '41'),
  adminPurgeStatement: adminSql.adminPurgeStatement(SCHEMA, 'outbox', 'Sent', 3_600_000, 1000),
  acquireMigrationLock: acquireMigrationLock(SCHEMA, 600_000),
  boundedBatch: {
    text: boundedBatch(`ALTER TABLE [${SCHEMA}].[outbox] ADD probe_column INT NULL;`, 1200),
    values: {},
  },
  createSchemaIfMissing: createSchemaIfMissing(SCHEMA),
  createSchemaMigrationsIfMissing: createSchemaMigrationsIfMissing(SCHEMA),
  selectVersionTableColumns: selectVersionTableColumns(SCHEMA),
  selectAppliedVersions: selectAppliedVersions(SCHEMA),
  insertAppliedVersion: insertAppliedVersion(SCHEMA, { version: 1, name: 'init', sql: '' }),
  readServerSettingsStatement: readServerSettingsStatement(SCHEMA),
};
