export * from './backoff.ts';
export {
  DEFAULT_LARGE_PAYLOAD_BUDGET_BYTES,
  DEFAULT_MAX_PAYLOAD_BYTES,
  DEFERRED_PAYLOAD,
  DEFERRED_PAYLOAD_BYTES,
  deferredPayloadBytes,
  drainBudgetFor,
  requestTimeoutOf,
} from './delivery.ts';
export * from './destination-health.ts';
export * from './headers.ts';
export * from './http-publisher.ts';
export * from './options.ts';
export * from './outbox-loop.ts';
export * from './poller.ts';
export * from './publishers.ts';
export * from './router.ts';
export * from './semaphore.ts';
export * from './standard-webhooks.ts';
export * from './transforms.ts';
