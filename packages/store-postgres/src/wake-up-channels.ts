/**
 * The channels migration 0002's triggers notify on PostgreSQL (the payload is the schema name), and the lock a
 * listener holds so that they notify at all (migration 0011): the one place their names are written in TypeScript.
 * Driver-free — importing it loads neither pg nor PGlite — so @queuebox/client (whose `notifyOutbox` notifies the
 * outbox channel) and @queuebox/wake-ups (which listens on both) import it from
 * `@queuebox/store-postgres/wake-up-channels`.
 */

/** The channel an outbox insert notifies (the trigger, and `notifyOutbox` of `@queuebox/client`). */
export const OUTBOX_CHANNEL = 'queuebox_outbox';

/** The channel an inbox insert notifies (the trigger). */
export const INBOX_CHANNEL = 'queuebox_inbox';

/**
 * The advisory-lock name that makes the insert triggers of `schema` notify `channel`:
 * `queuebox.wake-ups:<schema>:<channel>`. A listener holds it, exclusive and session-level, while it wants the
 * notifications; while nobody holds it, an insert sends none (migration 0011: a notifying transaction commits only
 * after every other one, server-wide). Take it with `pg_catalog.pg_try_advisory_lock(pg_catalog.hashtextextended(
 * <name>, 0::bigint))` and try again while that answers false (another listener holds it, and the triggers notify
 * you too meanwhile), as the local runtime's listener does: a connection waiting in the blocking
 * `pg_advisory_lock` passes on no notification until it has the lock. An insert that finds it free keeps it shared
 * until its transaction ends (migration 0012), so a try that succeeds also says that every transaction that notified
 * nobody has ended. A session that sets `queuebox.wake_ups` to `always` notifies on every insert.
 */
export function wakeUpLockName(schema: string, channel: string): string {
  return `queuebox.wake-ups:${schema}:${channel}`;
}
