import { describeValue } from '@queuebox/core';

/** Longest key-lock wait: `sp_getapplock`'s `@LockTimeout` is an INT. */
export const MAX_KEY_LOCK_TIMEOUT_MS = 2_147_483_647;

/**
 * `keyLockTimeoutMs` checked and rounded down to whole milliseconds: a number from 0 (no wait) to
 * {@link MAX_KEY_LOCK_TIMEOUT_MS}, else a `RangeError` naming it (as `name` says). (-1, which `sp_getapplock` reads as "wait
 * forever", and NaN used to become 0 silently.)
 */
export function checkedKeyLockTimeoutMs(lockTimeoutMs: unknown, name = 'keyLockTimeoutMs'): number {
  if (
    typeof lockTimeoutMs !== 'number' ||
    !(lockTimeoutMs >= 0 && lockTimeoutMs <= MAX_KEY_LOCK_TIMEOUT_MS)
  ) {
    throw new RangeError(
      `${name} must be a number of milliseconds from 0 to ${MAX_KEY_LOCK_TIMEOUT_MS} (got ${describeValue(lockTimeoutMs)})`,
    );
  }
  return Math.floor(lockTimeoutMs);
}
