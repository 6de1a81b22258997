/**
 * The outbox statements, one function each. The schema name is validated and quoted by `quoteSchema`; every
 * value is a parameter. Bulk statements take arrays and `unnest` them, so a batch is one round trip.
 */
import type {
  NewOutboxMessage,
  OutboxDeadItem,
  OutboxRetryItem,
  OutboxSentItem,
  RowClaim,
  RowId,
} from '@queuebox/core';
import type { Statement } from './executor.ts';
import { sizedColumns } from './large-columns.ts';
import { outboxKeyLockName } from './outbox-key-lock.ts';
import { OUTBOX_COLUMNS } from './rows.ts';
import { quoteSchema } from './schema-name.ts';

function outbox(schema: string): string {
  return `${quoteSchema(schema)}.outbox`;
}

/** Payload and headers travel as JSON text and are cast in SQL, so a JSON string payload stays a string. */
function json(value: unknown): string {
  const text = JSON.stringify(value);
  // JSON.stringify(undefined) is undefined; NULL then hits the NOT NULL constraint with a clear error.
  return text === undefined ? (null as unknown as string) : text;
}

/** Inserts rows in state pending, in the order given; the ids come back in that order once sorted. */
export function insertOutboxStatement(schema: string, messages: readonly NewOutboxMessage[]): Statement {
  return {
    text: `INSERT INTO ${outbox(schema)} (topic, key, payload, headers, max_attempts, scheduled_at)
SELECT m.topic, m.key, m.payload::jsonb, m.headers::jsonb, m.max_attempts,
       now() + m.delay_ms * interval '1 millisecond'
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::float8[]) WITH ORDINALITY
  AS m(topic, key, payload, headers, max_attempts, delay_ms, ord)
ORDER BY m.ord
RETURNING id::text AS id`,
    values: [
      messages.map((m) => m.topic),
      messages.map((m) => m.key ?? null),
      messages.map((m) => json(m.payload)),
      messages.map((m) => json(m.headers ?? {})),
      messages.map((m) => m.maxAttempts),
      messages.map((m) => m.delayMs ?? 0),
    ],
  };
}

/**
 * Takes the transaction-scoped advisory lock of each distinct key,
 * `pg_advisory_xact_lock(hashtextextended(outboxKeyLockName(schema, key), 0))`, in ascending key order
 * (JavaScript code-unit order, whatever order `keys` has), so two writers never wait on each other in a cycle.
 * Run it in the writing transaction before the insert: the locks last until that transaction ends, so a second
 * writer of a key draws its id only after the first has committed, and the ids of one key grow in commit order —
 * the order the claim delivers. Writers of other keys do not wait. Answers `locked`, the number of keys.
 */
export function lockOutboxKeysStatement(schema: string, keys: readonly string[]): Statement {
  quoteSchema(schema);
  const names = [...new Set(keys)]
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    .map((key) => outboxKeyLockName(schema, key));
  return {
    // Rows of an unnest come out in array order, and count() evaluates its argument for each of them in turn.
    text: `SELECT count(pg_advisory_xact_lock(hashtextextended(k.name, 0)))::int AS locked
FROM unnest($1::text[]) AS k(name)`,
    values: [names],
  };
}

/**
 * One write of `messages` as **one statement**: `lockOutboxKeysStatement`'s locks (when a message has a key) and
 * `insertOutboxStatement`'s insert. The locks are a materialized CTE, an aggregate the insert's rows are joined
 * to, so every lock is held before the first id is drawn; run alone (autocommit) or in the application's
 * transaction, they last until it ends. One round trip instead of two (and no BEGIN/COMMIT of its own for the
 * store's keyed insert). A single message is inserted from plain parameters instead of arrays. Answers `id` per
 * row, in the order given.
 */
export function enqueueOutboxStatement(schema: string, messages: readonly NewOutboxMessage[]): Statement {
  const names = [...new Set(messages.flatMap((m) => (typeof m.key === 'string' ? [m.key] : [])))]
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    .map((key) => outboxKeyLockName(schema, key));
  const one = messages.length === 1 ? messages[0] : undefined;
  const locks = names.length > 0;
  const lockCte = `WITH locks AS MATERIALIZED (
  SELECT count(pg_advisory_xact_lock(hashtextextended(k.name, 0))) AS locked FROM unnest($7::text[]) AS k(name)
)
`;
  const columns = `INSERT INTO ${outbox(schema)} (topic, key, payload, headers, max_attempts, scheduled_at)`;
  if (one !== undefined) {
    const values = [
      one.topic,
      one.key ?? null,
      json(one.payload),
      json(one.headers ?? {}),
      one.maxAttempts,
      one.delayMs ?? 0,
    ];
    const row = `$1::text, $2::text, $3::text::jsonb, $4::text::jsonb, $5::int, now() + $6::float8 * interval '1 millisecond'`;
    return locks
      ? {
          text: `${lockCte}${columns}
SELECT ${row} FROM locks
RETURNING id::text AS id`,
          values: [...values, names],
        }
      : {
          text: `${columns}
VALUES (${row})
RETURNING id::text AS id`,
          values,
        };
  }
  const insert = insertOutboxStatement(schema, messages);
  if (!locks) return insert;
  return {
    text: `${lockCte}${insert.text.replace('FROM unnest(', 'FROM locks CROSS JOIN unnest(')}`,
    values: [...insert.values, names],
  };
}

