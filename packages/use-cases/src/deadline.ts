/** Default time a tick keeps between the end of its drain and the end of its invocation: 3000 ms. */
export const DEFAULT_SAFETY_MARGIN_MS = 3000;

/**
 * The deadline of one drain in a function invocation: now + the invocation's remaining time − `safetyMarginMs`
 * (default 3000 ms), never before now. A deadline at now makes a drain claim nothing. Pure.
 */
export function drainDeadline(
  remainingMs: number,
  now: number,
  safetyMarginMs: number = DEFAULT_SAFETY_MARGIN_MS,
): number {
  return now + Math.max(0, remainingMs - safetyMarginMs);
}
