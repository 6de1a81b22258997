/**
 * A local RDS Data API endpoint in front of a real PostgreSQL, for tests and benchmarks: the real
 * `@aws-sdk/client-rds-data` client points at it with `endpoint`. Written from the AWS API reference (RDS Data
 * API, API version 2018-08-01, REST-JSON protocol), not from QueueBox's executor, so the executor's tests meet
 * the service's shapes rather than their own assumptions:
 *
 * - `POST /Execute` (ExecuteStatement): `sql` with named parameters `:name`; `parameters[]` of
 *   `{ name, value: Field, typeHint? }` where a Field is one of `stringValue`, `longValue`, `doubleValue`,
 *   `booleanValue`, `blobValue` (base64), `isNull`; `arrayValue` is refused ("Array parameters are not
 *   supported"). Typed like the service binds them: a string as `varchar` (with `typeHint` JSON / UUID /
 *   TIMESTAMP / DATE / TIME / DECIMAL as that type), a long as `int8`, a double as `float8`, a boolean as `bool`,
 *   a blob as `bytea`, null untyped. One statement per call (the extended protocol refuses several).
 *   Answers `records` (Field[][]: integers as `longValue`, floats as `doubleValue`, booleans as `booleanValue`,
 *   arrays as `arrayValue`, `bytea` as `blobValue`, NULL as `isNull`, everything else — numeric, json, uuid,
 *   timestamps in UTC as `YYYY-MM-DD HH:MM:SS[.ffffff]` — as `stringValue`), `columnMetadata` when
 *   `includeResultMetadata`, `numberOfRecordsUpdated`, or `formattedRecords` for `formatRecordsAs: JSON`.
 * - `POST /BeginTransaction` → `{ transactionId }`: one connection held until `/CommitTransaction`
 *   (`{ transactionStatus: "Transaction Committed" }`) or `/RollbackTransaction` (`"Rollback Complete"`), or until
 *   3 minutes pass without a call that names it (then rolled back; later calls get TransactionNotFoundException).
 * - Limits: a response over 1 MiB or a row over 64 KB fails the call; a request over 4 MiB or an `sql` over 65,536
 *   characters is refused unrun (BadRequestException). A statement still running after `statementTimeoutMs` (the
 *   service's 45 s) is cancelled and answers StatementTimeoutException, unless the call set `continueAfterTimeout`:
 *   then it runs on to its end (and commits, outside a transaction) while the call answers the same error.
 * - Transactions: a call naming a transaction that is still running another call answers DatabaseErrorException
 *   ("Transaction is still running a query"); a call that fails inside a transaction ends it (rolled back), so the
 *   next call naming it answers TransactionNotFoundException ("Transaction has been aborted due to an error from a
 *   previous call"), as the service's troubleshooting page describes.
 * - Errors: status and `x-amzn-ErrorType` of the modelled error, body `{ "message": … }`. A PostgreSQL error is
 *   `DatabaseErrorException` (400) with `…; SQLState: <code>` in its message.
 * - `pause()` imitates an Aurora Serverless v2 cluster that paused: the next call starts a resume and it and
 *   every call until `resumeMs` later answer `DatabaseResumingException` (400, "…Wait a few seconds and try
 *   again").
 *
 * Signatures and credentials are not checked; `resourceArn` and `secretArn` are required as in the service.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';

/** Counts of calls per operation since start (or `resetCalls`). */
export interface DataApiCalls {
  Execute: number;
  BeginTransaction: number;
  CommitTransaction: number;
  RollbackTransaction: number;
}

/** A running local endpoint. */
export interface LocalDataApi {
  /** `http://127.0.0.1:<port>`: the SDK client's `endpoint`. */
  readonly url: string;
  /** A plausible cluster ARN and secret ARN (any non-empty value is accepted). */
  readonly resourceArn: string;
  readonly secretArn: string;
  readonly calls: DataApiCalls;
  resetCalls(): void;
  /** Pauses the "cluster": the next call starts a resume that lasts `resumeMs`. */
  pause(resumeMs: number): void;
  /**
   * The next call of `operation` answers the service error `type` with HTTP `status` without running anything
   * (ThrottlingException 400, ServiceUnavailableError 503, InternalServerErrorException 500…).
   */
  failNext(operation: DataApiOperation, type: string, status: number): void;
  /**
   * The next call of `operation` runs (a commit commits) and its answer is lost: the connection is destroyed
   * instead, as when the network fails after the service acted.
   */
  loseNextAnswer(operation: DataApiOperation): void;
  /** Ends every open transaction, the pool and the server. */
  close(): Promise<void>;
}

