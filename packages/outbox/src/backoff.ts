import type { BackoffOptions } from './options.ts';

/** A random source in [0, 1); injectable so tests are deterministic. */
export type Random = () => number;

/** The outbox's backoff when none is configured: 1 s doubling up to 10 minutes. */
export const DEFAULT_BACKOFF: BackoffOptions = { baseMs: 1000, maxMs: 600_000 };

/**
 * The backoff of one destination: its own fields over the outbox's, field by field.
 */
export function resolveBackoff(
  outbox: BackoffOptions = DEFAULT_BACKOFF,
  destination?: Partial<BackoffOptions>,
): BackoffOptions {
  return {
    baseMs: destination?.baseMs ?? outbox.baseMs,
    maxMs: destination?.maxMs ?? outbox.maxMs,
  };
}

/**
 * The delay before the next try after failed attempt number `attempt` (1 for the first failure).
 *
 * The ceiling is min(maxMs, baseMs × 2^(attempt−1)). Jitter is *equal jitter*: half the ceiling, plus a random share
 * of the other half, so delays spread across workers yet never fall below half the ceiling, and successive
 * ceilings keep the schedule growing (full jitter could retry almost at once after many failures).
 */
export function backoffDelay(attempt: number, policy: BackoffOptions, random: Random = Math.random): number {
  const exponent = Math.max(0, Math.floor(attempt) - 1);
  // 2^exponent overflows to Infinity for huge exponents, which min() then caps.
  const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** exponent);
  const half = ceiling / 2;
  return Math.round(half + random() * half);
}

/**
 * The delay of a retry: the backoff delay, or the destination's `Retry-After` when that asks for longer, never more
 * than `maxMs`. A shorter `Retry-After` does not shorten our own schedule.
 */
export function retryDelay(input: {
  readonly attempt: number;
  readonly policy: BackoffOptions;
  readonly retryAfterMs?: number | undefined;
  readonly random?: Random;
}): number {
  const delay = backoffDelay(input.attempt, input.policy, input.random);
  const asked = input.retryAfterMs;
  if (asked === undefined || !Number.isFinite(asked) || asked <= delay) return delay;
  return Math.min(input.policy.maxMs, Math.ceil(asked));
}

/**
 * A `Retry-After` header as milliseconds from `nowMs`: delay-seconds (`120`) or an HTTP-date
 * (`Wed, 21 Oct 2026 07:28:00 GMT`, or RFC 9110's obsolete forms, asctime's read in GMT too). A date in the past gives
 * 0; a missing or unreadable value gives undefined.
 */
export function parseRetryAfter(value: string | null | undefined, nowMs: number): number | undefined {
  if (value === null || value === undefined) return undefined;
  const text = value.trim();
  if (text === '') return undefined;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // Date.parse accepts much more than HTTP-dates; requiring a letter avoids reading "1.5" or "-3" as a date.
  if (!/[a-z]/i.test(text)) return undefined;
  // Every HTTP-date is in GMT; asctime's form (`Sun Nov  6 08:49:37 1994`) does not say so, and Date.parse would read
  // it in the process's time zone.
  const zoned = /\b(GMT|UTC?|Z)\b|[+-]\d{4}\b/i.test(text) ? text : `${text} GMT`;
  const at = Date.parse(zoned);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}