/** Parameters of `claimOutboxStatement`. */
export interface OutboxClaimParameters {
  /** Most rows to claim. */
  readonly batchSize: number;
  /**
   * Places kept for unkeyed rows when due ones exist (0…batchSize); keyed heads take the rest first, then unkeyed
   * rows fill what the keys left. Alternating it between ⌊n/2⌋ and ⌈n/2⌉ keeps either kind from starving.
   */
  readonly unkeyedReserve: number;
  readonly leaseMs: number;
  /** The key walk starts after this key and wraps around to it; `null` starts at the smallest key. */
  readonly startAfterKey: string | null;
  /** Most distinct keys one claim visits. */
  readonly keyScanLimit: number;
  /** The claim token written to every claimed row (a UUID). */
  readonly claimToken: string;
  /** Rows larger than this answer their large columns outside (`sizedColumns`). Default: all inline. */
  readonly inlineBytes?: number;
}

/**
 * The claim (docs/design.md §5 Ordering). One statement:
 *
 * - `walk` is a recursive loose index scan over the partial index `outbox_active_key` (key, id of pending and
 *   processing rows): each step is one descent to the first entry after the previous key, in (key, id) order,
 *   and that entry is the next key's head, the smallest id of the key that is pending or processing. It starts
 *   after `startAfterKey`, wraps around to the smallest key, visits at most `keyScanLimit` keys, and is
 *   evaluated lazily, so it stops as soon as the batch is full.
 * - `keyed` takes, in walk order (LATERAL keeps the nested-loop order), the heads that are pending and due: a
 *   processing or retrying head holds its key back, and rows behind a head are never candidates. Each head is
 *   locked with `FOR UPDATE SKIP LOCKED` (a row another claimer holds is skipped, not waited for) and
 *   `state = 'pending'` is re-checked on the locked version, which drops a head that a concurrent claim took
 *   after this statement's snapshot. `LIMIT` counts locked rows only.
 * - `unkeyed` takes due rows without a key from `outbox_due_unkeyed`, oldest first, for the remaining places.
 * - `claimed` moves them to processing with the claim token and a lease on the database clock.
 * - `cursor` answers where the next walk should start (after the last key claimed when the batch filled, else
 *   after the last key visited, so keys beyond a long blocked stretch are reached), and whether candidate heads
 *   were lost to concurrent claimers (`contended`): then an empty answer does not mean "nothing to claim".
 *   It reads the walk to its end only when the keyed places were not filled, that is when the walk already ran
 *   out, so that costs nothing.
 *
 * Rows come back ordered by id, each with `next_key` and `contended`; when nothing was claimed one row of NULLs
 * carries them.
 */
