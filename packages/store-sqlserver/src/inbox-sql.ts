/**
 * The inbox statements, one function each (names as in store-postgres). The schema name is validated and
 * quoted by `quoteSchema`; every value is a parameter; bulk statements read one JSON array parameter with
 * OPENJSON. As in outbox-sql.ts, an OUTPUT clause sits alone on its line.
 */
import type { InboxDeadItem, InboxRetryItem, NewInboxMessage, RowClaim, RowId } from '@queuebox/core';
import mssql from 'mssql';
import type { SqlParam, Statement } from './executor.ts';
import {
  BINARY,
  CLAIM_COLUMNS,
  claimJson,
  clampDelayMs,
  jsonParam,
  statementRows,
  TAKE,
  TAKE_BEGIN,
  TAKE_END,
  UTC_NOW,
  utcNowPlus,
} from './outbox-sql.ts';
import { INBOX_COLUMNS, qualified } from './rows.ts';
import { quoteSchema } from './schema-name.ts';

function inbox(schema: string): string {
  return `${quoteSchema(schema)}.[inbox]`;
}

/**
 * `@sources` as a table of NVARCHAR, so that each source seeks its own range of inbox_due. Wider than
 * inbox.source, so a longer name is not cut down to one that exists. OPENJSON's text has the database's default
 * collation, hence the explicit binary COLLATE where it meets inbox.source (two implicit collations would be a
 * conflict, error 468).
 */
const SOURCES = "OPENJSON(@sources) WITH (source NVARCHAR(400) '$') AS s";

/**
 * `column` is the source `s.source`: equal in the binary collation and of the same length, because T-SQL pads
 * the shorter operand with spaces before comparing (migration 0003).
 */
function isSource(column: string): string {
  return `${column} = s.source COLLATE ${BINARY} AND DATALENGTH(${column}) = DATALENGTH(s.source)`;
}

/** Text into an NVARCHAR column: sent as NVARCHAR(MAX), so an over-long value fails (2628) instead of being cut. */
function text(value: string | null | undefined): SqlParam {
  return { type: mssql.NVarChar(mssql.MAX), value: value ?? null };
}

/**
 * Stores one message, pending (or dead with `lastError`). A repeat of (source, idempotency key) fails on the
 * unique constraint inbox_source_idempotency_key_uq with error 2627, and the store then reads the existing id
 * (`selectInboxIdStatement`): the constraint answers, not a prior read, so two concurrent stores cannot both win.
 * (PostgreSQL's ON CONFLICT DO NOTHING has no T-SQL counterpart that avoids a range lock.)
 */
export function insertInboxStatement(
  schema: string,
  message: NewInboxMessage,
  state: 'pending' | 'dead',
  lastError: string | null,
): Statement {
  return {
    text: `INSERT INTO ${inbox(schema)}
  (source, idempotency_key, event_type, aggregate_id, correlation_id, payload, headers, state, max_attempts, last_error)
OUTPUT inserted.id
VALUES (@source, @idempotencyKey, @eventType, @aggregateId, @correlationId, @payload, @headers, @state, @maxAttempts, @lastError);`,
    values: {
      source: text(message.source),
      idempotencyKey: text(message.idempotencyKey),
      eventType: text(message.eventType),
      aggregateId: text(message.aggregateId),
      correlationId: text(message.correlationId),
      payload: text(JSON.stringify(message.payload)),
      headers: text(JSON.stringify(message.headers ?? {})),
      state: { type: mssql.NVarChar(50), value: state },
      maxAttempts: { type: mssql.Int, value: message.maxAttempts },
      lastError: text(lastError),
    },
  };
}

/**
 * The id of the row stored for (source, idempotency key): equal in the binary collation and of the same byte
 * lengths, which the unique key inbox_source_idempotency_key_uq also holds (trailing spaces count).
 */
export function selectInboxIdStatement(schema: string, source: string, idempotencyKey: string): Statement {
  return {
    text: `SELECT id FROM ${inbox(schema)}
WHERE source = @source AND idempotency_key = @idempotencyKey
  AND source_bytes = DATALENGTH(@source) AND idempotency_key_bytes = DATALENGTH(@idempotencyKey);`,
    values: {
      source: { type: mssql.NVarChar(200), value: source },
      idempotencyKey: { type: mssql.NVarChar(600), value: idempotencyKey },
    },
  };
}

