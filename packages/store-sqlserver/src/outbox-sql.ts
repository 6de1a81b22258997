/**
 * The outbox statements, one function each (names as in store-postgres): insert, key locks, settle, read (the
 * claim is in outbox-claim.ts, the reclaim of expired leases in lease.ts), and the T-SQL pieces every statement
 * of the package shares. The schema name is validated and
 * quoted by `quoteSchema`; every value is a parameter. Bulk statements take one JSON array parameter and read it
 * with OPENJSON, so a batch is one round trip; they answer through OUTPUT where PostgreSQL uses RETURNING.
 *
 * Layout rule: an OUTPUT clause sits alone on its line, so the T-SQL parse check (test/sql-parse.test.ts) can set
 * it aside — node-sql-parser has no OUTPUT clause — and parse the rest.
 */
import type {
  NewOutboxMessage,
  OutboxDeadItem,
  OutboxReleaseItem,
  OutboxRetryItem,
  OutboxSentItem,
  RowClaim,
  RowId,
} from '@queuebox/core';
import { StoreError, storableErrorText } from '@queuebox/core';
import mssql from 'mssql';
import type { SqlParam, Statement } from './executor.ts';
import { checkedKeyLockTimeoutMs } from './key-lock-timeout.ts';
import { outboxKeyLockResource } from './outbox-key-lock.ts';
import { OUTBOX_COLUMNS } from './rows.ts';
import { outboxTable, quoteSchema } from './schema-name.ts';

/**
 * The database clock as the DATETIME2(3) columns hold it. Storing SYSUTCDATETIME() (7 digits) in DATETIME2(3)
 * rounds to the nearest millisecond, possibly up; comparing a stored time with the clock rounded the same way
 * keeps a row inserted and claimed within the same millisecond due, because rounding keeps order.
 */
export const UTC_NOW = 'CAST(SYSUTCDATETIME() AS DATETIME2(3))';

/**
 * The hints of every read that takes the rows it chooses (claims, reclaims, requeue, purge): U locks on single
 * rows, skipping rows another session holds instead of waiting. READCOMMITTEDLOCK because the table-hints page
 * says READPAST cannot be used under READ_COMMITTED_SNAPSHOT at READ COMMITTED unless it is there; UPDLOCK
 * already makes that read a locking one (NServiceBus's SQL transport runs `UPDLOCK, READPAST, ROWLOCK` on
 * Azure SQL, where RCSI is on), so with or without RCSI the read is the same and the store works either way.
 */
export const TAKE = 'UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK';

/** Binary collation of topic, key, source and idempotency_key (migration 0003). */
export const BINARY = 'Latin1_General_100_BIN2';

/**
 * How long a claim, reclaim, requeue or purge waits for a row lock before SQL Server gives up with error 1222,
 * which the store reads as "nothing to take now". Reads of key heads take no READPAST (skipping a locked head
 * would break per-key order), so without READ_COMMITTED_SNAPSHOT they wait behind an application transaction
 * that inserted a keyed row and has not committed yet; this bounds that wait.
 */
export const TAKE_LOCK_TIMEOUT_MS = 1000;

/**
 * The first lines of every batch that reads with {@link TAKE}: READPAST needs READ COMMITTED or REPEATABLE READ,
 * and a pooled connection keeps whatever isolation level its last user set (a caller's pool may be at SNAPSHOT or
 * SERIALIZABLE), so the batch pins READ COMMITTED; and it bounds lock waits ({@link TAKE_LOCK_TIMEOUT_MS}).
 * mssql sends every statement as an RPC call of sp_executesql (test/executor.test.ts), and SQL Server restores a
 * SET made inside it when the call returns, so neither setting outlives the batch; {@link TAKE_END} puts the lock
 * timeout back (none) for whoever runs the text as a plain batch, where a SET lasts for the session.
 */
export const TAKE_BEGIN = `SET TRANSACTION ISOLATION LEVEL READ COMMITTED;\nSET LOCK_TIMEOUT ${TAKE_LOCK_TIMEOUT_MS};\n`;

