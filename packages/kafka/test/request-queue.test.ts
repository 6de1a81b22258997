import RequestQueue from 'kafkajs/src/network/requestQueue/index.js';
import { afterEach, describe, expect, it } from 'vitest';
import { createKafkaClient } from '../src/client.ts';
import type { RequestQueueInternals } from '../src/request-queue.ts';

/** A request queue as kafkajs makes one per broker connection. */
function aQueue(): RequestQueueInternals & { destroy(): void } {
  const logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: () => undefined,
    error: () => undefined,
  };
  return new RequestQueue({
    maxInFlightRequests: 1,
    requestTimeout: 10_000,
    enforceRequestTimeout: true,
    clientId: 'test',
    broker: '127.0.0.1:9092',
    logger,
  }) as RequestQueueInternals & { destroy(): void };
}

describe("kafkajs's request queue, once a QueueBox Kafka client exists", () => {
  const queues: (RequestQueueInternals & { destroy(): void })[] = [];
  afterEach(() => {
    for (const queue of queues.splice(0)) queue.destroy();
  });

  it('schedules no check while nothing is pending and nothing throttles (it woke every millisecond, idle)', () => {
    // Prepare
    createKafkaClient({ brokers: ['127.0.0.1:9092'] });
    const queue = aQueue();
    queues.push(queue);

    // Act
    queue.scheduleCheckPendingRequests();

    // Assess
    expect(queue.throttleCheckTimeoutId).toBeNull();
  });

  it('still schedules the check of a pending request, and of the end of a throttle', () => {
    // Prepare
    createKafkaClient({ brokers: ['127.0.0.1:9092'] });
    const pending = aQueue();
    const throttled = aQueue();
    queues.push(pending, throttled);
    pending.pending.push({});
    throttled.throttledUntil = Date.now() + 60_000;

    // Act
    pending.scheduleCheckPendingRequests();
    throttled.scheduleCheckPendingRequests();

    const scheduled = [pending.throttleCheckTimeoutId, throttled.throttleCheckTimeoutId];
    // Before the check runs (10 ms): the pending request is no real one.
    pending.destroy();
    throttled.destroy();

    // Assess
    expect(scheduled).not.toContain(null);
  });
});