/** Parameters of `claimInboxStatement`. */
export interface InboxClaimParameters {
  readonly sources: readonly string[];
  readonly batchSize: number;
  readonly leaseMs: number;
  /** Also take over processing rows of these sources whose lease expired (counting an attempt). */
  readonly takeOverExpired: boolean;
}

/**
 * pending → processing for due rows of the sources, oldest first, with one new token (NEWID()) and a lease;
 * with takeover, expired processing rows of the sources first (processing → processing, attempt + 1). Each
 * source reads its own range of `inbox_due` (and, for takeover, of `inbox_lease`) with CROSS APPLY and
 * {@link TAKE}, so concurrent pull workers of one source take different rows; rows locked but not chosen are
 * released when the statement ends. The UPDATE finds each row by primary-key seek and re-checks the whole
 * predicate on the locked row: pending and due, or (takeover only) processing with an expired lease.
 */
export function claimInboxStatement(schema: string, p: InboxClaimParameters): Statement {
  const t = inbox(schema);
  const expired = `SELECT e.id, 0 AS rank, e.lease_until AS since
    FROM ${SOURCES}
    CROSS APPLY (
      SELECT TOP (@batchSize) i.id, i.lease_until
      FROM ${t} AS i WITH (${TAKE})
      WHERE ${isSource('i.source')} AND i.state = N'processing' AND i.lease_until < ${UTC_NOW}
      ORDER BY i.lease_until, i.id
    ) AS e
    UNION ALL
    `;
  const recheck = p.takeOverExpired
    ? `(i.state = N'pending' AND i.scheduled_at <= ${UTC_NOW}) OR (i.state = N'processing' AND i.lease_until < ${UTC_NOW})`
    : `i.state = N'pending' AND i.scheduled_at <= ${UTC_NOW}`;
  return {
    text: `${TAKE_BEGIN}DECLARE @claimToken UNIQUEIDENTIFIER = NEWID();
WITH chosen AS (
  SELECT TOP (@batchSize) c.id
  FROM (
    ${p.takeOverExpired ? expired : ''}SELECT d.id, 1 AS rank, d.scheduled_at AS since
    FROM ${SOURCES}
    CROSS APPLY (
      SELECT TOP (@batchSize) i.id, i.scheduled_at
      FROM ${t} AS i WITH (${TAKE})
      WHERE ${isSource('i.source')} AND i.state = N'pending' AND i.scheduled_at <= ${UTC_NOW}
      ORDER BY i.scheduled_at, i.id
    ) AS d
  ) AS c
  ORDER BY c.rank, c.since, c.id
)
UPDATE i
SET attempt = i.attempt + CASE WHEN i.state = N'processing' THEN 1 ELSE 0 END,
  state = N'processing',
  claim_token = @claimToken,
  lease_until = ${utcNowPlus('@leaseMs')},
  updated_at = SYSUTCDATETIME()
OUTPUT ${qualified(INBOX_COLUMNS, 'inserted')}
FROM ${t} AS i WITH (FORCESEEK)
INNER JOIN chosen ON chosen.id = i.id
WHERE ${recheck};${TAKE_END}`,
    values: {
      sources: jsonParam(p.sources),
      batchSize: { type: mssql.Int, value: statementRows(p.batchSize) },
      leaseMs: { type: mssql.BigInt, value: clampDelayMs(p.leaseMs) },
    },
  };
}

/**
 * processing → processed, for the items whose token still matches. The relay's forward runs it and
 * `insertOutboxStatement` for exactly the rows it changed in one transaction (see inbox-store.ts).
 */
export function completeInboxStatement(schema: string, items: readonly RowClaim[]): Statement {
  return {
    text: `UPDATE b
SET state = N'processed', processed_at = SYSUTCDATETIME(), updated_at = SYSUTCDATETIME(), claim_token = NULL, lease_until = NULL
OUTPUT inserted.id, inserted.state
FROM ${inbox(schema)} AS b WITH (FORCESEEK)
INNER JOIN OPENJSON(@items) WITH (${CLAIM_COLUMNS}) AS i
  ON i.id = b.id AND i.claim_token = b.claim_token
WHERE b.state = N'processing';`,
    values: { items: jsonParam(items.map(claimJson)) },
  };
}

