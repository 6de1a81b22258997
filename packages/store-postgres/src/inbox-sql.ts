/**
 * The inbox statements, one function each. The schema name is validated and quoted by `quoteSchema`; every
 * value is a parameter. Bulk statements take arrays and `unnest` them, so a batch is one round trip.
 */
import type {
  ForwardItem,
  InboxDeadItem,
  InboxRetryItem,
  NewInboxMessage,
  RowClaim,
  RowId,
} from '@queuebox/core';
import type { Statement } from './executor.ts';
import { sizedColumns } from './large-columns.ts';
import { INBOX_COLUMNS } from './rows.ts';
import { quoteSchema } from './schema-name.ts';

function inbox(schema: string): string {
  return `${quoteSchema(schema)}.inbox`;
}

function json(value: unknown): string {
  const text = JSON.stringify(value);
  return text === undefined ? (null as unknown as string) : text;
}

/**
 * Stores one message, pending (or dead with `lastError`); a repeat of (source, idempotency key) inserts nothing
 * and returns no row. The unique index answers, not a prior read, so two concurrent stores cannot both win.
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
VALUES ($1, $2, $3, $4, $5, $6::text::jsonb, $7::text::jsonb, $8, $9, $10)
ON CONFLICT (source, idempotency_key) DO NOTHING
RETURNING id::text AS id`,
    values: [
      message.source,
      message.idempotencyKey,
      message.eventType ?? null,
      message.aggregateId ?? null,
      message.correlationId ?? null,
      json(message.payload),
      json(message.headers ?? {}),
      state,
      message.maxAttempts,
      lastError,
    ],
  };
}

/** One message to store: pending, or dead with its reason. */
export interface InboxInsertItem {
  readonly message: NewInboxMessage;
  readonly state: 'pending' | 'dead';
  readonly lastError: string | null;
}

/** An item of a batched insert, with its payload and headers already serialized (`json`). */
export interface PreparedInboxInsert {
  readonly item: InboxInsertItem;
  readonly payload: string;
  readonly headers: string;
}

/** `item` with its payload and headers as JSON text. */
export function prepareInboxInsert(item: InboxInsertItem): PreparedInboxInsert {
  return { item, payload: json(item.message.payload), headers: json(item.message.headers ?? {}) };
}

/**
 * Stores several messages in one statement, ids drawn in the order given; each (source, idempotency key) must
 * occur once. Answers a row per pair it could decide: `stored` true with the new id, or false with the id of the
 * row that was already there when the statement began. A pair it answers nothing for met a row that another
 * transaction committed while the statement ran (invisible to its snapshot): read it with
 * `selectInboxIdsStatement`.
 */
export function insertInboxBatchStatement(schema: string, rows: readonly PreparedInboxInsert[]): Statement {
  const items = rows.map((r) => r.item);
  return {
    text: `WITH input AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                       $8::text[], $9::int[], $10::text[])
    WITH ORDINALITY AS i(source, idempotency_key, event_type, aggregate_id, correlation_id, payload, headers, state,
                         max_attempts, last_error, ord)
), inserted AS (
  INSERT INTO ${inbox(schema)}
    (source, idempotency_key, event_type, aggregate_id, correlation_id, payload, headers, state, max_attempts,
     last_error)
  SELECT source, idempotency_key, event_type, aggregate_id, correlation_id, payload::jsonb, headers::jsonb, state,
         max_attempts, last_error
  FROM input ORDER BY ord
  ON CONFLICT (source, idempotency_key) DO NOTHING
  RETURNING id, source, idempotency_key
)
SELECT id::text AS id, source, idempotency_key, true AS stored FROM inserted
UNION ALL
-- The statement's snapshot: rows there before it began, never the ones it inserts.
SELECT b.id::text, b.source, b.idempotency_key, false
FROM ${inbox(schema)} b JOIN input i ON b.source = i.source AND b.idempotency_key = i.idempotency_key`,
    values: [
      items.map((i) => i.message.source),
      items.map((i) => i.message.idempotencyKey),
      items.map((i) => i.message.eventType ?? null),
      items.map((i) => i.message.aggregateId ?? null),
      items.map((i) => i.message.correlationId ?? null),
      rows.map((r) => r.payload),
      rows.map((r) => r.headers),
      items.map((i) => i.state),
      items.map((i) => i.message.maxAttempts),
      items.map((i) => i.lastError),
    ],
  };
}

