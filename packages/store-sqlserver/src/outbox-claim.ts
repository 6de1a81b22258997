/**
 * The outbox claim: the statement that moves due rows pending → processing under a lease, keeping per-key order
 * (`claimOutboxStatement`), and the store's claim that runs it (`createOutboxClaim`). As in outbox-sql.ts, an
 * OUTPUT clause sits alone on its line.
 */
import type { ClaimOptions, OutboxRow } from '@queuebox/core';
import mssql from 'mssql';
import type { SqlExecutor, Statement } from './executor.ts';
import { deferredPayloadColumns, inlinePayloadBytes, readingDeferredPayloads } from './large-columns.ts';
import {
  clampDelayMs,
  markOutboxDeadStatement,
  statementRows,
  TAKE,
  TAKE_BEGIN,
  TAKE_END,
  UTC_NOW,
  utcNowPlus,
} from './outbox-sql.ts';
import { OUTBOX_COLUMNS, qualified, toOutboxRow } from './rows.ts';
import { outboxTable } from './schema-name.ts';
import { claimRows } from './settle.ts';

/** Parameters of `claimOutboxStatement`. */
export interface OutboxClaimParameters {
  /** Most rows to claim; at most {@link MAX_ROWS_PER_STATEMENT} are taken. */
  readonly batchSize: number;
  readonly leaseMs: number;
  /**
   * Payloads of more than this many UTF-16 code units are answered NULL with their size (`deferredPayloadColumns`).
   * Default: every payload answered.
   */
  readonly deferBytes?: number;
}

/**
 * What a caller adds to core's `ClaimOptions` to have payloads over `deferPayloadsOverBytes` left out of the claim's
 * answer, as on store-postgres: each such row carries its payload's size (UTF-16 code units, see large-columns.ts)
 * under `DEFERRED_PAYLOAD`, and the caller reads it (`get`) when it needs it. `@queuebox/outbox`'s poller sets it to
 * `DEFERRED_PAYLOAD_BYTES` (64 KiB).
 */
export interface DeferredPayloadClaimOptions {
  readonly deferPayloadsOverBytes?: number;
}

/**
 * The claim (docs/design.md §5 Ordering). One batch: a new token from NEWID(), then one UPDATE.
 *
 * - Unkeyed candidates: due pending rows without a key, oldest first (index outbox_due_unkeyed), read with
 *   {@link TAKE}: concurrent claims take disjoint rows and skip what another holds instead of waiting.
 * - Keyed candidates: the head of each key — the smallest id among the key's pending and processing rows, read
 *   with MIN … GROUP BY key and its length (trailing spaces count, see migration 0003) from index
 *   outbox_active_key — when that head is pending and due. A processing or retrying head holds its key back, and
 *   rows behind a head are never candidates. The heads are read without lock hints on purpose: READPAST there
 *   would skip a head that another claim has locked, promote the next row of its key and break the order; and
 *   the oldest `batchSize` are picked before anything is locked. The TOP of that derived table is the fence:
 *   only those rows are then read again by primary key with {@link TAKE}, re-checking state and due time on the
 *   locked row. (Locking while picking would U-lock every due head before the sort, leaving concurrent claimers
 *   no keyed rows, and 5,000 heads would try to escalate to a table lock.)
 * - The oldest `batchSize` of both go processing with the token and a lease on the database clock; the UPDATE
 *   finds each row by primary-key seek and re-checks `state = 'pending'` and the due time, as PostgreSQL
 *   re-evaluates its WHERE on the locked row, and, for a keyed row, that it is still its key's head: read with
 *   READCOMMITTEDLOCK (the committed rows, waiting for one being written), no earlier row of its key is pending or
 *   processing. The heads were picked before anything was locked (under READ_COMMITTED_SNAPSHOT from the
 *   statement's snapshot), so an operator's requeue of a dead earlier row that committed in between would
 *   otherwise let this claim take the next row while the requeued one is pending again: two rows of one key in
 *   flight, the later first (found on PostgreSQL, where the requeue now writes the head it locks).
 * - With `deferBytes`, a payload of more than that many UTF-16 code units is answered NULL with its size
 *   (`deferredPayloadColumns`, large-columns.ts), as store-postgres's claim leaves it out; the poller reads it with
 *   `get` just before its delivery.
 *
 * Unlike store-postgres, which walks the distinct keys with a recursive loose index scan from a rotating start
 * key, the head read here visits every active keyed row of the index: it is simple and order-safe, and costs a
 * scan proportional to the pending and processing keyed rows (see README.md).
 */
