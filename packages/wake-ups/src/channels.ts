import { INBOX_CHANNEL, OUTBOX_CHANNEL, wakeUpLockName } from '@queuebox/store-postgres/wake-up-channels';

/**
 * The channels migration 0002's triggers notify, and the lock that makes them notify (0011), from store-postgres's
 * driver-free module (the client's `notifyOutbox` uses the same constant). The payload is the schema name.
 */
export { INBOX_CHANNEL, OUTBOX_CHANNEL, wakeUpLockName };

/** Which drain a channel wakes. */
export type WakeTarget = 'outbox' | 'inbox';

/** The drain a notification on `channel` wakes, or undefined for a channel QueueBox does not use. */
export function wakeTargetOf(channel: string): WakeTarget | undefined {
  if (channel === OUTBOX_CHANNEL) return 'outbox';
  if (channel === INBOX_CHANNEL) return 'inbox';
  return undefined;
}

/** What a capture calls when a notification for its schema arrives. Both default to doing nothing. */
export interface WakeCallbacks {
  /** An outbox row was inserted: wake the outbox drain. */
  readonly onOutbox?: () => void;
  /** An inbox row was inserted: wake the relay. */
  readonly onInbox?: () => void;
}

/**
 * Calls the callback of `channel` when `payload` names `schema`. Answers whether it did. A callback that throws
 * is ignored: a wake-up only cuts latency, so it must never break the listener.
 */
export function dispatchNotification(
  callbacks: WakeCallbacks,
  schema: string,
  channel: string,
  payload: string | undefined,
): boolean {
  if (payload !== schema) return false;
  const target = wakeTargetOf(channel);
  const callback =
    target === 'outbox' ? callbacks.onOutbox : target === 'inbox' ? callbacks.onInbox : undefined;
  if (callback === undefined) return false;
  try {
    callback();
  } catch {
    // The drains poll anyway; a failing wake-up costs latency, not correctness.
  }
  return true;
}

/** Calls both callbacks (after a (re)connect, when notifications of the gap may have been missed). */
export function wakeBoth(callbacks: WakeCallbacks): void {
  for (const callback of [callbacks.onOutbox, callbacks.onInbox]) {
    try {
      callback?.();
    } catch {
      // As in dispatchNotification.
    }
  }
}