export function claimOutboxStatement(schema: string, p: OutboxClaimParameters): Statement {
  const t = outbox(schema);
  const head = `o.key::text AS key, o.id AS head_id, o.state = 'pending' AND o.scheduled_at <= now() AS claimable`;
  const active = `o.state IN ('pending', 'processing')`;
  return {
    text: `WITH RECURSIVE walk (key, head_id, claimable, ord, wrapped) AS (
  (
    SELECT first.key, first.head_id, first.claimable, 1, first.wrapped FROM (
      (SELECT ${head}, false AS wrapped FROM ${t} o
        WHERE ${active} AND o.key > $3::text ORDER BY o.key, o.id LIMIT 1)
      UNION ALL
      (SELECT ${head}, true FROM ${t} o
        WHERE ${active} AND o.key IS NOT NULL ORDER BY o.key, o.id LIMIT 1)
    ) first
    LIMIT 1
  )
  UNION ALL
  SELECT step.key, step.head_id, step.claimable, w.ord + 1, step.wrapped
  FROM walk w
  CROSS JOIN LATERAL (
    SELECT nxt.* FROM (
      (SELECT ${head}, w.wrapped AS wrapped FROM ${t} o
        WHERE ${active} AND o.key > w.key ORDER BY o.key, o.id LIMIT 1)
      UNION ALL
      (SELECT ${head}, true FROM ${t} o
        WHERE NOT w.wrapped AND ${active} AND o.key IS NOT NULL ORDER BY o.key, o.id LIMIT 1)
    ) nxt
    LIMIT 1
  ) step
  WHERE w.ord < $4::int AND (NOT step.wrapped OR $3::text IS NULL OR step.key <= $3::text)
),
reserve AS (
  SELECT $1::int - count(*)::int AS keyed_places FROM (
    SELECT 1 FROM ${t} o
    WHERE o.state = 'pending' AND o.key IS NULL AND o.scheduled_at <= now()
    ORDER BY o.scheduled_at, o.id
    LIMIT $2::int
  ) due_unkeyed
),
keyed AS (
  SELECT l.id, w.key, w.ord
  FROM walk w
  CROSS JOIN LATERAL (
    SELECT o.id FROM ${t} o
    WHERE o.id = w.head_id AND o.state = 'pending' AND o.scheduled_at <= now()
    FOR UPDATE SKIP LOCKED
  ) l
  WHERE w.claimable
  LIMIT (SELECT keyed_places FROM reserve)
),
unkeyed AS (
  SELECT o.id FROM ${t} o
  WHERE o.state = 'pending' AND o.key IS NULL AND o.scheduled_at <= now()
  ORDER BY o.scheduled_at, o.id
  LIMIT (SELECT $1::int - count(*)::int FROM keyed)
  FOR UPDATE OF o SKIP LOCKED
),
claimed AS (
  UPDATE ${t} o
  SET state = 'processing',
      claim_token = $6::uuid,
      lease_until = now() + $5::float8 * interval '1 millisecond',
      updated_at = now()
  WHERE o.id = ANY (ARRAY(SELECT id FROM keyed UNION ALL SELECT id FROM unkeyed)) AND o.state = 'pending'
  RETURNING ${sizedColumns(OUTBOX_COLUMNS, 'outbox', 'o', p.inlineBytes)}
),
cursor AS (
  SELECT
    CASE
      WHEN (SELECT keyed_places FROM reserve) <= 0 THEN $3::text
      WHEN (SELECT count(*) FROM keyed) < (SELECT keyed_places FROM reserve)
        THEN (SELECT w.key FROM walk w ORDER BY w.ord DESC LIMIT 1)
      ELSE (SELECT k.key FROM keyed k ORDER BY k.ord DESC LIMIT 1)
    END AS next_key,
    CASE
      WHEN (SELECT keyed_places FROM reserve) > 0
       AND (SELECT count(*) FROM keyed) < (SELECT keyed_places FROM reserve)
        THEN (SELECT count(*) FROM walk w WHERE w.claimable) > (SELECT count(*) FROM keyed)
      ELSE false
    END AS contended
)
SELECT claimed.*, cursor.next_key, cursor.contended
FROM cursor LEFT JOIN claimed ON true
ORDER BY claimed.id::bigint`,
    values: [p.batchSize, p.unkeyedReserve, p.startAfterKey, p.keyScanLimit, p.leaseMs, p.claimToken],
  };
}

/** Ids and tokens as the settle statements take them (tokens compared as text, so a malformed one is stale). */
function claimArrays(items: readonly RowClaim[]): [RowId[], string[]] {
  return [items.map((i) => i.id), items.map((i) => i.claimToken.toLowerCase())];
}

/** A claim token as PostgreSQL prints a uuid: then it can be compared as a uuid, with the column's own type. */
const CANONICAL_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * processing → sent, for the items whose token still matches. A batch of one claim, routed to one destination
 * (the common case: one token per claim), is settled by a statement without the per-row join: the ids as one
 * array, the token and the destination once.
 */
export function markOutboxSentStatement(schema: string, items: readonly OutboxSentItem[]): Statement {
  const [ids, tokens] = claimArrays(items);
  const token = tokens[0];
  const destination = items[0]?.destination;
  if (
    token !== undefined &&
    CANONICAL_UUID.test(token) &&
    tokens.every((t) => t === token) &&
    items.every((i) => i.destination === destination)
  ) {
    return {
      text: `UPDATE ${outbox(schema)} o
SET state = 'sent', sent_at = now(), updated_at = now(), destination = $3::text,
    claim_token = NULL, lease_until = NULL
WHERE o.id = ANY ($1::bigint[]) AND o.state = 'processing' AND o.claim_token = $2::uuid
RETURNING o.id::text AS id, o.state`,
      values: [ids, token, destination],
    };
  }
  return {
    text: `UPDATE ${outbox(schema)} o
SET state = 'sent', sent_at = now(), updated_at = now(), destination = i.destination,
    claim_token = NULL, lease_until = NULL
FROM unnest($1::bigint[], $2::text[], $3::text[]) AS i(id, token, destination)
WHERE o.id = ANY ($1::bigint[]) AND o.id = i.id AND o.state = 'processing' AND o.claim_token::text = i.token
RETURNING o.id::text AS id, o.state`,
    values: [ids, tokens, items.map((i) => i.destination)],
  };
}

