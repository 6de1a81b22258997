/**
 * The names of the per-key outbox locks and of the wake-up channel. Anything else that writes keyed outbox rows
 * (plain SQL of the application, the relay) keeps the per-key order only if it takes the same lock, so the
 * names are part of the public contract. Driver-free: importing them loads neither pg nor mssql.
 */
import { createHash } from 'node:crypto';

/** The channel that `notifyOutbox` notifies (payload: the schema name); the outbox wake-up listens on it. */
export const OUTBOX_CHANNEL = 'queuebox_outbox';

/**
 * PostgreSQL: the advisory-lock name of `key` in `schema`, `queuebox.outbox-key:<schema>:<key>`. The lock is
 * `pg_advisory_xact_lock(hashtextextended(<name>, 0))`, as the migrator's `queuebox.migrate:<schema>` lock.
 */
export function outboxKeyLockName(schema: string, key: string): string {
  return `queuebox.outbox-key:${schema}:${key}`;
}

/**
 * SQL Server: the `sp_getapplock` resource of `key` in `schema`,
 * `queuebox.outbox-key:<schema>:<sha-256 of the key's UTF-8, lower-case hex>`. A key may be 450 characters and a
 * resource at most 255, hence the hash.
 */
export function outboxKeyLockResource(schema: string, key: string): string {
  return `queuebox.outbox-key:${schema}:${createHash('sha256').update(key, 'utf8').digest('hex')}`;
}
