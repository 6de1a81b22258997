import RequestQueue from 'kafkajs/src/network/requestQueue/index.js';

/**
 * kafkajs 2.2.4's request queue, idle, checks its pending requests every millisecond for as long as the connection
 * is open: `checkPendingRequests` ends by scheduling itself again, at `throttledUntil - now`, which is negative
 * when nothing throttles (Node runs such a timer after 1 ms, and from Node 23 on warns `TimeoutNegativeWarning`).
 * An outside audit measured 1.5% of a core per idle Kafka connection of the local runtime. With nothing pending
 * and no throttle there is nothing to check: a request that arrives schedules the check itself (`push`), and one
 * that completes sends the next pending one. kafkajs issue 1751, not fixed upstream. Installed once, by
 * `createKafkaClient`; the module is the one kafkajs itself loads (no `exports` map, the same file).
 */
export function quietIdleRequestQueues(): void {
  const proto = RequestQueue.prototype as RequestQueueInternals & { [PATCHED]?: true };
  if (proto[PATCHED]) return;
  const original = proto.scheduleCheckPendingRequests;
  proto.scheduleCheckPendingRequests = function scheduleCheckPendingRequests(this: RequestQueueInternals) {
    if (this.pending.length === 0 && this.throttledUntil <= Date.now()) return;
    original.call(this);
  };
  proto[PATCHED] = true;
}

const PATCHED = Symbol.for('queuebox.kafkajs.quietIdleRequestQueues');

/** The parts of kafkajs's `RequestQueue` the patch reads. */
export interface RequestQueueInternals {
  pending: unknown[];
  throttledUntil: number;
  throttleCheckTimeoutId: unknown;
  scheduleCheckPendingRequests(): void;
}