/** The operations the endpoint serves. */
export type DataApiOperation = keyof DataApiCalls;

/** Options of `startLocalDataApi`. */
export interface LocalDataApiOptions {
  /** The PostgreSQL behind it. */
  readonly postgresUrl: string;
  /** Connections for autocommit calls. Default 8. */
  readonly poolSize?: number;
  /** Idle time after which an open transaction is rolled back. Default 180000 (the service's 3 minutes). */
  readonly transactionTimeoutMs?: number;
  /** Longest time a call may run its statement. Default 45000 (the service's 45 s). */
  readonly statementTimeoutMs?: number;
}

const MAX_RESPONSE_BYTES = 1024 * 1024;
const MAX_ROW_BYTES = 64 * 1024;
/** ExecuteStatement's `sql`: "Length Constraints: Maximum length of 65536" (API reference). */
const MAX_SQL_CHARS = 65_536;
/** "the maximum size of the HTTP request submitted through the Data API is 4 MiB" (API reference). */
const MAX_REQUEST_BYTES = 4 * 1024 * 1024;

class ApiError extends Error {
  readonly type: string;
  readonly status: number;
  constructor(type: string, status: number, message: string) {
    super(message);
    this.type = type;
    this.status = status;
  }
}

type Field =
  | { isNull: true }
  | { stringValue: string }
  | { longValue: number }
  | { doubleValue: number }
  | { booleanValue: boolean }
  | { blobValue: string }
  | { arrayValue: Record<string, unknown[]> };

interface Parameter {
  readonly name?: string;
  readonly value?: Record<string, unknown>;
  readonly typeHint?: string;
}

const HINT_CASTS: Record<string, string> = {
  JSON: 'json',
  UUID: 'uuid',
  TIMESTAMP: 'timestamp',
  DATE: 'date',
  TIME: 'time',
  DECIMAL: 'numeric',
};

/** `:name` → `$k` with the cast of the bound type, outside strings, quoted names, comments and `::` casts. */
function bindNamed(sql: string, parameters: readonly Parameter[]): { text: string; values: unknown[] } {
  const byName = new Map<string, Parameter>();
  for (const p of parameters) {
    if (!p.name) throw new ApiError('BadRequestException', 400, 'Parameter name is required');
    byName.set(p.name, p);
  }
  const values: unknown[] = [];
  const slots = new Map<string, string>();
  let text = '';
  let i = 0;
  while (i < sql.length) {
    const c = sql[i] as string;
    const rest = sql.slice(i);
    const skip =
      /^'(?:[^']|'')*'|^"(?:[^"]|"")*"|^--[^\n]*|^\/\*[\s\S]*?\*\/|^::|^\$([A-Za-z_]\w*)?\$[\s\S]*?\$\1\$/.exec(
        rest,
      );
    if (skip) {
      text += skip[0];
      i += skip[0].length;
      continue;
    }
    const named = /^:([A-Za-z_]\w*)/.exec(rest);
    if (c === ':' && named) {
      const name = named[1] as string;
      let slot = slots.get(name);
      if (slot === undefined) {
        const parameter = byName.get(name);
        if (!parameter)
          throw new ApiError('BadRequestException', 400, `No value specified for parameter: ${name}`);
        const { value, cast } = bindValue(parameter);
        values.push(value);
        slot = cast ? `($${values.length}::${cast})` : `$${values.length}`;
        slots.set(name, slot);
      }
      text += slot;
      i += named[0].length;
      continue;
    }
    text += c;
    i++;
  }
  return { text, values };
}

