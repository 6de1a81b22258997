import { QueueBoxError } from '@queuebox/core';

/** One problem of a message given to `enqueue`: where (`topic`, `[2].headers.x`, `options.schema`) and what. */
export interface MessageIssue {
  readonly path: string;
  readonly message: string;
}

/**
 * A message given to `enqueue`/`enqueueMany` is not one the outbox can store. Raised before anything reaches the
 * database; lists every problem found, not only the first. Payload values are never copied into the error.
 */
export class InvalidMessageError extends QueueBoxError {
  readonly issues: readonly MessageIssue[];

  constructor(issues: readonly MessageIssue[]) {
    const lines = issues.map((i) => `  - ${i.path}: ${i.message}`);
    super(
      `Invalid outbox message (${issues.length} problem${issues.length === 1 ? '' : 's'}):\n${lines.join('\n')}`,
      { context: { issues: issues.length } },
    );
    this.issues = issues;
  }
}

/**
 * `enqueue` was handed something that is not an open transaction of the application: a `pg.Pool`, an mssql
 * `ConnectionPool` or `Request`, a pg client outside `BEGIN … COMMIT` or in an aborted transaction, or an object
 * of no known driver. The outbox row must commit or roll back with the business write, so nothing was written.
 */
export class TransactionRequiredError extends QueueBoxError {}