/** The last line of a batch that began with {@link TAKE_BEGIN}. */
export const TAKE_END = '\nSET LOCK_TIMEOUT -1;';

/**
 * Most rows one statement writes or locks. SQL Server tries to escalate to a table lock once one statement holds
 * 5,000 locks on one reference of a table (see "Lock escalation" in Microsoft's transaction locking guide); a
 * table lock would then be held until the writer commits — for enqueue, until the application does.
 */
export const MAX_ROWS_PER_STATEMENT = 4000;

/** Longest delay or lease the statements accept (about 68 years): DATEADD takes an INT number of seconds. */
export const MAX_DELAY_MS = 2_147_483_647_000;

/** A delay in whole milliseconds within [0, {@link MAX_DELAY_MS}]. */
export function clampDelayMs(ms: number): number {
  if (!Number.isFinite(ms) || ms <= 0) return ms === Number.POSITIVE_INFINITY ? MAX_DELAY_MS : 0;
  return Math.min(Math.round(ms), MAX_DELAY_MS);
}

/**
 * `SYSUTCDATETIME()` plus `ms` milliseconds (a BIGINT expression), split into seconds and milliseconds because
 * DATEADD's number is an INT, which holds only 24.8 days of milliseconds.
 */
export function utcNowPlus(ms: string): string {
  return `DATEADD(millisecond, ${ms} % 1000, DATEADD(second, ${ms} / 1000, SYSUTCDATETIME()))`;
}

/** A JSON array parameter (NVARCHAR(MAX)), read back with OPENJSON. */
export function jsonParam(items: readonly unknown[]): SqlParam {
  return { type: mssql.NVarChar(mssql.MAX), value: JSON.stringify(items) };
}

/** OPENJSON columns of a claim: every settle is fenced by the id and the claim token. */
export const CLAIM_COLUMNS = "id BIGINT '$.id', claim_token UNIQUEIDENTIFIER '$.claimToken'";

/** A claim as the settle statements read it from `@items`. */
export function claimJson(item: RowClaim): { id: RowId; claimToken: string } {
  return { id: item.id, claimToken: item.claimToken };
}

/**
 * Outbox rows as `@messages` carries them. Payload and headers travel as JSON text inside the JSON, so a scalar
 * payload stays what it was; OPENJSON reads every text as NVARCHAR(MAX), so an over-long topic or key fails the
 * insert (error 2628) instead of being cut short by OPENJSON.
 */
export function outboxMessagesJson(messages: readonly NewOutboxMessage[]): SqlParam {
  return jsonParam(
    messages.map((m) => ({
      topic: m.topic,
      key: m.key ?? null,
      payload: JSON.stringify(m.payload) ?? null,
      headers: JSON.stringify(m.headers ?? {}),
      maxAttempts: m.maxAttempts,
      delayMs: clampDelayMs(m.delayMs ?? 0),
    })),
  );
}

/**
 * Inserts rows in state pending, in the order given. Identity values follow the ORDER BY of an INSERT … SELECT,
 * so the ids, sorted, come back in that order (OUTPUT itself promises no order).
 */
export function insertOutboxStatement(schema: string, messages: readonly NewOutboxMessage[]): Statement {
  return {
    text: `INSERT INTO ${outboxTable(schema)} (topic, [key], payload, headers, max_attempts, scheduled_at)
OUTPUT inserted.id
SELECT m.topic, m.[key], m.payload, m.headers, m.max_attempts, ${utcNowPlus('m.delay_ms')}
FROM OPENJSON(@messages) AS j
CROSS APPLY OPENJSON(j.value) WITH (topic NVARCHAR(MAX) '$.topic', [key] NVARCHAR(MAX) '$.key', payload NVARCHAR(MAX) '$.payload', headers NVARCHAR(MAX) '$.headers', max_attempts INT '$.maxAttempts', delay_ms BIGINT '$.delayMs') AS m
ORDER BY CAST(j.[key] AS INT);`,
    values: { messages: outboxMessagesJson(messages) },
  };
}

/** Most keys one {@link lockOutboxKeysStatement} locks (SQL Server takes at most 2,100 parameters per request). */
export const LOCKS_PER_BATCH = 500;

