/**
 * What node-sql-parser 5.4 made of every statement of this package and of migrations 0001 and 0003: read as
 * written, or only with constructs set aside. The sql-parse*.test.ts files check each row against the parser, and
 * README.md repeats the tables (checked by sql-parse.test.ts).
 */
import type { Outcome } from './tsql-check.ts';

export const OPENJSON_WITH = 'OPENJSON … WITH (schema)';
export const OUTPUT = 'OUTPUT clause';
export const TOP = 'TOP (@variable)';
export const NAMED_DEFAULT = 'CONSTRAINT name DEFAULT';
export const EXEC_STATUS = 'EXEC @status = procedure';
export const COUNT_BIG = 'COUNT_BIG(*)';
export const IF_GUARD = 'IF @status >= 0 guard';
export const RCLOCK = 'READCOMMITTEDLOCK hint';
export const NOCHECK = 'WITH NOCHECK ADD CONSTRAINT';
export const COMPUTED = 'persisted computed column';
export const RECOMPILE = 'OPTION (RECOMPILE)';

/** What node-sql-parser 5.4 made of each statement: read as written, or only with constructs set aside. */
export const PARSE_TABLE: Readonly<Record<string, Pick<Outcome, 'verbatim' | 'setAside'>>> = {
  insertOutboxStatement: { verbatim: 'failed', setAside: [OUTPUT, OPENJSON_WITH] },
  lockOutboxKeysStatement: { verbatim: 'failed', setAside: [EXEC_STATUS, IF_GUARD] },
  claimOutboxStatement: { verbatim: 'failed', setAside: [OUTPUT, TOP, RCLOCK] },
  'claimOutboxStatement (payloads over 64 KiB left out)': {
    verbatim: 'failed',
    setAside: [OUTPUT, TOP, RCLOCK],
  },
  markOutboxSentStatement: { verbatim: 'failed', setAside: [OUTPUT, OPENJSON_WITH] },
  retryOutboxStatement: { verbatim: 'failed', setAside: [OUTPUT, OPENJSON_WITH] },
  markOutboxDeadStatement: { verbatim: 'failed', setAside: [OUTPUT, OPENJSON_WITH] },
  releaseOutboxStatement: { verbatim: 'failed', setAside: [OUTPUT, OPENJSON_WITH] },
  reclaimExpiredOutboxStatement: { verbatim: 'failed', setAside: [OUTPUT, TOP, RCLOCK] },
  getOutboxStatement: { verbatim: 'parsed', setAside: [] },
  insertInboxStatement: { verbatim: 'failed', setAside: [OUTPUT] },
  'insertInboxStatement (dead)': { verbatim: 'failed', setAside: [OUTPUT] },
  selectInboxIdStatement: { verbatim: 'parsed', setAside: [] },
  claimInboxStatement: { verbatim: 'failed', setAside: [OUTPUT, TOP, OPENJSON_WITH, RCLOCK] },
  'claimInboxStatement (takeOverExpired)': {
    verbatim: 'failed',
    setAside: [OUTPUT, TOP, OPENJSON_WITH, RCLOCK],
  },
  'claimInboxStatement (relay, no payload)': {
    verbatim: 'failed',
    setAside: [TOP, OPENJSON_WITH, RCLOCK],
  },
  markInboxProcessedStatement: { verbatim: 'failed', setAside: [OUTPUT, OPENJSON_WITH] },
  forwardOutboxStatement: { verbatim: 'failed', setAside: [OUTPUT, OPENJSON_WITH] },
  retryInboxStatement: { verbatim: 'failed', setAside: [OUTPUT, OPENJSON_WITH] },
  markInboxDeadStatement: { verbatim: 'failed', setAside: [OUTPUT, OPENJSON_WITH] },
  reclaimExpiredInboxStatement: { verbatim: 'failed', setAside: [OUTPUT, TOP, OPENJSON_WITH, RCLOCK] },
  getInboxStatement: { verbatim: 'parsed', setAside: [] },
  adminStateCountsStatement: { verbatim: 'failed', setAside: [COUNT_BIG] },
  adminOldestPendingStatement: { verbatim: 'failed', setAside: [RECOMPILE] },
  'adminOldestPendingStatement (outbox)': { verbatim: 'failed', setAside: [RECOMPILE] },
  adminGaugeCountsStatement: { verbatim: 'failed', setAside: [COUNT_BIG, RECOMPILE] },
  'adminGaugeCountsStatement (inbox)': { verbatim: 'failed', setAside: [COUNT_BIG, RECOMPILE] },
  adminDeadCountStatement: { verbatim: 'failed', setAside: [COUNT_BIG] },
  adminDeadGroupsStatement: { verbatim: 'failed', setAside: [TOP, COUNT_BIG] },
  adminNextDueStatement: { verbatim: 'parsed', setAside: [] },
  'adminNextDueStatement (inbox, sources)': { verbatim: 'failed', setAside: [OPENJSON_WITH] },
  adminListStatement: { verbatim: 'misparsed', setAside: [TOP] },
  'adminListStatement (inbox, Failed, first page)': { verbatim: 'misparsed', setAside: [TOP] },
  adminRequeuePreviewStatement: { verbatim: 'failed', setAside: [TOP, OPENJSON_WITH, COUNT_BIG] },
  adminRequeueStatement: { verbatim: 'failed', setAside: [OUTPUT, TOP, RCLOCK] },
  'adminRequeueStatement (inbox, ids)': {
    verbatim: 'failed',
    setAside: [OUTPUT, TOP, OPENJSON_WITH, RCLOCK],
  },
  adminRequeueCandidatesStatement: { verbatim: 'failed', setAside: [TOP, OPENJSON_WITH, RCLOCK] },
  adminTryLockKeysStatement: { verbatim: 'failed', setAside: [EXEC_STATUS] },
  adminLockPendingKeyRowsStatement: { verbatim: 'failed', setAside: [OPENJSON_WITH, RCLOCK] },
  adminKeysInFlightStatement: { verbatim: 'failed', setAside: [TOP, COUNT_BIG] },
  'adminKeysInFlightStatement (inbox)': { verbatim: 'failed', setAside: [TOP, COUNT_BIG] },
  adminReplayStatement: { verbatim: 'failed', setAside: [OUTPUT] },
  adminRedactStatement: { verbatim: 'failed', setAside: [OUTPUT] },
  'adminRedactStatement (inbox)': { verbatim: 'failed', setAside: [OUTPUT] },
  adminRowStateStatement: { verbatim: 'parsed', setAside: [] },
  adminPurgeStatement: { verbatim: 'failed', setAside: [TOP, RCLOCK] },
  acquireMigrationLock: { verbatim: 'failed', setAside: [EXEC_STATUS] },
  boundedBatch: { verbatim: 'parsed', setAside: [] },
  createSchemaIfMissing: { verbatim: 'parsed', setAside: [] },
  createSchemaMigrationsIfMissing: { verbatim: 'failed', setAside: [NAMED_DEFAULT] },
  selectVersionTableColumns: { verbatim: 'parsed', setAside: [] },
  selectAppliedVersions: { verbatim: 'parsed', setAside: [] },
  insertAppliedVersion: { verbatim: 'parsed', setAside: [] },
  readServerSettingsStatement: { verbatim: 'parsed', setAside: [] },
};