function bindValue(p: Parameter): { value: unknown; cast?: string } {
  const v = p.value ?? {};
  const hint = p.typeHint === undefined ? undefined : HINT_CASTS[p.typeHint];
  if (p.typeHint !== undefined && hint === undefined) {
    throw new ApiError('BadRequestException', 400, `Unsupported typeHint: ${p.typeHint}`);
  }
  if (v.isNull === true) return { value: null };
  if (typeof v.stringValue === 'string') return { value: v.stringValue, cast: hint ?? 'varchar' };
  if (typeof v.longValue === 'number') return { value: String(v.longValue), cast: 'int8' };
  if (typeof v.doubleValue === 'number') return { value: String(v.doubleValue), cast: 'float8' };
  if (typeof v.booleanValue === 'boolean') return { value: v.booleanValue, cast: 'bool' };
  if (typeof v.blobValue === 'string') return { value: Buffer.from(v.blobValue, 'base64'), cast: 'bytea' };
  if (v.arrayValue !== undefined)
    throw new ApiError('BadRequestException', 400, 'Array parameters are not supported');
  throw new ApiError('BadRequestException', 400, `Parameter ${p.name} has no value`);
}

/** A one-dimensional array literal (`{1,2}`, `{"a b",NULL}`) as its elements' texts. */
function parseArray(literal: string): (string | null)[] {
  const items: (string | null)[] = [];
  const body = literal.slice(1, -1);
  let i = 0;
  while (i < body.length) {
    if (body[i] === '"') {
      let item = '';
      i++;
      while (i < body.length && body[i] !== '"') {
        if (body[i] === '\\') i++;
        item += body[i];
        i++;
      }
      items.push(item);
      i += 2;
    } else {
      const end = body.indexOf(',', i);
      const item = body.slice(i, end < 0 ? body.length : end);
      items.push(item === 'NULL' ? null : item);
      i = end < 0 ? body.length : end + 1;
    }
  }
  return items;
}

const LONG_TYPES = new Set(['int2', 'int4', 'int8', 'oid']);
const DOUBLE_TYPES = new Set(['float4', 'float8']);

function toField(raw: string | null, type: string): Field {
  if (raw === null) return { isNull: true };
  if (type.startsWith('_')) {
    const element = type.slice(1);
    const items = parseArray(raw);
    if (LONG_TYPES.has(element)) return { arrayValue: { longValues: items.map(Number) } };
    if (DOUBLE_TYPES.has(element)) return { arrayValue: { doubleValues: items.map(Number) } };
    if (element === 'bool') return { arrayValue: { booleanValues: items.map((b) => b === 't') } };
    return { arrayValue: { stringValues: items.map((s) => s ?? '') } };
  }
  if (LONG_TYPES.has(type)) return { longValue: Number(raw) };
  if (DOUBLE_TYPES.has(type)) return { doubleValue: Number(raw) };
  if (type === 'bool') return { booleanValue: raw === 't' };
  if (type === 'bytea') return { blobValue: Buffer.from(raw.replace(/^\\x/, ''), 'hex').toString('base64') };
  if (type === 'timestamptz' || type === 'timestamp') return { stringValue: raw.replace(/\+00(:00)?$/, '') };
  return { stringValue: raw };
}

const JDBC_TYPES: Record<string, number> = {
  int2: 5,
  int4: 4,
  int8: -5,
  float4: 7,
  float8: 8,
  bool: -7,
  varchar: 12,
  text: 12,
  numeric: 2,
  timestamptz: 93,
  timestamp: 93,
  bytea: -2,
};