/** Counts an attempt; processing → pending at now + delay with the error in last_error. */
export function retryInboxStatement(schema: string, items: readonly InboxRetryItem[]): Statement {
  return {
    text: `UPDATE b
SET state = N'pending', attempt = b.attempt + 1, scheduled_at = ${utcNowPlus('i.delay_ms')},
  last_error = i.error, claim_token = NULL, lease_until = NULL, updated_at = SYSUTCDATETIME()
OUTPUT inserted.id, inserted.state
FROM ${inbox(schema)} AS b WITH (FORCESEEK)
INNER JOIN OPENJSON(@items) WITH (${CLAIM_COLUMNS}, error NVARCHAR(MAX) '$.error', delay_ms BIGINT '$.delayMs') AS i
  ON i.id = b.id AND i.claim_token = b.claim_token
WHERE b.state = N'processing';`,
    values: {
      items: jsonParam(
        items.map((i) => ({ ...claimJson(i), error: i.error, delayMs: clampDelayMs(i.delayMs) })),
      ),
    },
  };
}

/** processing → dead with the reason in last_error. */
export function giveUpInboxStatement(schema: string, items: readonly InboxDeadItem[]): Statement {
  return {
    text: `UPDATE b
SET state = N'dead', last_error = i.reason, claim_token = NULL, lease_until = NULL, updated_at = SYSUTCDATETIME()
OUTPUT inserted.id, inserted.state
FROM ${inbox(schema)} AS b WITH (FORCESEEK)
INNER JOIN OPENJSON(@items) WITH (${CLAIM_COLUMNS}, reason NVARCHAR(MAX) '$.reason') AS i
  ON i.id = b.id AND i.claim_token = b.claim_token
WHERE b.state = N'processing';`,
    values: { items: jsonParam(items.map((i) => ({ ...claimJson(i), reason: i.reason }))) },
  };
}

/**
 * Expired claims of the sources, oldest lease first, at most `limit` (and 4,000, see MAX_ROWS_PER_STATEMENT):
 * processing → pending counting the attempt they used, never dead (the relay's rows are forwarded, not delivered;
 * the outbox counts deliveries). Each source seeks its own expired rows in inbox_lease (source, lease_until); the
 * UPDATE re-checks state and lease on the locked row. Answers one row per reclaimed row.
 */
export function reclaimExpiredInboxStatement(
  schema: string,
  sources: readonly string[],
  limit: number,
): Statement {
  const t = inbox(schema);
  return {
    text: `${TAKE_BEGIN}WITH expired AS (
  SELECT TOP (@limit) e.id
  FROM ${SOURCES}
  CROSS APPLY (
    SELECT TOP (@limit) i.id, i.lease_until
    FROM ${t} AS i WITH (${TAKE})
    WHERE ${isSource('i.source')} AND i.state = N'processing' AND i.lease_until < ${UTC_NOW}
    ORDER BY i.lease_until, i.id
  ) AS e
  ORDER BY e.lease_until, e.id
)
UPDATE b
SET state = N'pending', attempt = b.attempt + 1, last_error = N'lease expired',
  claim_token = NULL, lease_until = NULL, updated_at = SYSUTCDATETIME()
OUTPUT inserted.id
FROM ${t} AS b WITH (FORCESEEK)
INNER JOIN expired ON expired.id = b.id
WHERE b.state = N'processing' AND b.lease_until < ${UTC_NOW};${TAKE_END}`,
    values: {
      sources: jsonParam(sources),
      limit: { type: mssql.Int, value: statementRows(limit) },
    },
  };
}

/** One row by id. */
export function getInboxStatement(schema: string, id: RowId): Statement {
  return {
    text: `SELECT ${INBOX_COLUMNS} FROM ${inbox(schema)} WHERE id = @id;`,
    values: { id: { type: mssql.BigInt, value: id } },
  };
}
