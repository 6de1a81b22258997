/**
 * The name of the per-key outbox lock on SQL Server. Every writer of keyed outbox rows takes it (this store's
 * insert and forward, @queuebox/client's enqueue, plain SQL of an application), so it is part of the public
 * contract. Driver-free — importing it loads no mssql — so @queuebox/client re-exports it from
 * `@queuebox/store-sqlserver/outbox-key-lock` without loading a driver.
 */
import { createHash } from 'node:crypto';

/**
 * The `sp_getapplock` resource of `key` in `schema`:
 * `queuebox.outbox-key:<schema>:<sha-256 of the key's UTF-8, lower-case hex>`. A key may be 450 characters and a
 * resource at most 255, hence the hash.
 */
export function outboxKeyLockResource(schema: string, key: string): string {
  return `queuebox.outbox-key:${schema}:${createHash('sha256').update(key, 'utf8').digest('hex')}`;
}
