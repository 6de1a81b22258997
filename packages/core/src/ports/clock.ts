/** Time, injectable for tests. Claims and leases use the database clock, not this one. */
export interface Clock {
  now(): number;
}

/** The machine's clock. */
export const systemClock: Clock = { now: () => Date.now() };
