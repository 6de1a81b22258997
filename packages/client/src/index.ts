/*
 * The errors an application handles, as the very classes the client's code throws: in an installed tarball core is
 * bundled inside the client, so the application cannot import them from @queuebox/core itself.
 */
export {
  ConfigError,
  type ConfigIssue,
  QueueBoxError,
  StoreError,
  StoreUnavailableError,
} from '@queuebox/core';
export {
  DEFAULT_SCHEMA,
  type EnqueueOptions,
  enqueue,
  enqueueMany,
  notifyOutbox,
} from './enqueue.ts';
export { InvalidMessageError, type MessageIssue, TransactionRequiredError } from './errors.ts';
export {
  OUTBOX_CHANNEL,
  outboxKeyLockName,
  outboxKeyLockResource,
  wakeUpLockName,
} from './lock-names.ts';
export {
  DEFAULT_MAX_ATTEMPTS,
  type EnqueueMessage,
  MAX_DELAY_MS,
  MAX_KEY_LENGTH,
  MAX_PAYLOAD_DEPTH,
  MAX_TOPIC_LENGTH,
} from './message.ts';
export {
  type AsyncInvoke,
  createOutboxWaker,
  type OutboxWaker,
  type OutboxWakerOptions,
} from './outbox-waker.ts';
export {
  type ClaimedInboxRow,
  ClaimLostError,
  createPullWorker,
  MAX_CLAIM_ROWS,
  MAX_GIVEN_UP_PER_CLAIM,
  MAX_POOL_SIZE,
  MAX_PULL_DELAY_MS,
  MAX_SOURCE_LENGTH,
  type OpenPullWorkerOptions,
  openPullWorker,
  type PullClient,
  type PullWorker,
  type PullWorkerDeps,
  type RetryOutcome,
  type RetryRow,
  SOURCE_NAME_PATTERN,
} from './pull.ts';
export { type SqlQueryable, type SqlTag, sqlTemplate } from './queryable.ts';
export type { EnqueueTransaction, MssqlTransaction, PgTransactionClient } from './transaction.ts';
