/**
 * Row factories of this package's tests. The PostgreSQL they talk to, the fresh schema per file and its pool come
 * from @queuebox/testing.
 */
import { randomBytes } from 'node:crypto';
import type { NewInboxMessage, NewOutboxMessage } from '@queuebox/core';

/** An outbox message with defaults: topic `t`, no key, payload `{ n: 0 }`, 3 attempts. */
export function anOutboxMessage(overrides: Partial<NewOutboxMessage> = {}): NewOutboxMessage {
  return { topic: 't', key: null, payload: { n: 0 }, maxAttempts: 3, ...overrides };
}

/** An inbox message with defaults: source `s`, a random idempotency key, payload `{ n: 0 }`, 3 attempts. */
export function anInboxMessage(overrides: Partial<NewInboxMessage> = {}): NewInboxMessage {
  return {
    source: 's',
    idempotencyKey: randomBytes(6).toString('hex'),
    payload: { n: 0 },
    maxAttempts: 3,
    ...overrides,
  };
}
