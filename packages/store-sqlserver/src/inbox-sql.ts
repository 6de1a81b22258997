/**
 * The inbox statements, one function each (names as in store-postgres): settle, read (the store with its dedupe
 * is in inbox-dedupe.ts, the claim in inbox-claim.ts, the reclaim of expired leases in lease.ts). The schema name is validated and
 * quoted by `quoteSchema`; every value is a parameter; bulk statements read one JSON array parameter with
 * OPENJSON. As in outbox-sql.ts, an OUTPUT clause sits alone on its line.
 */
import type { InboxDeadItem, InboxRetryItem, RowClaim, RowId } from '@queuebox/core';
import mssql from 'mssql';
import type { Statement } from './executor.ts';
import { CLAIM_COLUMNS, claimJson, clampDelayMs, jsonParam, utcNowPlus } from './outbox-sql.ts';
import { INBOX_COLUMNS } from './rows.ts';
import { inboxTable } from './schema-name.ts';

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
        items.map((i) => ({ ...claimJson(i), error: i.error, delayMs: clampDelayMs(i.delayMs) })),
      ),
    },
  };
}

/** processing → dead with the reason in last_error. */
export function markInboxDeadStatement(schema: string, items: readonly InboxDeadItem[]): Statement {
  return {
    text: `UPDATE b
SET state = N'dead', last_error = i.reason, claim_token = NULL, lease_until = NULL, updated_at = SYSUTCDATETIME()
OUTPUT inserted.id, inserted.state
FROM ${inboxTable(schema)} AS b WITH (FORCESEEK)
INNER JOIN OPENJSON(@items) WITH (${CLAIM_COLUMNS}, reason NVARCHAR(MAX) '$.reason') AS i
  ON i.id = b.id AND i.claim_token = b.claim_token
WHERE b.state = N'processing';`,
    values: { items: jsonParam(items.map((i) => ({ ...claimJson(i), reason: i.reason }))) },
  };
}

/** One row by id. */
export function getInboxStatement(schema: string, id: RowId): Statement {
  return {
    text: `SELECT ${INBOX_COLUMNS} FROM ${inboxTable(schema)} WHERE id = @id;`,
    values: { id: { type: mssql.BigInt, value: id } },
  };
}
