/**
 * The outbox statements, one function each: insert, settle, read (the claim is in outbox-claim.ts, the reclaim
 * of expired leases in lease.ts). The schema name is validated and quoted by `quoteSchema`; every
 * value is a parameter. Bulk statements take arrays and `unnest` them, so a batch is one round trip.
 */
import {
  MAX_PULL_DELAY_MS,
  type NewOutboxMessage,
  type OutboxDeadItem,
  type OutboxReleaseItem,
  type OutboxRetryItem,
  type OutboxSentItem,
  type RowClaim,
  type RowId,
  storableErrorText,
} from '@queuebox/core';
import type { Statement } from './executor.ts';
import { sizedColumns } from './large-columns.ts';
import { outboxKeyLockName } from './outbox-key-lock.ts';
import { jsonText, OUTBOX_COLUMNS } from './rows.ts';
import { outboxTable, quoteSchema } from './schema-name.ts';

/**
 * A delay as the statements add it to `now()` (an insert's, a retry's, the relay's forward): at least 0, at most
 * MAX_PULL_DELAY_MS (about 68 years), NaN as 0, as store-sqlserver's `clampDelayMs`. A longer delay (a backoff
 * without a usable ceiling at a high attempt: 1 s × 2^59 at attempt 60, or `Infinity`) is beyond what PostgreSQL
 * adds to a timestamp ("interval out of range"), and failed the whole statement: every row of a retry stayed
 * processing until its lease expired, and was then delivered again.
 */
export function clampDelayMs(delayMs: number): number {
  if (!(delayMs > 0)) return 0;
  return Math.min(delayMs, MAX_PULL_DELAY_MS);
}

/** Inserts rows in state pending, in the order given; the ids come back in that order once sorted. */
export function insertOutboxStatement(schema: string, messages: readonly NewOutboxMessage[]): Statement {
  return {
    text: `INSERT INTO ${outboxTable(schema)} (topic, key, payload, headers, max_attempts, scheduled_at)
SELECT m.topic, m.key, m.payload::jsonb, m.headers::jsonb, m.max_attempts,
       pg_catalog.now() + m.delay_ms * interval '1 millisecond'
FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]),
               pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::int[]), pg_catalog.unnest($6::float8[])) WITH ORDINALITY
  AS m(topic, key, payload, headers, max_attempts, delay_ms, ord)
ORDER BY m.ord
RETURNING id::text AS id`,
    values: [
      messages.map((m) => m.topic),
      messages.map((m) => m.key ?? null),
      messages.map((m) => jsonText(m.payload)),
      messages.map((m) => jsonText(m.headers ?? {})),
      messages.map((m) => m.maxAttempts),
      messages.map((m) => clampDelayMs(m.delayMs ?? 0)),
    ],
  };
}

/**
 * Takes the transaction-scoped advisory lock of each distinct key,
 * `pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended(outboxKeyLockName(schema, key), 0::bigint))`, in
 * ascending key order (JavaScript code-unit order, whatever order `keys` has), so two writers never wait on each
 * other in a cycle.
 * Run it in the writing transaction before the insert: the locks last until that transaction ends, so a second
 * writer of a key draws its id only after the first has committed, and the ids of one key grow in commit order —
 * the order the claim delivers. Writers of other keys do not wait. Answers `locked`, the number of keys.
 */
export function lockOutboxKeysStatement(schema: string, keys: readonly string[]): Statement {
  quoteSchema(schema);
  const names = keyLockNames(schema, keys);
  return {
    // Rows of an unnest come out in array order, and count() evaluates its argument for each of them in turn.
    text: `SELECT pg_catalog.count(pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended(k.name, 0::bigint)))::int AS locked
FROM pg_catalog.unnest($1::text[]) AS k(name)`,
    values: [names],
  };
}

/**
 * Tries the locks of `lockOutboxKeysStatement` without waiting, in the same order: answers `busy`, the lock names
 * another transaction holds (in that order; empty when this transaction now holds every lock). A writer that must
 * not hold some keys while it waits for another (the relay's forward) rolls back when any is busy and waits for it
 * alone (`waitForOutboxKeyStatement`).
 */
export function tryOutboxKeysStatement(schema: string, keys: readonly string[]): Statement {
  quoteSchema(schema);
  return {
    text: `SELECT coalesce(pg_catalog.array_agg(k.name ORDER BY k.n), '{}') AS busy
FROM pg_catalog.unnest($1::text[]) WITH ORDINALITY AS k(name, n)
WHERE NOT pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtextextended(k.name, 0::bigint))`,
    values: [keyLockNames(schema, keys)],
  };
}

