/**
 * The inbox statements, one function each (names as in store-postgres): settle, read (the store with its dedupe
 * is in inbox-dedupe.ts, the claim in inbox-claim.ts, the reclaim of expired leases in lease.ts). The schema name is validated and
 * quoted by `quoteSchema`; every value is a parameter; bulk statements read one JSON array parameter with
 * OPENJSON. As in outbox-sql.ts, an OUTPUT clause sits alone on its line.
 */
import {
  type ForwardItem,
  type InboxDeadItem,
  type InboxRetryItem,
  type RowClaim,
  type RowId,
  storableErrorText,
} from '@queuebox/core';
import mssql from 'mssql';
import type { Statement } from './executor.ts';
import { CLAIM_COLUMNS, claimJson, clampDelayMs, jsonParam, utcNowPlus } from './outbox-sql.ts';
import { INBOX_COLUMNS } from './rows.ts';
import { inboxTable, outboxTable } from './schema-name.ts';

/**
 * processing → processed, for the items whose token still matches. The relay's forward runs it and
 * `insertOutboxStatement` for exactly the rows it changed in one transaction (see inbox-store.ts).
 */
export function markInboxProcessedStatement(schema: string, items: readonly RowClaim[]): Statement {
  return {
    text: `UPDATE b
SET state = N'processed', processed_at = SYSUTCDATETIME(), updated_at = SYSUTCDATETIME(), claim_token = NULL, lease_until = NULL
OUTPUT inserted.id, inserted.state
FROM ${inboxTable(schema)} AS b WITH (FORCESEEK)
INNER JOIN OPENJSON(@items) WITH (${CLAIM_COLUMNS}) AS i
  ON i.id = b.id AND i.claim_token = b.claim_token
WHERE b.state = N'processing';`,
    values: { items: jsonParam(items.map(claimJson)) },
  };
}

/**
 * The outbox rows of the relay's forward, in the order of the items: run in the forward's transaction after
 * `markInboxProcessedStatement`, for exactly the items it marked processed. An item without a payload (JSON null in
 * `@messages`, from `undefined`; a JSON `null` payload travels as the text `null`) gets the stored payload of its
 * inbox row, read here, so the relay never receives nor sends it. Ids come back as `insertOutboxStatement`'s do.
 */
export function forwardOutboxStatement(schema: string, items: readonly ForwardItem[]): Statement {
  return {
    text: `INSERT INTO ${outboxTable(schema)} (topic, [key], payload, headers, max_attempts, scheduled_at)
OUTPUT inserted.id
SELECT m.topic, m.[key], COALESCE(m.payload, b.payload), m.headers, m.max_attempts, ${utcNowPlus('m.delay_ms')}
FROM OPENJSON(@messages) AS j
CROSS APPLY OPENJSON(j.value) WITH (inbox_id BIGINT '$.inboxId', topic NVARCHAR(MAX) '$.topic', [key] NVARCHAR(MAX) '$.key', payload NVARCHAR(MAX) '$.payload', headers NVARCHAR(MAX) '$.headers', max_attempts INT '$.maxAttempts', delay_ms BIGINT '$.delayMs') AS m
INNER JOIN ${inboxTable(schema)} AS b ON b.id = m.inbox_id
ORDER BY CAST(j.[key] AS INT);`,
    values: {
      messages: jsonParam(
        items.map(({ id, outbox: m }) => ({
          inboxId: id,
          topic: m.topic,
          key: m.key ?? null,
          payload: m.payload === undefined ? null : JSON.stringify(m.payload),
          headers: JSON.stringify(m.headers ?? {}),
          maxAttempts: m.maxAttempts,
          delayMs: clampDelayMs(m.delayMs ?? 0),
        })),
      ),
    },
  };
}

/** Counts an attempt; processing → pending at now + delay with the error in last_error. */
export function retryInboxStatement(schema: string, items: readonly InboxRetryItem[]): Statement {
  return {
    text: `UPDATE b
SET state = N'pending', attempt = b.attempt + 1, scheduled_at = ${utcNowPlus('i.delay_ms')},
  last_error = i.error, claim_token = NULL, lease_until = NULL, updated_at = SYSUTCDATETIME()
OUTPUT inserted.id, inserted.state
FROM ${inboxTable(schema)} AS b WITH (FORCESEEK)
INNER JOIN OPENJSON(@items) WITH (${CLAIM_COLUMNS}, error NVARCHAR(MAX) '$.error', delay_ms BIGINT '$.delayMs') AS i
  ON i.id = b.id AND i.claim_token = b.claim_token
WHERE b.state = N'processing';`,
    values: {
      items: jsonParam(
        items.map((i) => ({
          ...claimJson(i),
          error: storableErrorText(i.error),
          delayMs: clampDelayMs(i.delayMs),
        })),
      ),
    },
  };
}

/** processing → dead with the reason in last_error, counting one attempt for an item `attempted`. */
export function markInboxDeadStatement(schema: string, items: readonly InboxDeadItem[]): Statement {
  return {
    text: `UPDATE b
SET state = N'dead', attempt = b.attempt + CASE WHEN i.attempted = 1 THEN 1 ELSE 0 END, last_error = i.reason,
  claim_token = NULL, lease_until = NULL, updated_at = SYSUTCDATETIME()
OUTPUT inserted.id, inserted.state
FROM ${inboxTable(schema)} AS b WITH (FORCESEEK)
INNER JOIN OPENJSON(@items) WITH (${CLAIM_COLUMNS}, reason NVARCHAR(MAX) '$.reason', attempted BIT '$.attempted') AS i
  ON i.id = b.id AND i.claim_token = b.claim_token
WHERE b.state = N'processing';`,
    values: {
      items: jsonParam(
        items.map((i) => ({
          ...claimJson(i),
          reason: storableErrorText(i.reason),
          // Left out when false: OPENJSON reads a missing $.attempted as NULL, which counts nothing.
          ...(i.attempted === true ? { attempted: true } : {}),
        })),
      ),
    },
  };
}

/** One row by id. */
export function getInboxStatement(schema: string, id: RowId): Statement {
  return {
    text: `SELECT ${INBOX_COLUMNS} FROM ${inboxTable(schema)} WHERE id = @id;`,
    values: { id: { type: mssql.BigInt, value: id } },
  };
}
