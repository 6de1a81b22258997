export {
  type ClaimedInboxRow,
  ClaimLostError,
  createPullWorker,
  type PullWorker,
  type PullWorkerDeps,
} from '@queuebox/inbox';
export {
  DEFAULT_SCHEMA,
  type EnqueueOptions,
  enqueue,
  enqueueMany,
  notifyOutbox,
} from './enqueue.ts';
export { InvalidMessageError, type MessageIssue, TransactionRequiredError } from './errors.ts';
export { OUTBOX_CHANNEL, outboxKeyLockName, outboxKeyLockResource } from './lock-names.ts';
export {
  DEFAULT_MAX_ATTEMPTS,
  type EnqueueMessage,
  MAX_DELAY_MS,
  MAX_KEY_LENGTH,
  MAX_TOPIC_LENGTH,
} from './message.ts';
export {
  type AsyncInvoke,
  createOutboxWaker,
  type OutboxWaker,
  type OutboxWakerOptions,
} from './outbox-waker.ts';
export { MAX_SOURCE_LENGTH, type OpenPullWorkerOptions, openPullWorker, type PullClient } from './pull.ts';
export type { EnqueueTransaction, PgTransactionClient } from './transaction.ts';