/** Waits for the per-key lock `name` (a name `tryOutboxKeysStatement` answered) and holds it until the transaction ends. */
export function waitForOutboxKeyStatement(name: string): Statement {
  return {
    text: 'SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended($1, 0::bigint)) IS NULL AS waited',
    values: [name],
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
  const names = keyLockNames(schema, messageKeys(messages));
  const one = messages.length === 1 ? messages[0] : undefined;
  const locks = names.length > 0;
  const lockCte = `WITH ${keyLocksCte('$7')}
`;
  const columns = `INSERT INTO ${outboxTable(schema)} (topic, key, payload, headers, max_attempts, scheduled_at)`;
  if (one !== undefined) {
    const values = [
      one.topic,
      one.key ?? null,
      jsonText(one.payload),
      jsonText(one.headers ?? {}),
      one.maxAttempts,
      clampDelayMs(one.delayMs ?? 0),
    ];
    const row = `$1::text, $2::text, $3::text::jsonb, $4::text::jsonb, $5::int, pg_catalog.now() + $6::float8 * interval '1 millisecond'`;
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
    text: `${lockCte}${insert.text.replace('FROM ROWS FROM (', 'FROM locks CROSS JOIN ROWS FROM (')}`,
    values: [...insert.values, names],
  };
}

/** The lock names of `keys`: each distinct key once, in ascending order (JavaScript code-unit order). */
function keyLockNames(schema: string, keys: readonly string[]): string[] {
  return [...new Set(keys)]
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    .map((key) => outboxKeyLockName(schema, key));
}

/** The keys of `messages` that have one. */
function messageKeys(messages: readonly NewOutboxMessage[]): string[] {
  return messages.flatMap((m) => (typeof m.key === 'string' ? [m.key] : []));
}

/** The materialized CTE `locks` taking the advisory lock of each name of the text[] parameter `names`, in order. */
function keyLocksCte(names: string, when = ''): string {
  return `locks AS MATERIALIZED (
  SELECT pg_catalog.count(pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended(k.name, 0::bigint))) AS locked FROM pg_catalog.unnest(${names}::text[]) AS k(name)${when}
)`;
}

/**
 * The first statement of an enqueue through a query function: answers `guard`, the id of the transaction it ran in
 * (`pg_catalog.txid_current()`, as text), which `guardedEnqueueStatement` compares with its own.
 */
export function enqueueGuardStatement(): Statement {
  return { text: 'SELECT pg_catalog.txid_current()::text AS guard', values: [] };
}

/**
 * `enqueueOutboxStatement` for a connection whose transaction state cannot be asked (any driver's query
 * function): it takes the key locks and inserts only when it runs in the transaction `enqueueGuardStatement`
 * answered `transactionId` in. Run outside a transaction (autocommit), or on a pool that sends the two statements
 * on different connections, each statement has a transaction of its own, and it inserts nothing and answers no
 * row. Enqueues that overlap on one transaction all pass (one transaction, one id). Every value is text (arrays as
 * PostgreSQL array literals, `arrayLiteral`), so a driver that expands a JavaScript array into a list of parameters
 * (Knex, Drizzle) sends the same statement. Answers `id` per row, in the order given.
 */
export function guardedEnqueueStatement(
  schema: string,
  messages: readonly NewOutboxMessage[],
  transactionId: string,
): Statement {
  const insert = insertOutboxStatement(schema, messages);
  const guarded = `WITH guard AS MATERIALIZED (
  SELECT 1 AS ok WHERE pg_catalog.txid_current()::text = $8::text
),
${keyLocksCte('$7', ' WHERE EXISTS (SELECT 1 FROM guard)')}
${insert.text.replace('FROM ROWS FROM (', 'FROM guard CROSS JOIN locks CROSS JOIN ROWS FROM (')}`;
  const values = [...insert.values, keyLockNames(schema, messageKeys(messages))].map((v) =>
    arrayLiteral(v as readonly (string | number | null)[]),
  );
  return { text: guarded, values: [...values, transactionId] };
}

/**
 * A PostgreSQL array literal of `items` (`{"a","b\"c",NULL,1.5}`): each string in double quotes with `\` and
 * `"` escaped, null as NULL, a number as JavaScript prints it (which float8 and int read back).
 */
export function arrayLiteral(items: readonly (string | number | null)[]): string {
  const elements = items.map((item) => {
    if (item === null) return 'NULL';
    if (typeof item === 'number') return String(item);
    return `"${item.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
  });
  return `{${elements.join(',')}}`;
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
      text: `UPDATE ${outboxTable(schema)} o
SET state = 'sent', sent_at = pg_catalog.now(), updated_at = pg_catalog.now(), destination = $3::text,
    claim_token = NULL, lease_until = NULL
WHERE o.id = ANY ($1::bigint[]) AND o.state = 'processing' AND o.claim_token = $2::uuid
RETURNING o.id::text AS id, o.state`,
      values: [ids, token, destination],
    };
  }
  return {
    text: `UPDATE ${outboxTable(schema)} o
SET state = 'sent', sent_at = pg_catalog.now(), updated_at = pg_catalog.now(), destination = i.destination,
    claim_token = NULL, lease_until = NULL
FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[])) AS i(id, token, destination)
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
    text: `UPDATE ${outboxTable(schema)} o
SET attempt = o.attempt + 1,
    state = CASE WHEN o.attempt + 1 >= o.max_attempts THEN 'dead' ELSE 'pending' END,
    scheduled_at = CASE WHEN o.attempt + 1 >= o.max_attempts THEN o.scheduled_at
                        ELSE pg_catalog.now() + i.delay_ms * interval '1 millisecond' END,
    last_error = i.error, destination = coalesce(i.destination, o.destination),
    claim_token = NULL, lease_until = NULL, updated_at = pg_catalog.now()
FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::float8[]), pg_catalog.unnest($5::text[])) AS i(id, token, error, delay_ms, destination)
WHERE o.id = ANY ($1::bigint[]) AND o.id = i.id AND o.state = 'processing' AND o.claim_token::text = i.token
RETURNING o.id::text AS id, o.state`,
    values: [
      ids,
      tokens,
      items.map((i) => storableErrorText(i.error)),
      items.map((i) => clampDelayMs(i.delayMs)),
      items.map((i) => i.destination ?? null),
    ],
  };
}