/** The statements of migration 0001, in file order, as PARSE_TABLE rows. */
export const MIGRATION_PARSE_TABLE: readonly (readonly [string, Pick<Outcome, 'verbatim' | 'setAside'>])[] = [
  ['0001: IF SCHEMA_ID … EXEC(CREATE SCHEMA)', { verbatim: 'parsed', setAside: [] }],
  ['0001: CREATE TABLE outbox', { verbatim: 'failed', setAside: [NAMED_DEFAULT] }],
  ['0001: CREATE INDEX outbox_due_unkeyed', { verbatim: 'parsed', setAside: [] }],
  ['0001: CREATE INDEX outbox_active_key', { verbatim: 'parsed', setAside: [] }],
  ['0001: CREATE INDEX outbox_lease', { verbatim: 'parsed', setAside: [] }],
  ['0001: CREATE INDEX outbox_state_updated', { verbatim: 'parsed', setAside: [] }],
  ['0001: CREATE TABLE inbox', { verbatim: 'failed', setAside: [NAMED_DEFAULT] }],
  ['0001: CREATE INDEX inbox_due', { verbatim: 'parsed', setAside: [] }],
  ['0001: CREATE INDEX inbox_lease', { verbatim: 'parsed', setAside: [] }],
  ['0001: CREATE INDEX inbox_state_updated', { verbatim: 'parsed', setAside: [] }],
];

/** The statements of migration 0003, batch by batch in file order, as PARSE_TABLE rows. */
export const MIGRATION_0003_PARSE_TABLE: readonly (readonly [
  string,
  Pick<Outcome, 'verbatim' | 'setAside'>,
])[] = [
  ['0003: DROP INDEX outbox_due_unkeyed', { verbatim: 'parsed', setAside: [] }],
  ['0003: DROP INDEX outbox_active_key', { verbatim: 'parsed', setAside: [] }],
  ['0003: DROP CONSTRAINT inbox_source_idempotency_key_uq', { verbatim: 'parsed', setAside: [] }],
  ['0003: DROP INDEX inbox_due', { verbatim: 'parsed', setAside: [] }],
  ['0003: DROP INDEX inbox_lease', { verbatim: 'parsed', setAside: [] }],
  ['0003: ALTER COLUMN outbox.topic COLLATE', { verbatim: 'parsed', setAside: [] }],
  ['0003: ALTER COLUMN outbox.key COLLATE', { verbatim: 'parsed', setAside: [] }],
  ['0003: ALTER COLUMN inbox.source COLLATE', { verbatim: 'parsed', setAside: [] }],
  ['0003: ALTER COLUMN inbox.idempotency_key COLLATE', { verbatim: 'parsed', setAside: [] }],
  ['0003: ADD inbox.source_bytes', { verbatim: 'failed', setAside: [COMPUTED] }],
  ['0003: ADD inbox.idempotency_key_bytes', { verbatim: 'failed', setAside: [COMPUTED] }],
  ['0003: DROP CONSTRAINT outbox_payload_json_ck', { verbatim: 'parsed', setAside: [] }],
  ['0003: DROP CONSTRAINT inbox_payload_json_ck', { verbatim: 'parsed', setAside: [] }],
  ['0003: ADD CONSTRAINT outbox_payload_json_ck', { verbatim: 'failed', setAside: [NOCHECK] }],
  ['0003: ADD CONSTRAINT inbox_payload_json_ck', { verbatim: 'failed', setAside: [NOCHECK] }],
  ['0003: ADD CONSTRAINT inbox_source_idempotency_key_uq', { verbatim: 'parsed', setAside: [] }],
  ['0003: CREATE INDEX outbox_due_unkeyed', { verbatim: 'parsed', setAside: [] }],
  ['0003: CREATE INDEX outbox_active_key', { verbatim: 'parsed', setAside: [] }],
  ['0003: CREATE INDEX inbox_due', { verbatim: 'parsed', setAside: [] }],
  ['0003: CREATE INDEX inbox_lease', { verbatim: 'parsed', setAside: [] }],
];

export type Ast = Record<string, unknown>;
export const first = (ast: unknown): Ast => (Array.isArray(ast) ? ast[ast.length - 1] : ast) as Ast;
