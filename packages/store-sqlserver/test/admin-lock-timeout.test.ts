/**
 * Error 1222 (a lock wait past the batch's LOCK_TIMEOUT) in an admin requeue or purge, without a server: it surfaces
 * as a transient conflict (a `StoreError` with `context.transientConflict`, as PostgreSQL's lock timeout 55P03: try
 * again later; the admin API answers 503), as it does everywhere outside the claims, never as an outage or a plain
 * `StoreError`. The error comes through mssql's own request code (a stand-in connection that
 * reports the server's error message, as tedious does) and the store's real executor, or, for the one statement of
 * an outbox requeue that waits for a lock (the key heads), from an executor that raises what the real one raises.
 */
import { EventEmitter } from 'node:events';
import { errorResponse, isTransientConflict, StoreError, StoreUnavailableError } from '@queuebox/core';
import mssql from 'mssql';
import { describe, expect, it } from 'vitest';
import { createSqlServerAdminStore } from '../src/admin-store.ts';
import { LOCK_TIMEOUT, translateError } from '../src/errors.ts';
import { createSqlServerExecutor, type QueryResult, type SqlExecutor } from '../src/executor.ts';
import { SCHEMA } from './statements.ts';

const MESSAGE = 'Lock request time out period exceeded.';

/**
 * A pool whose one connection answers every request with error 1222: the server's error message (mssql collects it
 * from `errorMessage`), then the request's completion with an error, as tedious reports a failed batch. Transactions
 * begin, commit and roll back.
 */
function lockTimeoutPool(): mssql.ConnectionPool {
  type Request = { callback: (error?: Error, rowCount?: number) => void };
  const connection = Object.assign(new EventEmitter(), {
    execSql(request: Request) {
      setImmediate(() => {
        connection.emit('errorMessage', { number: LOCK_TIMEOUT, message: MESSAGE, state: 1, class: 16 });
        request.callback(new Error(MESSAGE));
      });
    },
    execSqlBatch(request: Request) {
      connection.execSql(request);
    },
    beginTransaction: (callback: () => void) => setImmediate(callback),
    commitTransaction: (callback: () => void) => setImmediate(callback),
    rollbackTransaction: (callback: () => void) => setImmediate(callback),
    cancel: () => undefined,
  });
  const pool = Object.assign(new EventEmitter(), {
    connected: true,
    config: {},
    acquire: (_request: unknown, callback: (error: null, c: typeof connection, config: object) => void) =>
      callback(null, connection, {}),
    release: () => undefined,
  });
  return pool as unknown as mssql.ConnectionPool;
}

/** What `promise` rejected with. */
async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
}

function expectLockTimeoutTransient(error: unknown): void {
  expect(error).toBeInstanceOf(StoreError);
  expect(error).not.toBeInstanceOf(StoreUnavailableError);
  expect(isTransientConflict(error)).toBe(true);
  expect((error as StoreError).context).toMatchObject({ number: LOCK_TIMEOUT });
  expect((error as Error).message).toContain(MESSAGE);
  expect(errorResponse(error).status).toBe(503);
}

describe('error 1222 in an admin requeue or purge', () => {
  const admin = () =>
    createSqlServerAdminStore({ executor: createSqlServerExecutor(lockTimeoutPool()), schema: SCHEMA });

  it('an inbox requeue (one autocommit statement) fails as a transient conflict', async () => {
    expectLockTimeoutTransient(await rejectionOf(admin().requeue('inbox', { source: 'stripe' })));
  });

  it('an outbox requeue (a transaction) fails as a transient conflict', async () => {
    expectLockTimeoutTransient(await rejectionOf(admin().requeue('outbox', { topic: 'orders.created' })));
  });

  it('a purge fails as a transient conflict', async () => {
    expectLockTimeoutTransient(
      await rejectionOf(
        admin().purge({ table: 'inbox', state: 'Sent', olderThanMs: 3_600_000, batchSize: 10 }),
      ),
    );
  });

  it('an outbox requeue whose wait for a key head ran out fails as a transient conflict, not re-wrapped', async () => {
    // Prepare: one dead keyed candidate, its key lock granted; the head lock waits past LOCK_TIMEOUT.
    const raw = new mssql.RequestError(
      Object.assign(new Error(MESSAGE), { info: { number: LOCK_TIMEOUT, state: 1, class: 16 } }) as never,
      'EREQUEST',
    );
    const steps: string[] = [];
    const executor: SqlExecutor = {
      async query<R>(text: string) {
        let rows: unknown[] = [];
        if (text.includes('sp_getapplock')) {
          steps.push('key locks');
          rows = [{ statuses: '0,' }];
        } else if (text.includes('AS held_key')) {
          steps.push('key heads');
          throw translateError(raw);
        } else if (text.includes('SELECT TOP (@batchSize) o.id, o.[key]')) {
          steps.push('candidates');
          rows = [{ id: '5', key: 'Q' }];
        } else steps.push(text);
        return { rows, rowCount: rows.length } as unknown as QueryResult<R>;
      },
      transaction: (fn) => fn(executor),
      close: async () => {},
    };

    // Act
    const error = await rejectionOf(
      createSqlServerAdminStore({ executor, schema: SCHEMA }).requeue('outbox', { topic: 'orders.created' }),
    );

    // Assess
    expect(steps).toEqual(['candidates', 'key locks', 'key heads']);
    expectLockTimeoutTransient(error);
  });
});