/**
 * processing → dead with the reason; counts an attempt only when one was made, and lowers max_attempts to an item's
 * `maxAttempts` (a destination's) when that is lower.
 */
export function markOutboxDeadStatement(schema: string, items: readonly OutboxDeadItem[]): Statement {
  const [ids, tokens] = claimArrays(items);
  return {
    text: `UPDATE ${outboxTable(schema)} o
SET state = 'dead', attempt = o.attempt + CASE WHEN i.attempted THEN 1 ELSE 0 END,
    max_attempts = LEAST(o.max_attempts, coalesce(i.max_attempts, o.max_attempts)),
    last_error = i.reason, destination = coalesce(i.destination, o.destination),
    claim_token = NULL, lease_until = NULL, updated_at = pg_catalog.now()
FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::boolean[]), pg_catalog.unnest($6::int[]))
  AS i(id, token, reason, destination, attempted, max_attempts)
WHERE o.id = ANY ($1::bigint[]) AND o.id = i.id AND o.state = 'processing' AND o.claim_token::text = i.token
RETURNING o.id::text AS id, o.state`,
    values: [
      ids,
      tokens,
      items.map((i) => storableErrorText(i.reason)),
      items.map((i) => i.destination ?? null),
      items.map((i) => i.attempted === true),
      items.map((i) => (Number.isInteger(i.maxAttempts) ? i.maxAttempts : null)),
    ],
  };
}

/**
 * processing → pending without counting an attempt, due again `delayMs` from now (default 0): behind the rows that
 * were due before it, so rows given back untried (a destination whose connections are all busy, a drain that
 * stopped) are not claimed again ahead of every other destination's, and a busy destination's are not claimed again
 * at once.
 */
export function releaseOutboxStatement(schema: string, items: readonly OutboxReleaseItem[]): Statement {
  const [ids, tokens] = claimArrays(items);
  return {
    text: `UPDATE ${outboxTable(schema)} o
SET state = 'pending', claim_token = NULL, lease_until = NULL,
    scheduled_at = pg_catalog.now() + i.delay_ms * interval '1 millisecond', updated_at = pg_catalog.now()
FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::float8[])) AS i(id, token, delay_ms)
WHERE o.id = ANY ($1::bigint[]) AND o.id = i.id AND o.state = 'processing' AND o.claim_token::text = i.token
RETURNING o.id::text AS id, o.state`,
    values: [ids, tokens, items.map((i) => clampDelayMs(i.delayMs ?? 0))],
  };
}

/** One row by id (large columns outside when it is larger than `inlineBytes`, see `sizedColumns`). */
export function getOutboxStatement(schema: string, id: RowId, inlineBytes?: number): Statement {
  return {
    text: `SELECT ${sizedColumns(OUTBOX_COLUMNS, 'outbox', undefined, inlineBytes)} FROM ${outboxTable(schema)} WHERE id = $1::bigint`,
    values: [id],
  };
}
