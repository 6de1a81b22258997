/** Time, injectable for tests. Claims and leases use the database clock, not this one. */
export interface Clock {
  now(): number;
}

/** The machine's clock. */
export const systemClock: Clock = { now: () => Date.now() };

/**
 * Whether `intervalMs` has passed since `since`, by a wall clock that may step: a clock stepped back (an NTP
 * correction, a resumed VM) makes `now` earlier than `since`, and that counts as passed. Otherwise a periodic step
 * (the reclaim of expired leases) would be skipped for as long as the step was, an hour for an hour.
 */
export function intervalPassed(now: number, since: number, intervalMs: number): boolean {
  const elapsed = now - since;
  return elapsed >= intervalMs || elapsed < 0;
}
