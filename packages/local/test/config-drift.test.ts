/**
 * What packages/config repeats from the packages it cannot import (it depends only on core), compared with the
 * originals: a destination's longest request, which `outbox.claimTimeoutMs` must leave room for, the paths the local server
 * serves itself, which `inbox.basePath` must not hide, and the size over which a claim leaves a payload out, the
 * least `outbox.maxPayloadBytes` and `largePayloadBudgetBytes`.
 */
import {
  HTTP_TIMEOUT_DEFAULT_MS,
  leaseRequestMs,
  OUTBOX_DEFERRED_PAYLOAD_BYTES,
  PUBLISH_WAIT_DEFAULT_MS,
  parseConfig,
  RESERVED_HTTP_PATHS,
} from '@queuebox/config';
import {
  DEFAULT_HTTP_TIMEOUT_MS,
  DEFAULT_LARGE_PAYLOAD_BUDGET_BYTES,
  DEFAULT_MAX_PAYLOAD_BYTES,
  DEFERRED_PAYLOAD_BYTES,
  requestTimeoutOf,
} from '@queuebox/outbox';
import { describe, expect, it } from 'vitest';
import { DEMO_RECEIVER_PATH } from '../src/demo-receiver.ts';

describe('packages/config and the packages it mirrors', () => {
  it('gives a destination at least the time packages/outbox gives its request, with the same http default', () => {
    expect(HTTP_TIMEOUT_DEFAULT_MS).toBe(DEFAULT_HTTP_TIMEOUT_MS);
    for (const destination of [
      { type: 'http' },
      { type: 'http', timeoutMs: 120_000 },
      { type: 'kafka' },
      { type: 'rabbitmq', timeoutMs: 5_000 },
    ]) {
      expect(leaseRequestMs(destination), JSON.stringify(destination)).toBeGreaterThanOrEqual(
        requestTimeoutOf(destination),
      );
    }
    expect(leaseRequestMs({ type: 'http' })).toBe(requestTimeoutOf({ type: 'http' }));
    expect(leaseRequestMs({ type: 'nats' })).toBe(PUBLISH_WAIT_DEFAULT_MS);
  });

  it("bounds outbox.maxPayloadBytes and largePayloadBudgetBytes below by the poller's deferral threshold, with its defaults", () => {
    expect(OUTBOX_DEFERRED_PAYLOAD_BYTES).toBe(DEFERRED_PAYLOAD_BYTES);
    expect(parseConfig({}).outbox).toMatchObject({
      maxPayloadBytes: DEFAULT_MAX_PAYLOAD_BYTES,
      largePayloadBudgetBytes: DEFAULT_LARGE_PAYLOAD_BUDGET_BYTES,
    });
  });

  it('keeps inbox.basePath off the demo receiver the local server serves', () => {
    expect(RESERVED_HTTP_PATHS).toContain(DEMO_RECEIVER_PATH);
  });
});
