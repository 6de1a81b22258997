/**
 * The client's public types as an application's compiler sees them: a fixture module type-checked with the
 * repository's compiler options and the stricter settings applications turn on. `@ts-expect-error` marks what
 * must be a type error (an unused one is an error itself), everything else must compile.
 */
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const FIXTURE = join(ROOT, 'packages/client/test/types-fixture.ts');

/** The diagnostics of `text`, compiled as a module next to this test with `overrides` on the repository's options. */
function diagnosticsOf(text: string, overrides: ts.CompilerOptions): string[] {
  const configPath = join(ROOT, 'tsconfig.json');
  const read = ts.readConfigFile(configPath, ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(read.config ?? {}, ts.sys, ROOT, undefined, configPath);
  const options = { ...parsed.options, ...overrides };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  host.getSourceFile = (fileName, language, onError, shouldCreate) =>
    resolve(fileName) === FIXTURE
      ? ts.createSourceFile(fileName, text, language)
      : getSourceFile(fileName, language, onError, shouldCreate);
  host.fileExists = (fileName) => resolve(fileName) === FIXTURE || fileExists(fileName);
  const program = ts.createProgram({ rootNames: [FIXTURE], options, host });
  const source = program.getSourceFile(FIXTURE);
  if (!source) throw new Error('the fixture was not compiled');
  return [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)].map((d) => {
    const line = d.start === undefined ? 0 : source.getLineAndCharacterOfPosition(d.start).line + 1;
    return `line ${line}: TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  });
}

/** The README's code with values that may be undefined, as `exactOptionalPropertyTypes` reads it. */
const OPTIONAL_UNDEFINED = `
import { createOutboxWaker, enqueue, enqueueMany, notifyOutbox, openPullWorker } from '../src/index.ts';
import type pg from 'pg';
declare const client: pg.PoolClient;
declare const customerId: string | undefined;
declare const maybeNumber: number | undefined;
declare const maybeHeaders: Record<string, string> | undefined;

export const waker = createOutboxWaker({
  functionName: process.env.OUTBOX_TICK_FUNCTION_NAME,
  minIntervalMs: maybeNumber,
  timeoutMs: maybeNumber,
  onError: undefined,
  lambda: undefined,
  invoke: undefined,
});
const options = { schema: process.env.APP_DB_SCHEMA, maxAttempts: maybeNumber, keyLockTimeoutMs: maybeNumber };
export const id = enqueue(
  client,
  { topic: 't', key: customerId, payload: {}, headers: maybeHeaders, maxAttempts: maybeNumber, delayMs: maybeNumber },
  options,
);
export const ids = enqueueMany(client, [{ topic: 't', key: customerId, payload: {} }], options);
export const notified = notifyOutbox(client, { schema: process.env.APP_DB_SCHEMA });
export const worker = openPullWorker({
  url: 'postgres://db/app',
  source: 'invoices',
  schema: process.env.APP_DB_SCHEMA,
  poolSize: maybeNumber,
  connectTimeoutMs: maybeNumber,
  queryTimeoutMs: maybeNumber,
});
`;

/** Values that are no transaction, each refused by enqueue at run time, are type errors too; transactions are not. */
const TRANSACTIONS = `
import { enqueue, type EnqueueMessage, sqlTemplate } from '../src/index.ts';
import type mssql from 'mssql';
import type pg from 'pg';
import type { DataSource, EntityManager } from 'typeorm';
declare const message: EnqueueMessage;
declare const pool: pg.Pool;
declare const dataSource: DataSource;
declare const manager: EntityManager;
declare const mssqlPool: mssql.ConnectionPool;
declare const poolClient: pg.PoolClient;
declare const pgClient: pg.Client;
declare const mssqlTransaction: mssql.Transaction;

// @ts-expect-error a pg Pool is no transaction
void enqueue(pool, message);
// @ts-expect-error a TypeORM DataSource opens transactions; it is none
void enqueue(dataSource, message);
// @ts-expect-error a TypeORM EntityManager opens transactions; it is none (wrap the one transaction() hands over)
void enqueue(manager, message);
// @ts-expect-error an mssql ConnectionPool is no transaction
void enqueue(mssqlPool, message);

void enqueue(poolClient, message);
void enqueue(pgClient, message);
void enqueue(mssqlTransaction, message);
void enqueue({ query: (text, values) => pool.query(text, values) }, message);
void enqueue({ query: (text, values) => manager.query(text, values) }, message);
void enqueue(sqlTemplate(async () => []), message);
`;

describe("the client's types", () => {
  it('take undefined for every optional property under exactOptionalPropertyTypes (the README passes process.env values)', () => {
    expect(diagnosticsOf(OPTIONAL_UNDEFINED, { exactOptionalPropertyTypes: true })).toEqual([]);
  });

  it('refuse a pool or a handle that opens transactions as an enqueue transaction, and take the transactions', () => {
    expect(diagnosticsOf(TRANSACTIONS, {})).toEqual([]);
    expect(diagnosticsOf(TRANSACTIONS, { exactOptionalPropertyTypes: true })).toEqual([]);
  });
});
