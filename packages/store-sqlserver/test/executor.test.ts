/**
 * How the executor's statements reach SQL Server, without a server: mssql's own request code runs over a stand-in
 * connection whose send methods hand the request to tedious's own `Connection.prototype.execSql` /
 * `execSqlBatch`, and the test records the TDS message they would send. This pins what README.md ("SET inside a
 * batch") relies on: every statement — with parameters or none — is an RPC call of sp_executesql, whose SET
 * options SQL Server restores when the call returns, so `SET LOCK_TIMEOUT` and `SET TRANSACTION ISOLATION LEVEL`
 * in a taking batch never stay on the pooled connection.
 */
import { EventEmitter } from 'node:events';
import { createRequire } from 'node:module';
import type mssql from 'mssql';
import { describe, expect, it } from 'vitest';
import { createSqlServerExecutor } from '../src/executor.ts';
import { STATEMENTS } from './statements.ts';

const require = createRequire(import.meta.url);
/** tedious as mssql loads it (its own dependency). */
const tedious = require(require.resolve('tedious', { paths: [require.resolve('mssql')] })) as {
  Connection: { prototype: Record<'execSql' | 'execSqlBatch', (request: unknown) => void> };
};

/** TDS packet types (MS-TDS 2.2.3.1.1) and tedious's id of sp_executesql (MS-TDS 2.2.6.6: ProcID 10). */
const SQL_BATCH = 0x01;
const RPC_REQUEST = 0x03;
const SP_EXECUTESQL = 10;

interface Sent {
  readonly packetType: number;
  /** The RPC's procedure id, for an RPC request. */
  readonly procedure?: unknown;
  /** The RPC's parameter names (`statement`, then `params` and the statement's own when it has any). */
  readonly parameters?: readonly string[];
}

/**
 * A pool whose one connection lets tedious build the message of each request and records it instead of writing
 * it to a socket, then completes the request with no rows.
 */
function recordingPool() {
  const sent: Sent[] = [];
  const send =
    (method: 'execSql' | 'execSqlBatch') =>
    (request: { callback: (error?: Error, rowCount?: number) => void }) => {
      const wire = {
        databaseCollation: undefined,
        config: { options: { tdsVersion: '7_4' } },
        currentTransactionDescriptor: () => Buffer.alloc(8),
        makeRequest(_request: unknown, packetType: number, payload: Record<string, unknown>) {
          const parameters = payload.parameters as { name: string }[] | undefined;
          sent.push({
            packetType,
            ...(packetType === RPC_REQUEST
              ? { procedure: payload.procedure, parameters: parameters?.map((p) => p.name) }
              : {}),
          });
        },
      };
      tedious.Connection.prototype[method].call(wire, request);
      setImmediate(() => request.callback(undefined, 0));
    };
  const connection = Object.assign(new EventEmitter(), {
    execSql: send('execSql'),
    execSqlBatch: send('execSqlBatch'),
    cancel: () => undefined,
  });
  const pool = Object.assign(new EventEmitter(), {
    connected: true,
    config: {},
    acquire: (_request: unknown, callback: (error: null, c: typeof connection, config: object) => void) =>
      callback(null, connection, {}),
    release: () => undefined,
  });
  return { pool: pool as unknown as mssql.ConnectionPool, sent };
}

describe('how the executor sends a statement', () => {
  it('sends one with parameters as an RPC call of sp_executesql', async () => {
    const { pool, sent } = recordingPool();
    const claim = STATEMENTS.claimInboxStatement;

    await createSqlServerExecutor(pool).query(claim?.text ?? '', claim?.values);

    expect(sent).toEqual([
      {
        packetType: RPC_REQUEST,
        procedure: SP_EXECUTESQL,
        parameters: ['statement', 'params', ...Object.keys(claim?.values ?? {})],
      },
    ]);
  });

  it('sends one without parameters as an RPC call of sp_executesql too, never as a plain SQL batch', async () => {
    const { pool, sent } = recordingPool();

    await createSqlServerExecutor(pool).query('SET LOCK_TIMEOUT 1000;\nSELECT 1 AS ok;');
    await createSqlServerExecutor(pool).query('SELECT 1 AS ok;', {});

    expect(sent).toEqual([
      { packetType: RPC_REQUEST, procedure: SP_EXECUTESQL, parameters: ['statement'] },
      { packetType: RPC_REQUEST, procedure: SP_EXECUTESQL, parameters: ['statement'] },
    ]);
    expect(sent.some((s) => s.packetType === SQL_BATCH)).toBe(false);
  });
});
