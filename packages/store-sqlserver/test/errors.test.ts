import {
  isCredentialsRefused,
  isStoreUnavailable,
  isTransientConflict,
  isValueRefused,
  MigrationError,
  StoreError,
  StoreUnavailableError,
} from '@queuebox/core';
import mssql from 'mssql';
import { describe, expect, it } from 'vitest';
import { isDeadlock, isLockTimeout, isUniqueViolation, translateError } from '../src/errors.ts';
import { retryDeadlocks } from '../src/executor.ts';

/** A request error as mssql raises it for a server error: `number` from the server, code EREQUEST. */
function aRequestError(number: number, message = `server error ${number}`): Error {
  const original = Object.assign(new Error(message), { info: { number, state: 1, class: 16 } });
  return new mssql.RequestError(original as never, 'EREQUEST');
}

/** A connection error as mssql raises it: a `code`, no number. */
function aConnectionError(code: string, message = `connection failed (${code})`): Error {
  return new mssql.ConnectionError(message, code as never);
}

describe('translating driver errors', () => {
  it('reads the shapes of mssql’s own errors (number and code)', () => {
    const request = aRequestError(2627) as unknown as { number: number; code: string; name: string };
    const connection = aConnectionError('ESOCKET') as unknown as { code: string; name: string };

    expect([request.name, request.number, request.code]).toEqual(['RequestError', 2627, 'EREQUEST']);
    expect([connection.name, connection.code]).toEqual(['ConnectionError', 'ESOCKET']);
  });

  it.each(['ESOCKET', 'ECONNCLOSED', 'ETIMEOUT', 'ELOGIN', 'EINSTLOOKUP', 'ENOTOPEN'])(
    'makes a ConnectionError %s a StoreUnavailableError',
    (code) => {
      const driver = aConnectionError(code);

      const error = translateError(driver);

      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(error.cause).toBe(driver);
      expect(error.context).toEqual({ code });
    },
  );

  it('marks a refused login (ELOGIN "Login failed for user") as refused credentials, and no other ELOGIN', () => {
    const refused = translateError(aConnectionError('ELOGIN', "Login failed for user 'app'."));
    const others = [
      'Cannot open database "q" requested by the login. The login failed.',
      "Database 'q' on server 'db' is not currently available.",
      "Login failed for user 'app'. Reason: Server is in script upgrade mode. Only administrator can connect at this time.",
    ].map((message) => translateError(aConnectionError('ELOGIN', message)));

    // A rotated password, most often: the Lambda shell then reads its secrets anew, the local start ends.
    expect(refused.context).toEqual({ code: 'ELOGIN', credentialsRefused: true });
    for (const error of others) {
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(isCredentialsRefused(error)).toBe(false);
    }
  });

  it('makes a request that lost its socket or timed out a StoreUnavailableError', () => {
    const lostSocket = new mssql.RequestError(
      Object.assign(new Error('socket hang up'), { code: 'ESOCKET' }),
    );
    const timedOut = new mssql.RequestError('Timeout: Request failed to complete in 15000ms', 'ETIMEOUT');

    expect(translateError(lostSocket)).toBeInstanceOf(StoreUnavailableError);
    expect(translateError(timedOut)).toBeInstanceOf(StoreUnavailableError);
  });

  it.each([4060, 40613, 40501, 40197, 10928, 10936, 40143, 3906, 233, 10054])(
    'makes server error %i (database unavailable or read-only, throttling, transport) a StoreUnavailableError',
    (number) => {
      const error = translateError(aRequestError(number));

      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(error.context).toEqual({ number });
    },
  );

  it('makes a failed login (18456) a StoreUnavailableError that says the credentials were refused', () => {
    const error = translateError(aRequestError(18456, "Login failed for user 'qb'."));

    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(error.context).toEqual({ number: 18456, credentialsRefused: true });
    expect(isCredentialsRefused(error)).toBe(true);
  });

  it.each([
    [2627, 'unique constraint', false],
    [547, 'check constraint', true],
    [208, 'invalid object name', false],
    [102, 'syntax error', false],
    [2628, 'string would be truncated', true],
    [8115, 'arithmetic overflow', true],
    [50001, 'a trigger THROW', true],
  ])('makes server error %i (%s) a StoreError (refusing the values: %s)', (number, _what, refused) => {
    const error = translateError(aRequestError(number));

    expect(error).toBeInstanceOf(StoreError);
    expect(error).not.toBeInstanceOf(StoreUnavailableError);
    expect(error.context).toEqual(refused ? { number, valueRefused: true } : { number });
    expect(isValueRefused(error)).toBe(refused);
  });

  it.each([
    [3960, 'Snapshot isolation transaction aborted due to update conflict', '40001'],
    [1222, 'Lock request time out period exceeded.', '55P03'],
    [
      1204,
      'The instance of the SQL Server Database Engine cannot obtain a LOCK resource at this time.',
      '53200',
    ],
    [701, "There is insufficient system memory in resource pool 'default' to run this query.", '53200'],
    [8645, 'A timeout occurred while waiting for memory resources to execute the query.', '53200'],
    [9002, "The transaction log for database 'app' is full due to 'LOG_BACKUP'.", '53100'],
    [
      1105,
      "Could not allocate space for object 'queuebox.outbox' because the 'PRIMARY' filegroup is full.",
      '53100',
    ],
    [40544, "The database 'app' has reached its size quota.", '53100'],
  ])(
    'makes server error %i (%s) a transient conflict, no outage, as PostgreSQL makes %s',
    (number, message) => {
      // Act
      const error = translateError(aRequestError(number, message));

      // Assess
      expect(error).toBeInstanceOf(StoreError);
      expect(isStoreUnavailable(error)).toBe(false);
      expect(isTransientConflict(error)).toBe(true);
      expect(isValueRefused(error)).toBe(false);
      expect(error.context).toEqual({ number, transientConflict: true });
    },
  );

  it('keeps an error 1222 that a claim or reclaim absorbs recognisable after translation', () => {
    expect(isLockTimeout(translateError(aRequestError(1222)))).toBe(true);
    expect(isTransientConflict(translateError(aRequestError(208)))).toBe(false);
  });

  it('makes a deadlock victim that ran out of retries a StoreError that says so', () => {
    const error = translateError(aRequestError(1205, 'Transaction was deadlocked'));

    expect(error).toBeInstanceOf(StoreError);
    expect(error.message).toMatch(/deadlock victim/);
  });

  it('passes QueueBox errors through unchanged', () => {
    const original = new MigrationError('Migration 0002_x failed');

    expect(translateError(original)).toBe(original);
  });

  it('recognises duplicates and deadlocks through the errors that wrap them', () => {
    const duplicate = translateError(aRequestError(2601));
    const deadlock = new MigrationError('failed', { cause: translateError(aRequestError(1205)) });

    expect(isUniqueViolation(duplicate)).toBe(true);
    expect(isUniqueViolation(translateError(aRequestError(547)))).toBe(false);
    expect(isDeadlock(deadlock)).toBe(true);
    expect(isDeadlock(duplicate)).toBe(false);
  });

  it('strips the value SQL Server quotes in error 2628 from the message and the cause', () => {
    const secret = 'cus_4242 4242 4242 4242';
    const driver = aRequestError(
      2628,
      `String or binary data would be truncated in table 'app.queuebox.outbox', column 'key'. Truncated value: '${secret}'.`,
    );

    const error = translateError(driver);

    expect(error).toBeInstanceOf(StoreError);
    expect(error.message).toBe(
      "A database statement failed: String or binary data would be truncated in table 'app.queuebox.outbox', column 'key'.",
    );
    expect(error.context).toEqual({ number: 2628, valueRefused: true });
    expect(
      JSON.stringify({ message: error.message, cause: String(error.cause), stack: error.stack }),
    ).not.toContain('4242');
    expect((error.cause as { number?: number }).number).toBe(2628);
  });

  it.each([
    [
      'German',
      "Zeichenfolgen- oder Binärdaten würden in der Tabelle 'app.queuebox.outbox', Spalte 'key' abgeschnitten. Abgeschnittener Wert: 'SECRET'.",
      "Zeichenfolgen- oder Binärdaten würden in der Tabelle 'app.queuebox.outbox', Spalte 'key'.",
    ],
    [
      'French',
      "Les données de chaîne ou binaires seraient tronquées dans la table 'app.queuebox.inbox', colonne 'idempotency_key'. Valeur tronquée : 'SECRET'.",
      "Les données de chaîne ou binaires seraient tronquées dans la table 'app.queuebox.inbox', colonne 'idempotency_key'.",
    ],
    [
      'German, the value holding the English label',
      "Zeichenfolgen- oder Binärdaten würden in der Tabelle 'app.queuebox.inbox', Spalte 'idempotency_key' abgeschnitten. Abgeschnittener Wert: 'x Truncated value: 'SECRET'.",
      "Zeichenfolgen- oder Binärdaten würden in der Tabelle 'app.queuebox.inbox', Spalte 'idempotency_key'.",
    ],
    ['unexpected', "Truncation of 'SECRET'", 'String or binary data would be truncated (error 2628)'],
  ])(
    'strips the value of error 2628 in a session language other than English (%s)',
    (_language, text, kept) => {
      const secret = 'cus_4242 4242 4242 4242';
      const error = translateError(aRequestError(2628, text.replace('SECRET', secret)));

      expect(error.message).toBe(`A database statement failed: ${kept}`);
      expect(
        JSON.stringify({ message: error.message, cause: String(error.cause), stack: error.stack }),
      ).not.toContain('4242');
    },
  );

  it('recognises error 1222 (lock wait past LOCK_TIMEOUT), raw or translated', () => {
    expect(isLockTimeout(aRequestError(1222))).toBe(true);
    expect(isLockTimeout(translateError(aRequestError(1222)))).toBe(true);
    expect(isLockTimeout(translateError(aRequestError(1205)))).toBe(false);
  });

  it('makes a tarn pool-acquire timeout a StoreUnavailableError', () => {
    const timeout = Object.assign(new Error('operation timed out for an unknown reason'), {
      name: 'TimeoutError',
    });

    expect(translateError(timeout)).toBeInstanceOf(StoreUnavailableError);
  });
});

describe('retrying deadlock victims', () => {
  it('runs again after a deadlock and answers the later result', async () => {
    let runs = 0;

    const result = await retryDeadlocks(async () => {
      runs++;
      if (runs < 3) throw aRequestError(1205);
      return 'done';
    }, 3);

    expect([result, runs]).toEqual(['done', 3]);
  });

  it('gives up after the allowed retries with the deadlock error', async () => {
    let runs = 0;
    const deadlock = aRequestError(1205);

    await expect(
      retryDeadlocks(async () => {
        runs++;
        throw deadlock;
      }, 2),
    ).rejects.toBe(deadlock);
    expect(runs).toBe(3);
  });

  it('does not run again after any other error', async () => {
    let runs = 0;
    const duplicate = aRequestError(2627);

    await expect(
      retryDeadlocks(async () => {
        runs++;
        throw duplicate;
      }, 3),
    ).rejects.toBe(duplicate);
    expect(runs).toBe(1);
  });
});