/**
 * How long one `sp_getapplock` of a key lock waits for another writer of the key, in milliseconds. Without
 * `@LockTimeout` it would wait for the session's LOCK_TIMEOUT (default: forever) and the driver would give up
 * first, after its 15 s request timeout, reporting a lost request instead of a busy key.
 */
export const KEY_LOCK_TIMEOUT_MS = 10_000;

/**
 * Takes `sp_getapplock` (Exclusive, owned by the transaction, waiting at most `lockTimeoutMs` per key) on the
 * resource of each distinct key, `outboxKeyLockResource(schema, key)`, in ascending resource order (whatever
 * order `keys` has), so two writers never wait on each other in a cycle; at most {@link LOCKS_PER_BATCH} keys, a
 * `StoreError` beyond (the store runs larger sets in several batches, in one resource order). Run it in the
 * writing transaction before the insert: the locks last until that transaction ends, so a second writer of a key
 * draws its id only after the first has committed, and the ids of one key grow in commit order — the order the
 * claim delivers.
 *
 * Answers `status`: 0 or 1 when every lock was granted, else the first failure (-1 timeout, -2 cancelled, -3
 * deadlock victim, -999 error, e.g. no open transaction), after which no further lock is requested.
 */
export function lockOutboxKeysStatement(
  schema: string,
  keys: readonly string[],
  lockTimeoutMs: number = KEY_LOCK_TIMEOUT_MS,
): Statement {
  quoteSchema(schema);
  const resources = [...new Set(keys.map((key) => outboxKeyLockResource(schema, key)))].sort();
  if (resources.length > LOCKS_PER_BATCH) {
    throw new StoreError(`One lock batch takes at most ${LOCKS_PER_BATCH} outbox keys`, {
      context: { keys: resources.length },
    });
  }
  const values: Record<string, SqlParam> = {
    lockTimeoutMs: { type: mssql.Int, value: checkedKeyLockTimeoutMs(lockTimeoutMs) },
  };
  const lines = resources.map((resource, i) => {
    values[`resource${i}`] = { type: mssql.NVarChar(255), value: resource };
    return `IF @status >= 0 EXEC @status = sys.sp_getapplock @Resource = @resource${i}, @LockMode = N'Exclusive', @LockOwner = N'Transaction', @LockTimeout = @lockTimeoutMs;`;
  });
  return { text: `DECLARE @status INT = 0;\n${lines.join('\n')}\nSELECT @status AS status;`, values };
}

/** The claim size a statement takes: a whole number within [0, {@link MAX_ROWS_PER_STATEMENT}]. */
export function statementRows(n: number): number {
  return Math.max(0, Math.min(Math.floor(Number(n) || 0), MAX_ROWS_PER_STATEMENT));
}

/** processing → sent, for the items whose token still matches. */
export function markOutboxSentStatement(schema: string, items: readonly OutboxSentItem[]): Statement {
  return {
    text: `UPDATE o
SET state = N'sent', sent_at = SYSUTCDATETIME(), updated_at = SYSUTCDATETIME(), destination = i.destination,
  claim_token = NULL, lease_until = NULL
OUTPUT inserted.id, inserted.state
FROM ${outboxTable(schema)} AS o WITH (FORCESEEK)
INNER JOIN OPENJSON(@items) WITH (${CLAIM_COLUMNS}, destination NVARCHAR(MAX) '$.destination') AS i
  ON i.id = o.id AND i.claim_token = o.claim_token
WHERE o.state = N'processing';`,
    values: { items: jsonParam(items.map((i) => ({ ...claimJson(i), destination: i.destination }))) },
  };
}

/**
 * Counts an attempt; processing → pending at now + delay, or → dead when the attempt was the last
 * (attempt + 1 >= max_attempts). The error is kept in last_error either way.
 */
