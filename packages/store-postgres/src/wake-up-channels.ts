/**
 * The channels migration 0002's triggers notify on PostgreSQL (the payload is the schema name): the one place
 * their names are written in TypeScript. Driver-free — importing it loads neither pg nor PGlite — so
 * @queuebox/client (whose `notifyOutbox` notifies the outbox channel) and @queuebox/wake-ups (which listens on
 * both) import it from `@queuebox/store-postgres/wake-up-channels`.
 */

/** The channel an outbox insert notifies (the trigger, and `notifyOutbox` of `@queuebox/client`). */
export const OUTBOX_CHANNEL = 'queuebox_outbox';

/** The channel an inbox insert notifies (the trigger). */
export const INBOX_CHANNEL = 'queuebox_inbox';