/** Starts the endpoint on 127.0.0.1 (a free port). */
export async function startLocalDataApi(options: LocalDataApiOptions): Promise<LocalDataApi> {
  const pool = new pg.Pool({
    connectionString: options.postgresUrl,
    max: options.poolSize ?? 8,
    options: '-c TimeZone=UTC',
  });
  pool.on('error', () => {});
  const transactionTimeoutMs = options.transactionTimeoutMs ?? 180_000;
  const statementTimeoutMs = options.statementTimeoutMs ?? 45_000;
  const failures = new Map<string, { type: string; status: number }>();
  const lostAnswers = new Set<string>();
  const typeNames = new Map<number, string>();
  const transactions = new Map<string, { client: pg.PoolClient; timer: NodeJS.Timeout; busy: boolean }>();
  const calls: DataApiCalls = {
    Execute: 0,
    BeginTransaction: 0,
    CommitTransaction: 0,
    RollbackTransaction: 0,
  };
  let resume: { state: 'paused' } | { state: 'resuming'; until: number; ms: number } | undefined;
  let resumeMs = 0;

  const rawText = { getTypeParser: () => (value: string) => value };

  async function typeName(oid: number): Promise<string> {
    const known = typeNames.get(oid);
    if (known) return known;
    const { rows } = await pool.query<{ typname: string }>('SELECT typname FROM pg_type WHERE oid = $1', [
      oid,
    ]);
    const name = rows[0]?.typname ?? 'unknown';
    typeNames.set(oid, name);
    return name;
  }

  function checkResume() {
    if (resume === undefined) return;
    if (resume.state === 'paused') resume = { state: 'resuming', until: Date.now() + resumeMs, ms: resumeMs };
    if (resume.state === 'resuming' && Date.now() >= resume.until) {
      resume = undefined;
      return;
    }
    throw new ApiError(
      'DatabaseResumingException',
      400,
      'A request was cancelled because the Aurora Serverless v2 DB instance was paused. The Data API request automatically resumes the DB instance. Wait a few seconds and try again.',
    );
  }

  function requireTarget(body: Record<string, unknown>) {
    for (const key of ['resourceArn', 'secretArn'] as const) {
      if (typeof body[key] !== 'string' || body[key] === '') {
        throw new ApiError('BadRequestException', 400, `${key} is required`);
      }
    }
  }

  function transaction(id: unknown) {
    const tx = typeof id === 'string' ? transactions.get(id) : undefined;
    if (!tx)
      throw new ApiError('TransactionNotFoundException', 404, `Transaction ${String(id)} is not found`);
    tx.timer.refresh();
    return tx;
  }

  async function endTransaction(id: string, sql: 'COMMIT' | 'ROLLBACK') {
    const tx = transactions.get(id);
    if (!tx) return;
    transactions.delete(id);
    clearTimeout(tx.timer);
    try {
      await tx.client.query(sql);
      tx.client.release();
    } catch (error) {
      tx.client.release(error as Error);
      throw error;
    }
  }

  function databaseError(error: unknown): ApiError {
    const e = error as { message?: string; code?: string; position?: string };
    const position = e.position ? `\n  Position: ${e.position}` : '';
    return new ApiError(
      'DatabaseErrorException',
      400,
      `ERROR: ${e.message ?? String(error)}${position}; SQLState: ${e.code ?? 'XX000'}`,
    );
  }

  /**
   * Runs `config` on `client`; after `statementTimeoutMs` the call answers StatementTimeoutException at once and,
   * unless `continueAfterTimeout`, the statement is cancelled (pg_cancel_backend on a connection of its own).
   * `settled` is told when the statement itself has ended (its error, if the connection broke).
   */
  function withStatementTimeout(
    client: pg.PoolClient,
    config: pg.QueryConfig,
    continueAfterTimeout: boolean,
    settled: (broken?: Error) => void,
  ): Promise<pg.QueryResult> {
    const pid = (client as unknown as { processID?: number }).processID;
    const running = client.query(config);
    running.then(
      () => settled(),
      (error: unknown) =>
        settled((error as { code?: string }).code === undefined ? (error as Error) : undefined),
    );
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        if (!continueAfterTimeout && pid !== undefined) {
          void pool.query('SELECT pg_cancel_backend($1)', [pid]).catch(() => {});
        }
        reject(
          new ApiError('StatementTimeoutException', 400, 'The execution of the SQL statement timed out.'),
        );
      }, statementTimeoutMs);
    });
    return Promise.race([running, timeout]).finally(() => clearTimeout(timer));
  }

  async function execute(body: Record<string, unknown>) {
    requireTarget(body);
    if (typeof body.sql !== 'string' || body.sql.trim() === '')
      throw new ApiError('BadRequestException', 400, 'sql is required');
    if (body.sql.length > MAX_SQL_CHARS) {
      throw new ApiError(
        'BadRequestException',
        400,
        `Number of characters in SQLStatement is longer than ${MAX_SQL_CHARS}`,
      );
    }
    const parameters = Array.isArray(body.parameters) ? (body.parameters as Parameter[]) : [];
    const { text, values } = bindNamed(body.sql, parameters);
    const tx = body.transactionId === undefined ? undefined : transaction(body.transactionId);
    if (tx?.busy) {
      throw new ApiError('DatabaseErrorException', 400, 'Transaction is still running a query');
    }
    let result: pg.QueryResult;
    try {
      const config = { text, values, types: rawText, queryMode: 'extended' as const } as pg.QueryConfig;
      const continueAfterTimeout = body.continueAfterTimeout === true;
      if (tx) {
        tx.busy = true;
        result = await withStatementTimeout(tx.client, config, continueAfterTimeout, () => {
          tx.busy = false;
        });
      } else {
        const client = await pool.connect().catch(() => {
          throw new ApiError('DatabaseUnavailableException', 504, 'The database is unavailable');
        });
        result = await withStatementTimeout(client, config, continueAfterTimeout, (broken) =>
          client.release(broken),
        );
      }
    } catch (error) {
      // A failed call ends its transaction: the service rolls it back and forgets its id.
      if (tx) void endTransaction(body.transactionId as string, 'ROLLBACK').catch(() => {});
      if (error instanceof ApiError) throw error;
      if ((error as { code?: string }).code === undefined) {
        throw new ApiError('DatabaseUnavailableException', 504, 'The database is unavailable');
      }
      throw databaseError(error);
    }
    const fields = result.fields ?? [];
    const types = await Promise.all(fields.map((f) => typeName(f.dataTypeID)));
    const rows = result.rows as Record<string, string | null>[];
    let bytes = 0;
    const records: Field[][] = [];
    for (const row of rows) {
      let rowBytes = 0;
      const record = fields.map((f, i) => {
        const raw = row[f.name] ?? null;
        rowBytes += raw === null ? 1 : Buffer.byteLength(raw);
        return toField(raw, types[i] as string);
      });
      if (rowBytes > MAX_ROW_BYTES) {
        if (tx) void endTransaction(body.transactionId as string, 'ROLLBACK').catch(() => {});
        throw new ApiError(
          'BadRequestException',
          400,
          'Query packet too large: a row of the result set is over 64 KB',
        );
      }
      bytes += rowBytes;
      if (bytes > MAX_RESPONSE_BYTES) {
        if (tx) void endTransaction(body.transactionId as string, 'ROLLBACK').catch(() => {});
        throw new ApiError('BadRequestException', 400, 'Database response exceeded size limit (1 MiB)');
      }
      records.push(record);
    }
    const updated = result.command === 'SELECT' ? 0 : (result.rowCount ?? 0);
    const answer: Record<string, unknown> = { numberOfRecordsUpdated: updated };
    if (body.formatRecordsAs === 'JSON') {
      answer.formattedRecords = JSON.stringify(
        rows.map((row) =>
          Object.fromEntries(
            fields.map((f, i) => {
              const field = toField(row[f.name] ?? null, types[i] as string);
              return [f.name, 'isNull' in field ? null : Object.values(field)[0]];
            }),
          ),
        ),
      );
    } else if (fields.length > 0) {
      answer.records = records;
    }
    if (body.includeResultMetadata === true && body.formatRecordsAs !== 'JSON') {
      answer.columnMetadata = fields.map((f, i) => ({
        name: f.name,
        label: f.name,
        typeName: types[i],
        type: JDBC_TYPES[types[i] as string] ?? ((types[i] as string).startsWith('_') ? 2003 : 1111),
        nullable: 2,
        schemaName: '',
        tableName: '',
        isAutoIncrement: false,
        isSigned: LONG_TYPES.has(types[i] as string) || DOUBLE_TYPES.has(types[i] as string),
        isCurrency: false,
        isCaseSensitive: types[i] === 'varchar' || types[i] === 'text',
        precision: 0,
        scale: 0,
        arrayBaseColumnType: 0,
      }));
    }
    return answer;
  }

  async function handle(operation: string, body: Record<string, unknown>): Promise<unknown> {
    const name = operation.slice(1);
    const failure = failures.get(name);
    if (failure) {
      failures.delete(name);
      if (name in calls) calls[name as DataApiOperation]++;
      throw new ApiError(failure.type, failure.status, `${failure.type} (injected by the test)`);
    }
    switch (operation) {
      case '/Execute':
        calls.Execute++;
        checkResume();
        return execute(body);
      case '/BeginTransaction': {
        calls.BeginTransaction++;
        requireTarget(body);
        checkResume();
        let client: pg.PoolClient;
        try {
          client = await pool.connect();
          await client.query('BEGIN');
        } catch {
          throw new ApiError('DatabaseUnavailableException', 504, 'The database is unavailable');
        }
        const id = randomBytes(96).toString('base64');
        const timer = setTimeout(() => {
          void endTransaction(id, 'ROLLBACK').catch(() => {});
        }, transactionTimeoutMs);
        timer.unref();
        transactions.set(id, { client, timer, busy: false });
        return { transactionId: id };
      }
      case '/CommitTransaction': {
        calls.CommitTransaction++;
        requireTarget(body);
        transaction(body.transactionId);
        try {
          await endTransaction(body.transactionId as string, 'COMMIT');
        } catch (error) {
          throw databaseError(error);
        }
        return { transactionStatus: 'Transaction Committed' };
      }
      case '/RollbackTransaction': {
        calls.RollbackTransaction++;
        requireTarget(body);
        transaction(body.transactionId);
        await endTransaction(body.transactionId as string, 'ROLLBACK').catch(() => {});
        return { transactionStatus: 'Rollback Complete' };
      }
      default:
        throw new ApiError('UnknownOperationException', 404, `Unknown operation ${operation}`);
    }
  }

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const send = (status: number, body: unknown, errorType?: string) => {
        const text = JSON.stringify(body);
        res.writeHead(status, {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(text),
          'x-amzn-requestid': randomBytes(16).toString('hex'),
          ...(errorType ? { 'x-amzn-errortype': errorType } : {}),
        });
        res.end(text);
      };
      let body: Record<string, unknown>;
      const raw = Buffer.concat(chunks);
      if (raw.length > MAX_REQUEST_BYTES) {
        send(
          400,
          { message: `Request size ${raw.length} exceeds the limit of 4 MiB` },
          'BadRequestException',
        );
        return;
      }
      try {
        body = JSON.parse(raw.toString('utf8') || '{}');
      } catch {
        send(400, { message: 'Request body is not JSON' }, 'BadRequestException');
        return;
      }
      if (req.method !== 'POST') {
        send(405, { message: 'Only POST' }, 'BadRequestException');
        return;
      }
      const pathname = new URL(req.url ?? '/', 'http://local').pathname;
      const lose = lostAnswers.delete(pathname.slice(1));
      handle(pathname, body).then(
        (answer) => (lose ? req.socket.destroy() : send(200, answer)),
        (error: unknown) => {
          if (error instanceof ApiError) send(error.status, { message: error.message }, error.type);
          else send(500, { message: String(error) }, 'InternalServerErrorException');
        },
      );
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    resourceArn: 'arn:aws:rds:us-east-1:123456789012:cluster:queuebox-local',
    secretArn: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:queuebox-local-AbCdEf',
    calls,
    resetCalls() {
      calls.Execute = 0;
      calls.BeginTransaction = 0;
      calls.CommitTransaction = 0;
      calls.RollbackTransaction = 0;
    },
    pause(ms) {
      resumeMs = ms;
      resume = { state: 'paused' };
    },
    failNext(operation, type, status) {
      failures.set(operation, { type, status });
    },
    loseNextAnswer(operation) {
      lostAnswers.add(operation);
    },
    async close() {
      for (const id of [...transactions.keys()]) await endTransaction(id, 'ROLLBACK').catch(() => {});
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await pool.end();
    },
  };
}