/**
 * Counts an attempt; processing → pending at now + delay, or → dead when the attempt was the last
 * (attempt + 1 >= max_attempts). The error is kept in last_error either way.
 */
export function retryOutboxStatement(schema: string, items: readonly OutboxRetryItem[]): Statement {
  const [ids, tokens] = claimArrays(items);
  return {
    text: `UPDATE ${outbox(schema)} o
SET attempt = o.attempt + 1,
    state = CASE WHEN o.attempt + 1 >= o.max_attempts THEN 'dead' ELSE 'pending' END,
    scheduled_at = CASE WHEN o.attempt + 1 >= o.max_attempts THEN o.scheduled_at
                        ELSE now() + i.delay_ms * interval '1 millisecond' END,
    last_error = i.error, destination = coalesce(i.destination, o.destination),
    claim_token = NULL, lease_until = NULL, updated_at = now()
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::float8[], $5::text[]) AS i(id, token, error, delay_ms, destination)
WHERE o.id = ANY ($1::bigint[]) AND o.id = i.id AND o.state = 'processing' AND o.claim_token::text = i.token
RETURNING o.id::text AS id, o.state`,
    values: [
      ids,
      tokens,
      items.map((i) => i.error),
      items.map((i) => Math.max(0, i.delayMs)),
      items.map((i) => i.destination ?? null),
    ],
  };
}

/** processing → dead with the reason; counts an attempt only when one was made. */
export function markOutboxDeadStatement(schema: string, items: readonly OutboxDeadItem[]): Statement {
  const [ids, tokens] = claimArrays(items);
  return {
    text: `UPDATE ${outbox(schema)} o
SET state = 'dead', attempt = o.attempt + CASE WHEN i.attempted THEN 1 ELSE 0 END,
    last_error = i.reason, destination = coalesce(i.destination, o.destination),
    claim_token = NULL, lease_until = NULL, updated_at = now()
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::boolean[]) AS i(id, token, reason, destination, attempted)
WHERE o.id = ANY ($1::bigint[]) AND o.id = i.id AND o.state = 'processing' AND o.claim_token::text = i.token
RETURNING o.id::text AS id, o.state`,
    values: [
      ids,
      tokens,
      items.map((i) => i.reason),
      items.map((i) => i.destination ?? null),
      items.map((i) => i.attempted === true),
    ],
  };
}

/** processing → pending without counting an attempt; the row stays due. */
export function releaseOutboxStatement(schema: string, items: readonly RowClaim[]): Statement {
  const [ids, tokens] = claimArrays(items);
  return {
    text: `UPDATE ${outbox(schema)} o
SET state = 'pending', claim_token = NULL, lease_until = NULL, updated_at = now()
FROM unnest($1::bigint[], $2::text[]) AS i(id, token)
WHERE o.id = ANY ($1::bigint[]) AND o.id = i.id AND o.state = 'processing' AND o.claim_token::text = i.token
RETURNING o.id::text AS id, o.state`,
    values: [ids, tokens],
  };
}

/**
 * Expired claims, oldest lease first, at most `limit`: processing → pending counting the attempt they used, or
 * → dead when none remains; last_error says `lease expired`. Rows another reclaimer holds are skipped.
 */
export function reclaimExpiredOutboxStatement(schema: string, limit: number): Statement {
  const t = outbox(schema);
  return {
    text: `WITH expired AS (
  SELECT o.id FROM ${t} o
  WHERE o.state = 'processing' AND o.lease_until < now()
  ORDER BY o.lease_until
  LIMIT $1::int
  FOR UPDATE SKIP LOCKED
),
reclaimed AS (
  UPDATE ${t} o
  SET attempt = o.attempt + 1,
      state = CASE WHEN o.attempt + 1 >= o.max_attempts THEN 'dead' ELSE 'pending' END,
      last_error = 'lease expired', claim_token = NULL, lease_until = NULL, updated_at = now()
  WHERE o.id = ANY (ARRAY(SELECT id FROM expired))
  RETURNING o.state
)
SELECT count(*) FILTER (WHERE state = 'pending')::int AS returned,
       count(*) FILTER (WHERE state = 'dead')::int AS dead
FROM reclaimed`,
    values: [limit],
  };
}

/** One row by id (large columns outside when it is larger than `inlineBytes`, see `sizedColumns`). */
export function getOutboxStatement(schema: string, id: RowId, inlineBytes?: number): Statement {
  return {
    text: `SELECT ${sizedColumns(OUTBOX_COLUMNS, 'outbox', undefined, inlineBytes)} FROM ${outbox(schema)} WHERE id = $1::bigint`,
    values: [id],
  };
}