export function claimOutboxStatement(schema: string, p: OutboxClaimParameters): Statement {
  const t = outboxTable(schema);
  return {
    text: `${TAKE_BEGIN}DECLARE @claimToken UNIQUEIDENTIFIER = NEWID();
WITH due AS (
  SELECT TOP (@batchSize) c.id
  FROM (
    SELECT u.id, u.scheduled_at
    FROM (
      SELECT TOP (@batchSize) o.id, o.scheduled_at
      FROM ${t} AS o WITH (${TAKE})
      WHERE o.state = N'pending' AND o.[key] IS NULL AND o.scheduled_at <= ${UTC_NOW}
      ORDER BY o.scheduled_at, o.id
    ) AS u
    UNION ALL
    SELECT l.id, l.scheduled_at
    FROM (
      SELECT TOP (@batchSize) h.id
      FROM (
        SELECT MIN(a.id) AS id
        FROM ${t} AS a
        WHERE a.state IN (N'pending', N'processing') AND a.[key] IS NOT NULL
        GROUP BY a.[key], DATALENGTH(a.[key])
      ) AS head
      INNER JOIN ${t} AS h ON h.id = head.id
      WHERE h.state = N'pending' AND h.scheduled_at <= ${UTC_NOW}
      ORDER BY h.scheduled_at, h.id
    ) AS k
    INNER JOIN ${t} AS l WITH (${TAKE}, FORCESEEK) ON l.id = k.id
    WHERE l.state = N'pending' AND l.scheduled_at <= ${UTC_NOW}
  ) AS c
  ORDER BY c.scheduled_at, c.id
)
UPDATE o
SET state = N'processing', claim_token = @claimToken, lease_until = ${utcNowPlus('@leaseMs')}, updated_at = SYSUTCDATETIME()
OUTPUT ${p.deferBytes === undefined ? qualified(OUTBOX_COLUMNS, 'inserted') : deferredPayloadColumns(OUTBOX_COLUMNS, 'inserted')}
FROM ${t} AS o WITH (FORCESEEK)
INNER JOIN due ON due.id = o.id
WHERE o.state = N'pending' AND o.scheduled_at <= ${UTC_NOW}
  AND (o.[key] IS NULL OR NOT EXISTS (
    SELECT 1 FROM ${t} AS e WITH (ROWLOCK, READCOMMITTEDLOCK)
    WHERE e.[key] = o.[key] AND DATALENGTH(e.[key]) = DATALENGTH(o.[key]) AND e.id < o.id
      AND e.state IN (N'pending', N'processing') AND e.[key] IS NOT NULL
  ));${TAKE_END}`,
    values: {
      batchSize: { type: mssql.Int, value: statementRows(p.batchSize) },
      leaseMs: { type: mssql.BigInt, value: clampDelayMs(p.leaseMs) },
      ...(p.deferBytes === undefined
        ? {}
        : { inlinePayloadBytes: { type: mssql.BigInt, value: inlinePayloadBytes(p.deferBytes) } }),
    },
  };
}

/** What {@link createOutboxClaim} needs. */
export interface OutboxClaimOptions {
  readonly executor: SqlExecutor;
  /** A schema name already checked by `quoteSchema` (the statements check it again). */
  readonly schema: string;
}

/**
 * The outbox store's `claim`: one batch; error 1222 (a lock wait past TAKE_LOCK_TIMEOUT_MS) answers that nothing
 * is claimable now, and a claimed row that cannot be read goes dead alone (see `claimRows`). When the caller asks
 * (`deferPayloadsOverBytes`, a positive integer), payloads over that many UTF-16 code units come back `null`, the
 * row marked with their size (`DEFERRED_PAYLOAD`), for the caller to read with `get` just before it needs them.
 */
export function createOutboxClaim(
  options: OutboxClaimOptions,
): (claim: ClaimOptions) => Promise<OutboxRow[]> {
  const { executor, schema } = options;
  const toRow = readingDeferredPayloads(toOutboxRow);
  return async (claim: ClaimOptions & DeferredPayloadClaimOptions) => {
    const { batchSize, leaseMs } = claim;
    const n = Math.floor(batchSize);
    if (!(n > 0)) return [];
    const deferOver = claim.deferPayloadsOverBytes;
    const deferBytes =
      deferOver !== undefined && Number.isSafeInteger(deferOver) && deferOver > 0
        ? { deferBytes: deferOver }
        : {};
    return claimRows(
      executor,
      claimOutboxStatement(schema, { batchSize: n, leaseMs, ...deferBytes }),
      toRow,
      (unreadable) => markOutboxDeadStatement(schema, unreadable),
    );
  };
}
