/**
 * The names of the per-key outbox locks and of the wake-up channel. Anything else that writes keyed outbox rows
 * (plain SQL of the application) keeps the per-key order only if it takes the same lock, so the names are part
 * of the public contract. The lock names are the stores' own (the stores' insert and the relay's forward take
 * the same locks), from their driver-free modules: importing them loads neither pg nor mssql.
 */
export { outboxKeyLockName } from '@queuebox/store-postgres/outbox-key-lock';
// The channel that `notifyOutbox` notifies (payload: the schema name); the outbox wake-up listens on it. The
// insert triggers notify only while a listener holds the channel's wake-up lock (`wakeUpLockName`, migration 0011).
export { OUTBOX_CHANNEL, wakeUpLockName } from '@queuebox/store-postgres/wake-up-channels';
export { outboxKeyLockResource } from '@queuebox/store-sqlserver/outbox-key-lock';
