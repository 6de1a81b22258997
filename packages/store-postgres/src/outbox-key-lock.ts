/**
 * The name of the per-key outbox lock on PostgreSQL. Every writer of keyed outbox rows takes it (this store's
 * insert and forward, @queuebox/client's enqueue, plain SQL of an application), so it is part of the public
 * contract. Driver-free — importing it loads neither pg nor PGlite — so @queuebox/client re-exports it from
 * `@queuebox/store-postgres/outbox-key-lock` without loading a driver.
 */

/**
 * The advisory-lock name of `key` in `schema`: `queuebox.outbox-key:<schema>:<key>`. The lock is
 * `pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended(<name>, 0::bigint))`, as the migrator's
 * `queuebox.migrate:<schema>` lock.
 */
export function outboxKeyLockName(schema: string, key: string): string {
  return `queuebox.outbox-key:${schema}:${key}`;
}
