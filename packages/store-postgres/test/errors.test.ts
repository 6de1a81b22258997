import { StoreError, StoreUnavailableError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { isIdleSessionClosed, isUnavailable, translateError } from '../src/errors.ts';

/** A driver error as pg raises it: a message and a SQLSTATE or socket code. */
function aDriverError(message: string, code?: string): Error {
  return Object.assign(new Error(message), code === undefined ? {} : { code });
}

describe('what counts as "the database is unavailable"', () => {
  it('counts a session the server closed for idling (57P05) and connection resets', () => {
    // Prepare
    const idle = aDriverError('terminating connection due to idle-session timeout', '57P05');

    // Act
    const translated = translateError(idle);

    // Assess
    expect(translated).toBeInstanceOf(StoreUnavailableError);
    expect(isUnavailable(aDriverError('read ECONNRESET', 'ECONNRESET'))).toBe(true);
    expect(isUnavailable(aDriverError('Connection terminated unexpectedly'))).toBe(true);
  });

  it('tells a closed idle session (safe to retry: nothing ran) from other failures, also behind a cause', () => {
    const idle = aDriverError('terminating connection due to idle-session timeout', '57P05');

    expect(isIdleSessionClosed(idle)).toBe(true);
    expect(isIdleSessionClosed(translateError(idle))).toBe(true);
    expect(isIdleSessionClosed(aDriverError('read ECONNRESET', 'ECONNRESET'))).toBe(false);
    expect(
      isIdleSessionClosed(aDriverError('terminating connection due to administrator command', '57P01')),
    ).toBe(false);
    expect(translateError(aDriverError('syntax error', '42601'))).toBeInstanceOf(StoreError);
  });
});