/** The ids of the rows stored for the (source, idempotency key) pairs. */
export function selectInboxIdsStatement(
  schema: string,
  pairs: readonly { readonly source: string; readonly idempotencyKey: string }[],
): Statement {
  return {
    text: `SELECT id::text AS id, source, idempotency_key FROM ${inbox(schema)}
WHERE (source, idempotency_key) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
    values: [pairs.map((p) => p.source), pairs.map((p) => p.idempotencyKey)],
  };
}

/** The id of the row stored for (source, idempotency key). */
export function selectInboxIdStatement(schema: string, source: string, idempotencyKey: string): Statement {
  return {
    text: `SELECT id::text AS id FROM ${inbox(schema)} WHERE source = $1 AND idempotency_key = $2`,
    values: [source, idempotencyKey],
  };
}

/** Parameters of `claimInboxStatement`. */
export interface InboxClaimParameters {
  readonly sources: readonly string[];
  readonly batchSize: number;
  readonly leaseMs: number;
  /** Also take over processing rows of these sources whose lease expired (counting an attempt). */
  readonly takeOverExpired: boolean;
  /** Rows larger than this answer their large columns outside (`sizedColumns`). Default: all inline. */
  readonly inlineBytes?: number;
}

/**
 * pending → processing for due rows of the sources, oldest first, with one new token and a lease; with
 * takeover, expired processing rows of the sources first (processing → processing, attempt + 1). Each source is
 * read from its own range of `inbox_due`, with `FOR UPDATE SKIP LOCKED`, so concurrent pull workers of one
 * source take different rows; rows locked but not chosen are released at the end of the statement.
 */
export function claimInboxStatement(schema: string, p: InboxClaimParameters): Statement {
  const t = inbox(schema);
  return {
    text: `WITH expired AS (
  SELECT i.id, 0 AS rank, i.lease_until AS since FROM ${t} i
  WHERE $4::boolean AND i.state = 'processing' AND i.lease_until < now() AND i.source = ANY($1::text[])
  ORDER BY i.lease_until
  LIMIT $2::int
  FOR UPDATE SKIP LOCKED
),
due AS (
  SELECT d.id, 1 AS rank, d.scheduled_at AS since
  FROM unnest($1::text[]) AS s(source)
  CROSS JOIN LATERAL (
    SELECT i.id, i.scheduled_at FROM ${t} i
    WHERE i.source = s.source AND i.state = 'pending' AND i.scheduled_at <= now()
    ORDER BY i.scheduled_at, i.id
    LIMIT $2::int
    FOR UPDATE SKIP LOCKED
  ) d
),
chosen AS (
  SELECT c.id FROM (SELECT * FROM expired UNION ALL SELECT * FROM due) c
  ORDER BY c.rank, c.since, c.id
  LIMIT $2::int
),
token AS (SELECT gen_random_uuid() AS value),
claimed AS (
  UPDATE ${t} i
  SET attempt = i.attempt + CASE WHEN i.state = 'processing' THEN 1 ELSE 0 END,
      state = 'processing',
      claim_token = (SELECT value FROM token),
      lease_until = now() + $3::float8 * interval '1 millisecond',
      updated_at = now()
  WHERE i.id = ANY (ARRAY(SELECT id FROM chosen))
  RETURNING ${sizedColumns(INBOX_COLUMNS, 'inbox', 'i', p.inlineBytes)}
)
SELECT * FROM claimed ORDER BY id::bigint`,
    values: [p.sources, p.batchSize, p.leaseMs, p.takeOverExpired],
  };
}

function claimArrays(items: readonly RowClaim[]): [RowId[], string[]] {
  return [items.map((i) => i.id), items.map((i) => i.claimToken.toLowerCase())];
}

/** processing → processed, for the items whose token still matches. */
export function completeInboxStatement(schema: string, items: readonly RowClaim[]): Statement {
  const [ids, tokens] = claimArrays(items);
  return {
    text: `UPDATE ${inbox(schema)} b
SET state = 'processed', processed_at = now(), updated_at = now(), claim_token = NULL, lease_until = NULL
FROM unnest($1::bigint[], $2::text[]) AS i(id, token)
WHERE b.id = ANY ($1::bigint[]) AND b.id = i.id AND b.state = 'processing' AND b.claim_token::text = i.token
RETURNING b.id::text AS id, b.state`,
    values: [ids, tokens],
  };
}

/** Counts an attempt; processing → pending at now + delay with the error in last_error. */
export function retryInboxStatement(schema: string, items: readonly InboxRetryItem[]): Statement {
  const [ids, tokens] = claimArrays(items);
  return {
    text: `UPDATE ${inbox(schema)} b
SET state = 'pending', attempt = b.attempt + 1, scheduled_at = now() + i.delay_ms * interval '1 millisecond',
    last_error = i.error, claim_token = NULL, lease_until = NULL, updated_at = now()
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::float8[]) AS i(id, token, error, delay_ms)
WHERE b.id = ANY ($1::bigint[]) AND b.id = i.id AND b.state = 'processing' AND b.claim_token::text = i.token
RETURNING b.id::text AS id, b.state`,
    values: [ids, tokens, items.map((i) => i.error), items.map((i) => Math.max(0, i.delayMs))],
  };
}

/** processing → dead with the reason in last_error. */
export function giveUpInboxStatement(schema: string, items: readonly InboxDeadItem[]): Statement {
  const [ids, tokens] = claimArrays(items);
  return {
    text: `UPDATE ${inbox(schema)} b
SET state = 'dead', last_error = i.reason, claim_token = NULL, lease_until = NULL, updated_at = now()
FROM unnest($1::bigint[], $2::text[], $3::text[]) AS i(id, token, reason)
WHERE b.id = ANY ($1::bigint[]) AND b.id = i.id AND b.state = 'processing' AND b.claim_token::text = i.token
RETURNING b.id::text AS id, b.state`,
    values: [ids, tokens, items.map((i) => i.reason)],
  };
}

/**
 * The relay's forward, as one statement and so one transaction: the inbox rows whose token matches go
 * processing → processed (`forwarded`), and exactly those get their outbox row (`outbox_ids`, ascending, which
 * is the order of the items since identities follow the insert order). A stale item writes nothing. When an
 * item's outbox row has a key, run `lockOutboxKeysStatement` first in the same transaction (the store does).
 */
export function forwardInboxStatement(schema: string, items: readonly ForwardItem[]): Statement {
  const s = quoteSchema(schema);
  const [ids, tokens] = claimArrays(items);
  return {
    text: `WITH input AS (
  SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::float8[])
    WITH ORDINALITY AS i(id, token, topic, key, payload, headers, max_attempts, delay_ms, ord)
),
forwarded AS (
  UPDATE ${s}.inbox b
  SET state = 'processed', processed_at = now(), updated_at = now(), claim_token = NULL, lease_until = NULL
  FROM input i
  WHERE b.id = ANY ($1::bigint[]) AND b.id = i.id AND b.state = 'processing' AND b.claim_token::text = i.token
  RETURNING b.id
),
inserted AS (
  INSERT INTO ${s}.outbox (topic, key, payload, headers, max_attempts, scheduled_at)
  SELECT i.topic, i.key, i.payload::jsonb, i.headers::jsonb, i.max_attempts,
         now() + i.delay_ms * interval '1 millisecond'
  FROM input i JOIN forwarded f ON f.id = i.id
  ORDER BY i.ord
  RETURNING id
)
SELECT (SELECT coalesce(array_agg(id::text), '{}') FROM forwarded) AS forwarded,
       (SELECT coalesce(array_agg(id::text ORDER BY id), '{}') FROM inserted) AS outbox_ids`,
    values: [
      ids,
      tokens,
      items.map((i) => i.outbox.topic),
      items.map((i) => i.outbox.key ?? null),
      items.map((i) => json(i.outbox.payload)),
      items.map((i) => json(i.outbox.headers ?? {})),
      items.map((i) => i.outbox.maxAttempts),
      items.map((i) => Math.max(0, i.outbox.delayMs ?? 0)),
    ],
  };
}

/**
 * Expired claims of the sources, oldest lease first, at most `limit`: processing → pending counting the attempt
 * they used, never dead (the relay's rows are forwarded, not delivered; the outbox counts deliveries).
 */
export function reclaimExpiredInboxStatement(
  schema: string,
  sources: readonly string[],
  limit: number,
): Statement {
  const t = inbox(schema);
  return {
    text: `WITH expired AS (
  SELECT i.id FROM ${t} i
  WHERE i.state = 'processing' AND i.lease_until < now() AND i.source = ANY($1::text[])
  ORDER BY i.lease_until
  LIMIT $2::int
  FOR UPDATE SKIP LOCKED
),
reclaimed AS (
  UPDATE ${t} b
  SET state = 'pending', attempt = b.attempt + 1, last_error = 'lease expired',
      claim_token = NULL, lease_until = NULL, updated_at = now()
  WHERE b.id = ANY (ARRAY(SELECT id FROM expired))
  RETURNING b.id
)
SELECT count(*)::int AS returned FROM reclaimed`,
    values: [sources, limit],
  };
}

/** One row by id (large columns outside when it is larger than `inlineBytes`, see `sizedColumns`). */
export function getInboxStatement(schema: string, id: RowId, inlineBytes?: number): Statement {
  return {
    text: `SELECT ${sizedColumns(INBOX_COLUMNS, 'inbox', undefined, inlineBytes)} FROM ${inbox(schema)} WHERE id = $1::bigint`,
    values: [id],
  };
}
