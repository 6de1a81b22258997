import { QueueBoxError, type QueueBoxErrorOptions } from '@queuebox/core';

/**
 * A transform refused the message. Thrown by `reject()`, by JSONata's `$reject(reason)`, or by a transform function
 * itself; the inbox answers 422 (HTTP) or stores a dead row (brokers), the outbox dead-letters the row.
 */
export class TransformRejectedError extends QueueBoxError {
  /** Why, as the transform said it. */
  readonly reason: string;

  constructor(reason: string, options: QueueBoxErrorOptions = {}) {
    super(`Transform rejected the message: ${reason}`, options);
    this.reason = reason;
  }
}

/** Rejects the message being transformed: throws TransformRejectedError with `reason`. */
export function reject(reason: string): never {
  throw new TransformRejectedError(reason);
}
