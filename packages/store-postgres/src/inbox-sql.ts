/**
 * The inbox statements, one function each: settle, forward, read (the store with its dedupe is in
 * inbox-dedupe.ts, the claim in inbox-claim.ts, the reclaim of expired leases in lease.ts). The schema name is validated and quoted by `quoteSchema`; every
 * value is a parameter. Bulk statements take arrays and `unnest` them, so a batch is one round trip.
 */
import {
  type ForwardItem,
  type InboxDeadItem,
  type InboxRetryItem,
  type RowClaim,
  type RowId,
  storableErrorText,
} from '@queuebox/core';
import type { Statement } from './executor.ts';
import { sizedColumns } from './large-columns.ts';
import { clampDelayMs } from './outbox-sql.ts';
import { INBOX_COLUMNS, jsonText } from './rows.ts';
import { inboxTable, quoteSchema } from './schema-name.ts';

function claimArrays(items: readonly RowClaim[]): [RowId[], string[]] {
  return [items.map((i) => i.id), items.map((i) => i.claimToken.toLowerCase())];
}

/** processing → processed, for the items whose token still matches. */
export function markInboxProcessedStatement(schema: string, items: readonly RowClaim[]): Statement {
  const [ids, tokens] = claimArrays(items);
  return {
    text: `UPDATE ${inboxTable(schema)} b
SET state = 'processed', processed_at = pg_catalog.now(), updated_at = pg_catalog.now(), claim_token = NULL, lease_until = NULL
FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::text[])) AS i(id, token)
WHERE b.id = ANY ($1::bigint[]) AND b.id = i.id AND b.state = 'processing' AND b.claim_token::text = i.token
RETURNING b.id::text AS id, b.state`,
    values: [ids, tokens],
  };
}

/** Counts an attempt; processing → pending at now + delay with the error in last_error. */
export function retryInboxStatement(schema: string, items: readonly InboxRetryItem[]): Statement {
  const [ids, tokens] = claimArrays(items);
  return {
    text: `UPDATE ${inboxTable(schema)} b
SET state = 'pending', attempt = b.attempt + 1, scheduled_at = pg_catalog.now() + i.delay_ms * interval '1 millisecond',
    last_error = i.error, claim_token = NULL, lease_until = NULL, updated_at = pg_catalog.now()
FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::float8[])) AS i(id, token, error, delay_ms)
WHERE b.id = ANY ($1::bigint[]) AND b.id = i.id AND b.state = 'processing' AND b.claim_token::text = i.token
RETURNING b.id::text AS id, b.state`,
    values: [
      ids,
      tokens,
      items.map((i) => storableErrorText(i.error)),
      items.map((i) => clampDelayMs(i.delayMs)),
    ],
  };
}

/** processing → dead with the reason in last_error, counting one attempt for an item `attempted`. */
export function markInboxDeadStatement(schema: string, items: readonly InboxDeadItem[]): Statement {
  const [ids, tokens] = claimArrays(items);
  return {
    text: `UPDATE ${inboxTable(schema)} b
SET state = 'dead', attempt = b.attempt + CASE WHEN i.attempted THEN 1 ELSE 0 END, last_error = i.reason,
    claim_token = NULL, lease_until = NULL, updated_at = pg_catalog.now()
FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::boolean[])) AS i(id, token, reason, attempted)
WHERE b.id = ANY ($1::bigint[]) AND b.id = i.id AND b.state = 'processing' AND b.claim_token::text = i.token
RETURNING b.id::text AS id, b.state`,
    values: [
      ids,
      tokens,
      items.map((i) => storableErrorText(i.reason)),
      items.map((i) => i.attempted === true),
    ],
  };
}

/**
 * The relay's forward, as one statement and so one transaction: the inbox rows whose token matches go
 * processing → processed (`forwarded`), and exactly those get their outbox row (`outbox_ids`, ascending, which
 * is the order of the items since identities follow the insert order). A stale item writes nothing. An item
 * without a payload (SQL NULL: `jsonText(undefined)`) gets the payload of its inbox row, read by the UPDATE that
 * marks it processed, so the relay never receives nor sends it. When an item's outbox row has a key, run
 * `lockOutboxKeysStatement` first in the same transaction (the store does).
 */
export function forwardInboxStatement(schema: string, items: readonly ForwardItem[]): Statement {
  return {
    text: `WITH ${forwardInboxCtes(schema)}
SELECT (SELECT coalesce(pg_catalog.array_agg(id::text), '{}') FROM forwarded) AS forwarded,
       (SELECT coalesce(pg_catalog.array_agg(id::text ORDER BY id), '{}') FROM inserted) AS outbox_ids`,
    values: forwardInboxValues(items),
  };
}

/**
 * The CTEs of `forwardInboxStatement` (`input`, `forwarded`: the inbox rows marked processed — id, payload, source,
 * aggregate_id —, `inserted`: the outbox ids), reading `forwardInboxValues` as `$1` … `$8`.
 */
export function forwardInboxCtes(schema: string): string {
  const s = quoteSchema(schema);
  return `input AS (
  SELECT * FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]),
    pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::text[]), pg_catalog.unnest($6::text[]),
    pg_catalog.unnest($7::int[]), pg_catalog.unnest($8::float8[]))
    WITH ORDINALITY AS i(id, token, topic, key, payload, headers, max_attempts, delay_ms, ord)
),
forwarded AS (
  UPDATE ${s}.inbox b
  SET state = 'processed', processed_at = pg_catalog.now(), updated_at = pg_catalog.now(), claim_token = NULL, lease_until = NULL
  FROM input i
  WHERE b.id = ANY ($1::bigint[]) AND b.id = i.id AND b.state = 'processing' AND b.claim_token::text = i.token
  RETURNING b.id, b.payload, b.source, b.aggregate_id
),
inserted AS (
  INSERT INTO ${s}.outbox (topic, key, payload, headers, max_attempts, scheduled_at)
  SELECT i.topic, i.key, coalesce(i.payload::jsonb, f.payload), i.headers::jsonb, i.max_attempts,
         pg_catalog.now() + i.delay_ms * interval '1 millisecond'
  FROM input i JOIN forwarded f ON f.id = i.id
  ORDER BY i.ord
  RETURNING id
)`;
}

/** The parameters of `forwardInboxCtes`, in order. */
export function forwardInboxValues(items: readonly ForwardItem[]): unknown[] {
  const [ids, tokens] = claimArrays(items);
  return [
    ids,
    tokens,
    items.map((i) => i.outbox.topic),
    items.map((i) => i.outbox.key ?? null),
    items.map((i) => (i.outbox.payload === undefined ? null : jsonText(i.outbox.payload))),
    items.map((i) => jsonText(i.outbox.headers ?? {})),
    items.map((i) => i.outbox.maxAttempts),
    items.map((i) => clampDelayMs(i.outbox.delayMs ?? 0)),
  ];
}

/** One row by id (large columns outside when it is larger than `inlineBytes`, see `sizedColumns`). */
export function getInboxStatement(schema: string, id: RowId, inlineBytes?: number): Statement {
  return {
    text: `SELECT ${sizedColumns(INBOX_COLUMNS, 'inbox', undefined, inlineBytes)} FROM ${inboxTable(schema)} WHERE id = $1::bigint`,
    values: [id],
  };
}
