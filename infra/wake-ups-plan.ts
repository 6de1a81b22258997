import { FUNCTION_ENV, type FunctionName } from '@queuebox/deploy-contract';
import type { FunctionPlan } from './functions-plan.ts';

// Which function wakes which, and which book deferred ticks of themselves. Pure.

/** A function that may invoke another asynchronously, and the variable carrying the target's name. */
export interface WakeupPlan {
  readonly from: FunctionName;
  readonly to: FunctionName;
  readonly env: string;
}

/**
 * Asynchronous wake-ups: whatever stores push rows wakes relay-tick; relay-tick and admin-http (requeue) wake
 * outbox-tick; admin-http also wakes relay-tick (requeued inbox rows). Only between planned functions.
 */
export function planWakeups(functions: readonly FunctionPlan[]): WakeupPlan[] {
  const present = new Set(functions.map((f) => f.name));
  const edges: WakeupPlan[] = [];
  const add = (from: FunctionName, to: FunctionName, env: string) => {
    if (present.has(from) && present.has(to)) edges.push({ from, to, env });
  };
  for (const from of [
    'inbox-http',
    'kafka-source',
    'amqp-source',
    'sqs-source',
    'nats-source-tick',
    'admin-http',
  ] as const) {
    add(from, 'relay-tick', FUNCTION_ENV.relayTickFunction);
  }
  add('relay-tick', 'outbox-tick', FUNCTION_ENV.outboxTickFunction);
  add('admin-http', 'outbox-tick', FUNCTION_ENV.outboxTickFunction);
  return edges;
}

/** Functions that book one-shot EventBridge Scheduler invocations of themselves for rows scheduled later. */
export function planDeferredTicks(functions: readonly FunctionPlan[]): FunctionName[] {
  return functions
    .filter((f) => f.name === 'outbox-tick' || f.name === 'relay-tick' || f.name === 'maintenance-tick')
    .map((f) => f.name);
}
