import { describe, expect, it } from 'vitest';
import { errorFields, errorResponse, HttpError, StoreError, StoreUnavailableError } from '../src/index.ts';

describe('errorResponse', () => {
  it('answers an HttpError with its own status, code and message', () => {
    // Act
    const answer = errorResponse(new HttpError(409, 'not_dead', 'The row is not dead'));
    // Assess
    expect(answer).toEqual({ status: 409, body: { error: 'not_dead', message: 'The row is not dead' } });
  });

  it('answers 503 for an outage, also when it is the cause of another error', () => {
    // Prepare
    const outage = new StoreUnavailableError('connect ECONNREFUSED 10.0.0.7:5432');
    // Act
    const answers = [outage, new StoreError('settle failed', { cause: outage })].map(errorResponse);
    // Assess
    for (const answer of answers) {
      expect(answer).toEqual({
        status: 503,
        body: { error: 'store_unavailable', message: 'The database is unavailable; retry later' },
      });
    }
  });

  it('answers 503 for a statement the database gave up on for the moment (a transient conflict)', () => {
    // A role's statement_timeout behind a DBA's lock answered webhooks 500 (an outside audit)
    const timedOut = new StoreError('canceling statement due to statement timeout', {
      context: { sqlState: '57014', transientConflict: true },
    });

    expect(errorResponse(timedOut)).toEqual({
      status: 503,
      body: { error: 'store_unavailable', message: 'The database is unavailable; retry later' },
    });
  });

  it('answers anything else with a bare 500 that quotes nothing of the error', () => {
    // Act
    const answers = [new Error('password=hunter2'), 'thrown text'].map(errorResponse);
    // Assess
    for (const answer of answers) {
      expect(answer).toEqual({ status: 500, body: { error: 'internal_error', message: 'Internal error' } });
    }
  });
});

describe('errorFields', () => {
  it('keeps name, message and a string code, never the stack', () => {
    // Prepare
    const error = Object.assign(new TypeError('bad input'), { code: 'ERR_X', detail: 'row values' });
    // Act
    const fields = errorFields(error);
    // Assess
    expect(fields).toEqual({ name: 'TypeError', message: 'bad input', code: 'ERR_X' });
  });

  it('logs what is thrown that is not an Error as an Error with its text', () => {
    expect(errorFields('boom')).toEqual({ name: 'Error', message: 'boom' });
    expect(errorFields(Object.assign(new Error('n'), { code: 7 }))).toEqual({ name: 'Error', message: 'n' });
  });

  it('describes a thrown object that is no Error by its class and descriptive fields, never other strings', () => {
    // PGlite's file system throws such objects: `[object Object]` said nothing.
    class ErrnoError {
      errno = 44;
      path = '/data/pglite/base';
      password = 'hunter2';
    }
    expect(errorFields(new ErrnoError())).toEqual({
      name: 'ErrnoError',
      message: '{"errno":44,"path":"/data/pglite/base"}',
    });
    expect(errorFields({ message: 'said so', code: 'E1' })).toEqual({
      name: 'Error',
      message: 'said so',
      code: 'E1',
    });
    expect(errorFields({ token: 'secret' })).toEqual({ name: 'Error', message: '[object Object]' });
  });

  it('never writes the bytes of a thrown buffer, a name that is no identifier, or an unbounded message', () => {
    const bearer = Buffer.from('Authorization: Bearer sk_live_0123456789');
    expect(errorFields(bearer)).toEqual({ name: 'Error', message: '[object Uint8Array]' });
    expect(errorFields([1, 'sk_live_x'])).toEqual({ name: 'Array', message: '[object Array]' });
    expect(errorFields({ name: 'Bearer sk_live_0123', message: 'm' })).toEqual({
      name: 'Error',
      message: 'm',
    });
    const long = errorFields({ message: 'x'.repeat(5_000_000), code: 'c'.repeat(1_000_000) });
    expect(long.message).toHaveLength(2_001);
    expect(long.code).toHaveLength(101);
  });
});
