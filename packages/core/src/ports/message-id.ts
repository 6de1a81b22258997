import { StoreError } from '../errors.ts';
import type { OutboxRow, RowId } from '../messages.ts';
import type { OutboxStore } from './outbox-store.ts';

/**
 * The migration that gives a schema its install id (`0005_install_id.sql` of both dialects: the one-row table
 * `install`).
 */
export const INSTALL_ID_MIGRATION = 5;

/** An install id: 32 lower-case hexadecimal digits (a random UUID without its dashes). */
const INSTALL_ID = /^[0-9a-f]{32}$/;

/** Whether `value` is an install id: 32 lower-case hexadecimal digits. */
export function isInstallId(value: unknown): value is string {
  return typeof value === 'string' && INSTALL_ID.test(value);
}

/**
 * The message id of the outbox row `rowId` of the schema whose install id is `installId`, with the row's
 * `messageUid` (migration 0009): `<installId>-<rowId>-<messageUid without dashes>`, e.g.
 * `3f0c9a4be1d84c7fa2b65d0e9c1f7a30-17-9b2e4c1d0a8f4e7b9c3d2e1f0a9b8c7d`; for a row written before 0009 (no uid)
 * `<installId>-<rowId>`, its id until then. Row ids are unique only within one schema (an identity starting at 1), and
 * only while the database never goes back in time: a point-in-time restore, a failover that lost commits or a copy
 * used as a second install reuses them. The install id is random per schema and the uid random per row, made when the
 * row is inserted, so the message id is unique across databases, schemas, schema resets, restores and copies, and the
 * same on every attempt of the row (a restored row keeps its uid). Only `0-9 a-f -`, at most 85 characters: an HTTP
 * token, an AMQP `message-id`, a JetStream `Nats-Msg-Id`, an SQS FIFO deduplication id (128) as it is.
 */
export function outboxMessageId(rowId: RowId, installId: string, messageUid?: string | null): string {
  if (messageUid === undefined || messageUid === null || messageUid === '') return `${installId}-${rowId}`;
  return `${installId}-${rowId}-${messageUid.replaceAll('-', '').toLowerCase()}`;
}

/** The row id a message id names (`outboxMessageId`'s second part, in either form), or '' for another text. */
export function rowIdOfMessageId(messageId: string): string {
  const part = messageId.split('-')[1] ?? '';
  return /^\d+$/.test(part) ? part : '';
}

/** An outbox row as the outbox of a `Store` claims it: with the message id every delivery of it carries. */
export interface ClaimedOutboxRow extends OutboxRow {
  /** `outboxMessageId(id, installId, messageUid)`: what publishers send as the message id (`OutgoingMessage.id`). */
  readonly messageId: string;
}

/** The message id a claim gave `row` (`ClaimedOutboxRow`), or undefined for a row read any other way. */
export function claimedMessageId(row: OutboxRow): string | undefined {
  const messageId = (row as Partial<ClaimedOutboxRow>).messageId;
  return typeof messageId === 'string' && messageId.length > 0 ? messageId : undefined;
}

/**
 * The error of a schema without a usable install id: migration 0005 has not run on it (or its `install` row was
 * deleted or edited). The outbox claims nothing until it is fixed.
 */
export function missingInstallIdError(schema: string, detail: string, cause?: unknown): StoreError {
  return new StoreError(
    `The QueueBox schema "${schema}" has no install id (${detail}): migration 0005 (install_id) has not run on it. ` +
      'Run the migrations before the outbox delivers: `npx queuebox migrate` (the local runtime migrates at start, ' +
      'the migrate function on each deploy), or `store.migrate()`.',
    { ...(cause === undefined ? {} : { cause }), context: { schema, migration: INSTALL_ID_MIGRATION } },
  );
}

/** The migration that gives each outbox row the random part of its message id (`0009_message_uid.sql`). */
export const MESSAGE_UID_MIGRATION = 9;

/**
 * The error of a schema whose outbox has no `message_uid` column: migration 0009 has not run on it. Every statement
 * that reads outbox rows selects the column, so the outbox claims nothing until it is migrated, as before 0005.
 */
export function missingMessageUidError(schema: string, cause?: unknown): StoreError {
  return new StoreError(
    `The QueueBox schema "${schema}" has no outbox.message_uid column: migration 0009 (message_uid) has not run on it. ` +
      'Run the migrations before the outbox delivers: `npx queuebox migrate` (the local runtime migrates at start, ' +
      'the migrate function on each deploy), or `store.migrate()`.',
    { ...(cause === undefined ? {} : { cause }), context: { schema, migration: MESSAGE_UID_MIGRATION } },
  );
}

/**
 * Whether `error` says that the schema is behind the code that the outbox needs: `missingInstallIdError` (0005) or
 * `missingMessageUidError` (0009), e.g. while a deploy has updated a function before the migrate function ran.
 */
export function isMissingInstallIdError(error: unknown): error is StoreError {
  if (!(error instanceof StoreError)) return false;
  const migration = error.context.migration;
  return migration === INSTALL_ID_MIGRATION || migration === MESSAGE_UID_MIGRATION;
}

/** The install id of the rows `SELECT id FROM install` answered, or `missingInstallIdError`. */
export function installIdOf(rows: readonly { readonly id?: unknown }[], schema: string): string {
  if (rows.length !== 1) return throwMissing(schema, `its install table holds ${rows.length} rows`);
  const id = rows[0]?.id;
  if (!isInstallId(id)) return throwMissing(schema, 'its install row holds no 32-digit lower-case hex id');
  return id;
}

function throwMissing(schema: string, detail: string): never {
  throw missingInstallIdError(schema, detail);
}

/**
 * `read` run once: its answer is kept for the life of the store; a failure is not kept (the next call reads
 * again), so an outage or a claim before the migration does not stick.
 */
export function onceInstallId(read: () => Promise<string>): () => Promise<string> {
  let kept: Promise<string> | undefined;
  return () => {
    kept ??= read().catch((error: unknown) => {
      kept = undefined;
      throw error;
    });
    return kept;
  };
}

/**
 * `outbox` whose claims answer `ClaimedOutboxRow`s: each row with its message id. The install id is read before
 * anything is claimed, so a schema without one fails the claim (`missingInstallIdError`) with no row left in
 * processing.
 */
export function withMessageIds(outbox: OutboxStore, installId: () => Promise<string>): OutboxStore {
  return {
    ...outbox,
    async claim(options) {
      const install = await installId();
      const rows = await outbox.claim(options);
      return rows.map(
        (row): ClaimedOutboxRow => ({ ...row, messageId: outboxMessageId(row.id, install, row.messageUid) }),
      );
    },
  };
}
