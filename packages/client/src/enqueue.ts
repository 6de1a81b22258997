import { ConfigError, type RowId, SCHEMA_NAME_PATTERN, SCHEMA_NAME_RULE } from '@queuebox/core';
import { checkedKeyLockTimeoutMs } from '@queuebox/store-sqlserver/key-lock-timeout';
import type mssql from 'mssql';
import { TransactionRequiredError } from './errors.ts';
import { type EnqueueMessage, toOutboxMessages } from './message.ts';
import type { SqlQueryable } from './queryable.ts';
import { detectTransaction, type EnqueueTransaction, type PgTransactionClient } from './transaction.ts';

/** The default schema of the outbox table. */
export const DEFAULT_SCHEMA = 'queuebox';

/** What both databases accept as a schema name (as the stores check it). */
const SCHEMA_NAME = SCHEMA_NAME_PATTERN;

/** The schema of `options`, checked: a `ConfigError` on `options.schema` before anything reaches the database. */
export function schemaOf(options: { readonly schema?: string | undefined }): string {
  const schema = options.schema ?? DEFAULT_SCHEMA;
  if (typeof schema !== 'string' || !SCHEMA_NAME.test(schema)) {
    throw new ConfigError([
      {
        path: 'options.schema',
        message: `${JSON.stringify(schema)} ${SCHEMA_NAME_RULE}`,
      },
    ]);
  }
  return schema;
}

/**
 * `options.keyLockTimeoutMs` refused with a `RangeError` naming it, before anything reaches the database (on either
 * database, so a mistake shows before the application moves to SQL Server): -1 and NaN used to become 0 silently.
 */
function checkKeyLockTimeout(value: unknown): void {
  if (value !== undefined) checkedKeyLockTimeoutMs(value, 'options.keyLockTimeoutMs');
}

/** Options of `enqueue` and `enqueueMany`. */
export interface EnqueueOptions {
  /** Schema of the outbox table. Default `queuebox`; must match `^[A-Za-z_][A-Za-z0-9_]{0,62}$`. */
  readonly schema?: string | undefined;
  /** Attempts before a row goes dead, for messages that do not say. Default 10. */
  readonly maxAttempts?: number | undefined;
  /**
   * SQL Server only: how long the lock of each message key waits for another transaction writing the same key,
   * in milliseconds (`sp_getapplock @LockTimeout`): from 0 (no wait) to 2147483647, else a `RangeError` (checked on
   * PostgreSQL too). Default 10000; past it, `StoreUnavailableError`. PostgreSQL's advisory lock waits as the
   * session's `lock_timeout` says.
   */
  readonly keyLockTimeoutMs?: number | undefined;
}

/**
 * Writes `messages` into the outbox inside the application's open transaction `tx`, so they commit or roll back
 * with its business write; answers the new row ids (decimal strings) in the order given, `[]` for none. One
 * insert statement for all of them; keys are locked in one sorted order first. Everything else as `enqueue`.
 */
export async function enqueueMany(
  tx: EnqueueTransaction,
  messages: readonly EnqueueMessage[],
  options: EnqueueOptions = {},
): Promise<RowId[]> {
  if (!Array.isArray(messages)) {
    throw new TypeError('enqueueMany takes an array of messages (use enqueue for one message)');
  }
  return write(tx, messages, options, true);
}

/*
 * Each dialect is loaded on first use, so an application on one database never loads the other's driver. The
 * loaded module is kept: an `import()` per call costs more than the insert itself (measured in bench/README.md,
 * "enqueue"), and a failed load is tried again on the next call instead of being remembered.
 */
let postgresDialect: typeof import('./postgres.ts') | undefined;
let sqlServerDialect: typeof import('./sqlserver.ts') | undefined;

async function loadPostgresDialect(): Promise<typeof import('./postgres.ts')> {
  postgresDialect = await import('./postgres.ts');
  return postgresDialect;
}

async function loadSqlServerDialect(): Promise<typeof import('./sqlserver.ts')> {
  sqlServerDialect = await import('./sqlserver.ts');
  return sqlServerDialect;
}

