import type { Clock } from '@queuebox/core';
import { DEFAULT_WAKE_UP_INTERVAL_MS } from '@queuebox/wake-ups';
import { type TickEvent, triggerOf } from './lambda.ts';

/** What the drains of relay-tick and outbox-tick report: counts, ids, and why they stopped. */
interface DrainReportLike {
  readonly stoppedFor: string;
}

/**
 * Runs a tick's drain; when a wake-up started the tick and the drain ended for want of work, waits until `holdMs`
 * (the wake-ups' debounce interval, 1 s) after `startedAt`, if that is still to come, and drains once more.
 *
 * A process sends at most one wake-up per interval and drops the requests in between (`createWakeUp`): their rows
 * were stored or forwarded after the wake-up that was sent, within the interval, and before they asked. The tick
 * that wake-up started began after it was sent, so a claim that starts at `startedAt + holdMs` or later sees all of
 * them: the second drain's. It runs also when the first drain ended after that moment, since the first drain's last
 * claim may have started before it (a drain waits for its slow deliveries before it reports; an outside review). A
 * tick that drained in 100 ms and ended left them waiting for the next wake-up or the periodic safety tick (an outside
 * audit: a second webhook 400 ms after the first waited for the 6-hour tick). Not for scheduled or deferred ticks:
 * no wake-up was dropped for them. A drain stopped by its deadline or aborted is not extended, nor one whose hold
 * would end past the deadline. `afterDrain` is told each drain's report as it ends (relay-tick wakes outbox-tick
 * there, not after the hold).
 */
export async function drainCoveringWakeUps<R extends DrainReportLike>(args: {
  readonly event: TickEvent;
  readonly startedAt: number;
  readonly clock: Clock;
  /** The invocation's drain deadline (the clock's ms): no hold reaches past it. */
  readonly deadline: number;
  readonly drain: () => Promise<R>;
  readonly afterDrain?: (report: R) => Promise<unknown> | undefined;
  readonly holdMs?: number;
}): Promise<R> {
  const first = await args.drain();
  await args.afterDrain?.(first);
  if (triggerOf(args.event) !== 'wakeup' || first.stoppedFor !== 'empty') return first;
  const holdUntil = args.startedAt + (args.holdMs ?? DEFAULT_WAKE_UP_INTERVAL_MS);
  if (holdUntil >= args.deadline) return first;
  const waitMs = holdUntil - args.clock.now();
  if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
  const second = await args.drain();
  await args.afterDrain?.(second);
  return addReports(first, second);
}

/** Numbers of a report that are the longest of something, not a count: two reports keep the larger. */
const LONGEST_FIELDS: ReadonlySet<string> = new Set(['keyWaitMs']);

/**
 * Two reports of one kind as one: numbers added (the longest of {@link LONGEST_FIELDS}, e.g. the relay's
 * `keyWaitMs`, kept), lists joined, nested counts added; anything else the second's.
 */
export function addReports<R extends object>(a: R, b: R): R {
  const earlier = a as unknown as Record<string, unknown>;
  const sum: Record<string, unknown> = { ...earlier };
  for (const [name, value] of Object.entries(b)) {
    const before = earlier[name];
    if (typeof value === 'number' && typeof before === 'number') {
      sum[name] = LONGEST_FIELDS.has(name) ? Math.max(before, value) : before + value;
    } else if (Array.isArray(value) && Array.isArray(before)) sum[name] = [...before, ...value];
    else if (isRecord(value) && isRecord(before)) sum[name] = addReports(before, value);
    else sum[name] = value;
  }
  return sum as R;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
