/**
 * The channel an outbox insert notifies (migration 0002's trigger, and `notifyOutbox` of `@queuebox/client`).
 * The payload is the schema name.
 */
export const OUTBOX_CHANNEL = 'queuebox_outbox';

/** The channel an inbox insert notifies (migration 0002's trigger). The payload is the schema name. */
export const INBOX_CHANNEL = 'queuebox_inbox';

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
