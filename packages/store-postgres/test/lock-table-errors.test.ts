/**
 * "Out of shared memory" (53200) as QueueBox reports it: the server's lock table is full, which an enqueue of many
 * distinct keys reaches (one advisory lock per key until the application's transaction ends). A real server shows
 * it with `enqueueMany` of 10,000 distinct keys in one transaction at the default max_locks_per_transaction (64)
 * and max_connections (100) — see packages/client/README.md, "How many keys one transaction may lock".
 */
import { StoreError, StoreUnavailableError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { translateError } from '../src/errors.ts';

/** A pg driver error as pg builds it from the server's ErrorResponse. */
function aDriverError(code: string, message: string, hint?: string): Error {
  return Object.assign(new Error(message), { code, severity: 'ERROR', ...(hint ? { hint } : {}) });
}

describe('translateError of a full lock table', () => {
  it('says that the lock table is full, names max_locks_per_transaction and keeps the SQLSTATE', () => {
    // Prepare
    const driver = aDriverError(
      '53200',
      'out of shared memory',
      'You might need to increase max_locks_per_transaction.',
    );

    // Act
    const error = translateError(driver);

    // Assess
    expect(error).toBeInstanceOf(StoreError);
    expect(error).not.toBeInstanceOf(StoreUnavailableError);
    expect(error.message).toMatch(/lock table is full/);
    expect(error.message).toMatch(/outbox key locks, one per distinct key/);
    expect(error.message).toMatch(/raise max_locks_per_transaction/);
    expect(error.message).toMatch(/out of shared memory$/);
    expect(error.context).toEqual({ sqlState: '53200', transientConflict: true });
    expect(error.cause).toBe(driver);
  });

  it('leaves other out-of-memory errors as they were', () => {
    const error = translateError(aDriverError('53200', 'out of memory'));

    expect(error.message).toBe('A database statement failed: out of memory');
  });
});
