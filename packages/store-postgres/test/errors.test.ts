import {
  isCredentialsRefused,
  isTransientConflict,
  isValueRefused,
  StoreError,
  StoreUnavailableError,
} from '@queuebox/core';
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
    // A read-only session (a standby reached after a failover): dropped, like a connection that broke.
    expect(
      translateError(aDriverError('cannot execute INSERT in a read-only transaction', '25006')),
    ).toBeInstanceOf(StoreUnavailableError);
  });

  it('marks a deadlock victim (40P01) and a serialization failure (40001) as transient conflicts, no outage', () => {
    for (const code of ['40P01', '40001']) {
      const translated = translateError(aDriverError('deadlock detected', code));

      expect(translated).toBeInstanceOf(StoreError);
      expect(translated).not.toBeInstanceOf(StoreUnavailableError);
      expect(isTransientConflict(translated)).toBe(true);
    }
    expect(isTransientConflict(translateError(aDriverError('relation does not exist', '42P01')))).toBe(false);
  });

  it('marks a lock or statement timeout of the role, a full lock table or disk as transient conflicts (they were 500s and untried settles)', () => {
    for (const [code, text] of [
      ['55P03', 'canceling statement due to lock timeout'],
      ['57014', 'canceling statement due to statement timeout'],
      ['53200', 'out of shared memory'],
      ['53100', 'could not extend file: No space left on device'],
    ] as const) {
      const translated = translateError(aDriverError(text, code));

      expect(translated, code).not.toBeInstanceOf(StoreUnavailableError);
      expect(isTransientConflict(translated), code).toBe(true);
    }
  });

  it('counts refused credentials (class 28: a rotated password) as an outage that says so', () => {
    for (const [message, code] of [
      ['password authentication failed for user "qb"', '28P01'],
      ['role "qb" is not permitted to log in', '28000'],
    ] as const) {
      const translated = translateError(aDriverError(message, code));

      expect(translated).toBeInstanceOf(StoreUnavailableError);
      expect(isCredentialsRefused(translated)).toBe(true);
      expect(translated.message).toMatch(/refused QueueBox's credentials/);
    }
    expect(isCredentialsRefused(translateError(aDriverError('read ECONNRESET', 'ECONNRESET')))).toBe(false);
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

describe('which errors refuse the statement values (core isValueRefused)', () => {
  it.each([
    ['22P02', true],
    ['22003', true],
    ['23514', true],
    ['54000', true],
    ['P0001', true],
    ['55P03', false],
    ['57014', false],
    ['40001', false],
    ['40P01', false],
    ['53100', false],
    ['42601', false],
  ])('SQLSTATE %s: %s', (sqlState, refused) => {
    const error = translateError(aDriverError('failed', sqlState));

    expect(error).toBeInstanceOf(StoreError);
    expect(isValueRefused(error)).toBe(refused);
  });
});