async function write(
  tx: EnqueueTransaction,
  messages: readonly unknown[],
  options: EnqueueOptions,
  indexed: boolean,
): Promise<RowId[]> {
  const defaults = options.maxAttempts === undefined ? {} : { maxAttempts: options.maxAttempts };
  const rows = toOutboxMessages(messages, defaults, indexed);
  const schema = schemaOf(options);
  checkKeyLockTimeout(options.keyLockTimeoutMs);
  const detected = detectTransaction(tx);
  if (rows.length === 0) return [];
  if (detected.driver === 'pg') {
    const { enqueueOnPostgres } = postgresDialect ?? (await loadPostgresDialect());
    return enqueueOnPostgres(detected.client, schema, rows);
  }
  if (detected.driver === 'queryable') {
    const { enqueueOnQueryable } = postgresDialect ?? (await loadPostgresDialect());
    return enqueueOnQueryable(detected.queryable, schema, rows);
  }
  const { enqueueOnSqlServer, transactionExecutor } = sqlServerDialect ?? (await loadSqlServerDialect());
  return enqueueOnSqlServer(
    // Recognised by its shape as mssql's Transaction (detectTransaction).
    transactionExecutor(detected.transaction as unknown as mssql.Transaction),
    schema,
    rows,
    options.keyLockTimeoutMs === undefined ? {} : { keyLockTimeoutMs: options.keyLockTimeoutMs },
  );
}

/**
 * Writes one message into the outbox inside the application's open transaction `tx` — a `pg` `Client`/
 * `PoolClient` after `BEGIN`, or an mssql `Transaction` after `begin()` — and answers the new row id. The row is
 * `pending` and becomes visible to the outbox poller when the application commits; a rollback leaves no row.
 *
 * Checked before anything reaches the database: the message (`InvalidMessageError` lists every problem) and the
 * transaction (`TransactionRequiredError` for a `pg.Pool`, an mssql `ConnectionPool`, or a pg client outside a
 * transaction). Database failures are core's `StoreError` / `StoreUnavailableError`.
 *
 * Order: a message with a key first takes a lock on (schema, key) that lasts until the application's transaction
 * ends (`pg_advisory_xact_lock`, `sp_getapplock` owned by the transaction), so a second transaction enqueueing the
 * same key waits for the first to commit and rows of one key get ids in commit order — the order the outbox
 * delivers them. Only writers of the same key wait for each other; keep such transactions short.
 *
 * Defaults: schema `queuebox`, maxAttempts 10 (`options.maxAttempts`, overridden by the message's own), no key,
 * headers `{}`, delay 0.
 */
export async function enqueue(
  tx: EnqueueTransaction,
  message: EnqueueMessage,
  options: EnqueueOptions = {},
): Promise<RowId> {
  if (Array.isArray(message)) {
    throw new TypeError('enqueue takes one message; use enqueueMany for an array');
  }
  const [id] = await write(tx, [message], options, false);
  return id as RowId;
}

/**
 * Wakes the outbox poller on PostgreSQL: `pg_notify('queuebox_outbox', <schema>)` on `client`. Call it inside the
 * same transaction as `enqueue`: PostgreSQL delivers a notification only when the transaction commits (never on
 * rollback, and once per transaction however often it is called). Redundant after `enqueue` where migration 0002's
 * insert trigger is installed and a listener holds the wake-up lock (migration 0011: the trigger then sends the
 * same notification); for a schema without the trigger. It always notifies, and a notifying transaction commits
 * only after every other one, server-wide (PostgreSQL's notification lock is held across the commit's WAL flush).
 * The poller's ticks deliver the rows without any notification. Default schema `queuebox`.
 */
export async function notifyOutbox(
  client: PgTransactionClient | SqlQueryable,
  options: Pick<EnqueueOptions, 'schema'> = {},
): Promise<void> {
  if (typeof client?.query !== 'function') {
    throw new TransactionRequiredError(
      'notifyOutbox is for PostgreSQL: pass the pg client of the transaction',
    );
  }
  const { notifyOnPostgres } = postgresDialect ?? (await loadPostgresDialect());
  await notifyOnPostgres(client, schemaOf(options));
}