export function retryOutboxStatement(schema: string, items: readonly OutboxRetryItem[]): Statement {
  return {
    text: `UPDATE o
SET attempt = o.attempt + 1,
  state = CASE WHEN o.attempt + 1 >= o.max_attempts THEN N'dead' ELSE N'pending' END,
  scheduled_at = CASE WHEN o.attempt + 1 >= o.max_attempts THEN o.scheduled_at ELSE ${utcNowPlus('i.delay_ms')} END,
  last_error = i.error, destination = COALESCE(i.destination, o.destination),
  claim_token = NULL, lease_until = NULL, updated_at = SYSUTCDATETIME()
OUTPUT inserted.id, inserted.state
FROM ${outboxTable(schema)} AS o WITH (FORCESEEK)
INNER JOIN OPENJSON(@items) WITH (${CLAIM_COLUMNS}, error NVARCHAR(MAX) '$.error', delay_ms BIGINT '$.delayMs', destination NVARCHAR(MAX) '$.destination') AS i
  ON i.id = o.id AND i.claim_token = o.claim_token
WHERE o.state = N'processing';`,
    values: {
      items: jsonParam(
        items.map((i) => ({
          ...claimJson(i),
          error: storableErrorText(i.error),
          delayMs: clampDelayMs(i.delayMs),
          destination: i.destination ?? null,
        })),
      ),
    },
  };
}

/**
 * processing → dead with the reason; counts an attempt only when one was made, and lowers max_attempts to an item's
 * `maxAttempts` (a destination's) when that is lower.
 */
export function markOutboxDeadStatement(schema: string, items: readonly OutboxDeadItem[]): Statement {
  return {
    text: `UPDATE o
SET state = N'dead', attempt = o.attempt + CASE WHEN i.attempted = 1 THEN 1 ELSE 0 END,
  max_attempts = CASE WHEN i.max_attempts IS NOT NULL AND i.max_attempts < o.max_attempts THEN i.max_attempts ELSE o.max_attempts END,
  last_error = i.reason, destination = COALESCE(i.destination, o.destination),
  claim_token = NULL, lease_until = NULL, updated_at = SYSUTCDATETIME()
OUTPUT inserted.id, inserted.state
FROM ${outboxTable(schema)} AS o WITH (FORCESEEK)
INNER JOIN OPENJSON(@items) WITH (${CLAIM_COLUMNS}, reason NVARCHAR(MAX) '$.reason', destination NVARCHAR(MAX) '$.destination', attempted BIT '$.attempted', max_attempts INT '$.maxAttempts') AS i
  ON i.id = o.id AND i.claim_token = o.claim_token
WHERE o.state = N'processing';`,
    values: {
      items: jsonParam(
        items.map((i) => ({
          ...claimJson(i),
          reason: storableErrorText(i.reason),
          destination: i.destination ?? null,
          attempted: i.attempted === true,
          maxAttempts: Number.isInteger(i.maxAttempts) ? i.maxAttempts : null,
        })),
      ),
    },
  };
}

/**
 * processing → pending without counting an attempt, due again `delayMs` from now (default 0; as store-postgres's,
 * which says why).
 */
export function releaseOutboxStatement(schema: string, items: readonly OutboxReleaseItem[]): Statement {
  return {
    text: `UPDATE o
SET state = N'pending', claim_token = NULL, lease_until = NULL,
  scheduled_at = ${utcNowPlus('i.delay_ms')}, updated_at = SYSUTCDATETIME()
OUTPUT inserted.id, inserted.state
FROM ${outboxTable(schema)} AS o WITH (FORCESEEK)
INNER JOIN OPENJSON(@items) WITH (${CLAIM_COLUMNS}, delay_ms BIGINT '$.delayMs') AS i
  ON i.id = o.id AND i.claim_token = o.claim_token
WHERE o.state = N'processing';`,
    values: {
      items: jsonParam(items.map((i) => ({ ...claimJson(i), delayMs: clampDelayMs(i.delayMs ?? 0) }))),
    },
  };
}

/** One row by id. */
export function getOutboxStatement(schema: string, id: RowId): Statement {
  return {
    text: `SELECT ${OUTBOX_COLUMNS} FROM ${outboxTable(schema)} WHERE id = @id;`,
    values: { id: { type: mssql.BigInt, value: id } },
  };
}
