/**
 * The name of the per-key outbox lock on SQL Server. Every writer of keyed outbox rows takes it (this store's
 * insert and forward, @queuebox/client's enqueue, plain SQL of an application), so it is part of the public
 * contract. Driver-free — importing it loads no mssql — so @queuebox/client re-exports it from
 * `@queuebox/store-sqlserver/outbox-key-lock` without loading a driver.
 */
import { createHash } from 'node:crypto';

/**
 * The `sp_getapplock` resource of `key` in `schema`:
 * `queuebox.outbox-key:<schema in lower case>:<SHA-256 of the key's UTF-8 bytes, 64 lower-case hex digits>`.
 * A key may be 450 characters and a resource at most 255, hence the hash.
 *
 * The schema is lower-cased because SQL Server compares `@Resource` binary while it resolves schema names through
 * the database's collation, usually case-insensitive: `QueueBox` and `queuebox` name the same table, and must name
 * the same lock. (Schema names are ASCII identifiers, `^[A-Za-z_][A-Za-z0-9_]{0,62}$`, so lower-casing is exact.)
 * The key is hashed as UTF-8, not as NVARCHAR's UTF-16LE: T-SQL gets the same bytes from SQL Server 2019 on with
 * `CAST(@key COLLATE Latin1_General_100_BIN2_UTF8 AS varchar(8000))` (@queuebox/client's README, "The SQL Server
 * lock name, exactly", has the whole T-SQL and fixed vectors).
 */
export function outboxKeyLockResource(schema: string, key: string): string {
  return `queuebox.outbox-key:${schema.toLowerCase()}:${createHash('sha256').update(key, 'utf8').digest('hex')}`;
}
