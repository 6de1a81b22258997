import { createHash } from 'node:crypto';
import { connect } from 'node:net';
import type { PGlite, Results, Transaction } from '@electric-sql/pglite';
import { StoreUnavailableError } from '@queuebox/core';
import type pg from 'pg';
import { isIdleSessionClosed, isUnavailable, sqlStateOf, translateError } from './errors.ts';
import type { ResultLimits } from './large-columns.ts';

/** One SQL statement: the text with `$1…` placeholders, and the values that fill them. */
export interface Statement {
  readonly text: string;
  readonly values: readonly unknown[];
}

/** How `SqlExecutor.query` runs a statement. */
export interface QueryOptions {
  /**
   * Runs the statement as a named prepared statement on `pg`: parsed once per connection, then PostgreSQL may keep
   * a generic plan and skip planning. Only for a statement whose every plan is a good one at any table size, or
   * with a guard (see `createPreparedGuard`); the name must always go with the same text. PGlite and the RDS Data
   * API run the statement unnamed.
   */
  readonly name?: string;
  /**
   * How long `pg` waits for the answer, in milliseconds; 0 waits without limit. Default: the executor's
   * `queryTimeoutMs`. The migrator uses 0: a migration, or its wait for another migrator's lock, may outlast any
   * normal statement. PGlite and the RDS Data API (its own request timeout) ignore it.
   */
  readonly timeoutMs?: number;
}

/** What a query answers: the rows and how many rows the statement returned or changed. */
export interface QueryResult<R> {
  readonly rows: R[];
  readonly rowCount: number;
}

/**
 * The one door to the database that the repositories and the migrator use, over `pg` or PGlite.
 *
 * `query` runs one statement with `$1…` parameters; without values (or with none) it uses the simple protocol
 * and may run several statements, answering the result of the last. `transaction` runs `fn` in one transaction
 * that commits when `fn` resolves and rolls back when it throws; inside it use only the `tx` it hands you (with
 * PGlite a query on the outer executor waits for the transaction to end, so it would wait for itself). A
 * `transaction` on a `tx` joins the enclosing transaction. Errors are core's `StoreUnavailableError` or
 * `StoreError` (see errors.ts).
 */
export interface SqlExecutor {
  /**
   * Limits on the size of an answer, when the executor has them (the RDS Data API); the repositories then read
   * large rows in pieces (large-columns.ts). Absent: no limit. `maxRequestBytes`, when present, bounds a request
   * as the executor sends it (the Data API: 4 MiB of JSON, array parameters escaped twice); the inbox group commit
   * then sizes its batches by it (inbox-batch.ts).
   */
  readonly resultLimits?: ResultLimits & { readonly maxRequestBytes?: number };
  query<R = Record<string, unknown>>(
    text: string,
    values?: readonly unknown[],
    options?: QueryOptions,
  ): Promise<QueryResult<R>>;
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  /** Releases the connections (ends the pool / closes PGlite). On a `tx`, does nothing. */
  close(): Promise<void>;
}

/** pg answers an array of results for a simple-protocol text with several statements. */
function lastResult(result: pg.QueryResult | pg.QueryResult[]): pg.QueryResult {
  if (!Array.isArray(result)) return result;
  const last = result[result.length - 1];
  if (!last) throw new Error('The statement text held no statement');
  return last;
}

function fromPg<R>(result: pg.QueryResult | pg.QueryResult[]): QueryResult<R> {
  const last = lastResult(result);
  return { rows: last.rows as R[], rowCount: last.rowCount ?? last.rows.length };
}

/** pg's error for a statement unanswered within its `query_timeout`. */
const READ_TIMEOUT_MESSAGE = 'Query read timeout';

/** How long a cancel request may take to connect and be sent before it is abandoned. */
const CANCEL_TIMEOUT_MS = 5000;

/** How long a statement's timeout waits for its cancel request to be taken (see `cancelStatement`). */
const CANCEL_WAIT_MS = 1000;

/**
 * Best effort: asks the server to cancel the statement running on `client`'s session, by PostgreSQL's CancelRequest
 * on a new connection (what libpq's PQcancel sends: no TLS, no authentication; the server checks the session's
 * secret key). Without it, a statement given up on a slow but live server (a lock wait, an overload) would go on
 * running, and an INSERT would still commit after it was reported failed. Resolves when the receiver closed the
 * cancel connection (it has taken the request) or after `CANCEL_WAIT_MS`: on a silent network the request never
 * arrives, and the caller waits no longer than that for it.
 */
function cancelStatement(client: pg.PoolClient): Promise<void> {
  const session = client as unknown as {
    readonly processID?: number | null;
    readonly secretKey?: number | null;
    readonly host?: string;
    readonly port?: number;
  };
  const { processID, secretKey, host, port } = session;
  if (typeof processID !== 'number' || typeof secretKey !== 'number' || !host || !port)
    return Promise.resolve();
  const request = Buffer.alloc(16);
  request.writeInt32BE(16, 0);
  request.writeInt32BE(80_877_102, 4);
  request.writeInt32BE(processID, 8);
  request.writeInt32BE(secretKey, 12);
  return new Promise((resolve) => {
    const socket = host.startsWith('/') ? connect(`${host}/.s.PGSQL.${port}`) : connect(port, host);
    // Never what keeps a process alive (a CLI command exiting while a cancel goes toward a silent network).
    socket.unref();
    socket.setTimeout(CANCEL_TIMEOUT_MS, () => socket.destroy());
    socket.on('error', () => socket.destroy());
    // Written, not ended: PgBouncer 1.18 reads a half-closed cancel connection as the client's unexpected end and
    // drops the request unforwarded; the receiver closes the connection once it has taken it.
    socket.on('connect', () => socket.write(request));
    // The receiver closes the cancel connection once it has acted on it. Until then the session must stay open:
    // a pooler (PgBouncer) knows the cancel key only while its client is connected, and drops the request of a
    // client that has gone, so the statement would run on (an INSERT committing after it was reported failed).
    const waited = setTimeout(resolve, CANCEL_WAIT_MS);
    waited.unref();
    socket.on('close', () => {
      clearTimeout(waited);
      resolve();
    });
    // Data from the receiver is not expected; read it so the close is seen.
    socket.resume();
  });
}

/** Whether `error` is a statement that went unanswered for its timeout (see `pgQuery`). */
function isQueryTimeout(error: unknown): boolean {
  return error instanceof StoreUnavailableError && error.context?.queryTimedOut === true;
}

/**
 * Runs one statement on `client`. With `timeoutMs` > 0, pg gives up waiting after that long (`query_timeout`) and
 * the statement fails as `StoreUnavailableError`. Its answer may still come, or never (a server or network that went
 * silent without a reset keeps a socket waiting for minutes): pg sends nothing more on the connection while the
 * statement is active, and the caller releases the connection as broken, which destroys its socket (pg's `end()`
 * with a query active). A live server is asked to cancel the statement (`cancelStatement`).
 */
async function pgQuery<R>(
  client: pg.PoolClient,
  text: string,
  values: readonly unknown[] | undefined,
  name: string | undefined,
  timeoutMs: number,
): Promise<QueryResult<R>> {
  const config: pg.QueryConfig & { query_timeout?: number } = { text };
  // Without values pg uses the simple protocol, which may run several statements.
  if (values && values.length > 0) {
    config.values = values as unknown[];
    if (name !== undefined) {
      config.name = name;
      // The name in the text too: PgBouncer 1.21+ (`max_prepared_statements`) keeps prepared statements by their
      // text, whatever the client names them, so a statement prepared again under a new name with the same text
      // would reuse the server's old one and its plan, and `replanAfterMs` would never plan again.
      config.text = `${text}\n/* ${name} */`;
    }
  }
  if (timeoutMs > 0) config.query_timeout = timeoutMs;
  try {
    return fromPg<R>((await client.query(config)) as pg.QueryResult | pg.QueryResult[]);
  } catch (error) {
    if (timeoutMs > 0 && error instanceof Error && error.message === READ_TIMEOUT_MESSAGE) {
      // Awaited (at most CANCEL_WAIT_MS): the caller destroys the connection right after this throws.
      await cancelStatement(client);
      throw new StoreUnavailableError(
        `The database did not answer a statement within ${timeoutMs} ms (database.queryTimeoutMs); its connection was dropped`,
        { cause: error, context: { queryTimedOut: true } },
      );
    }
    throw translateError(error);
  }
}

/** The server-side name a named statement runs under on `client` now, or undefined to run it unnamed. */
type NameOn = (client: pg.PoolClient, name: string | undefined) => Promise<string | undefined>;

function pgClientExecutor(client: pg.PoolClient, nameOn: NameOn, timeoutMs: number): SqlExecutor {
  const tx: SqlExecutor = {
    query: async (text, values, options) =>
      pgQuery(client, text, values, await nameOn(client, options?.name), options?.timeoutMs ?? timeoutMs),
    transaction: (fn) => fn(tx),
    close: async () => {},
  };
  return tx;
}

/** Options of {@link createPgExecutor}. */
export interface PgExecutorOptions {
  /**
   * A statement each new connection runs, awaited, before its first statement of ours (`openPostgresStore` gives
   * `SESSION_SETTINGS`). A connection whose set-up fails is destroyed and the failure thrown. When its first row
   * has a `default_isolation` other than `read committed`, statements run outside a transaction (`query`) are run
   * in a read committed transaction of their own from then on. Default none.
   */
  readonly sessionSetup?: string;
  /**
   * A pooled connection idle for longer than this is closed instead of reused. A Lambda container frozen between
   * invocations keeps its pool while the server (or a NAT, or a proxy) closes the idle sessions behind it; pg's own
   * idle timer does not run while the container is frozen, so the first statement after a thaw would meet a closed
   * session. The wall clock keeps running through a freeze, so the age check at checkout sees it. Default 30000
   * (below Aurora's idle_session_timeout of 60 s that infra sets).
   */
  readonly maxIdleMs?: number;
  /**
   * Whether a statement given a name (`QueryOptions.name`) runs as a named prepared statement. `false` runs every
   * statement unnamed: for a pooler that pins a session to its client for the prepared statements it holds (RDS
   * Proxy) or drops them. Default true (`database.preparedStatements`).
   */
  readonly namedStatements?: boolean;
  /**
   * How long one connection keeps a named statement before it prepares it again, under a new name (the old one is
   * deallocated). PostgreSQL makes a named statement's generic plan from the table as it was then and keeps it until
   * the table is analyzed again: a plan made while the outbox was small may scan all of it once it has grown, for as
   * long as autovacuum takes to analyze it. Preparing again bounds that age; it costs a few plans per connection per
   * period. Default 10000.
   */
  readonly replanAfterMs?: number;
  /**
   * How long a statement may go unanswered before it fails (`StoreUnavailableError`) and its connection is
   * destroyed; 0 waits without limit. Without it, a database that goes silent without closing the connection (a
   * dropped network path, a frozen host) holds a statement for as long as TCP retransmits, about 15 minutes on
   * Linux. A statement that timed out may still have run: the callers treat it as any other outage (a claim's lease
   * expires, a webhook is answered 503 and its retry is deduplicated). `QueryOptions.timeoutMs` overrides it per
   * statement. Default 30000.
   */
  readonly queryTimeoutMs?: number;
  /** Default `Date.now`. */
  readonly now?: () => number;
}

/** Default of {@link PgExecutorOptions.maxIdleMs}. */
export const DEFAULT_MAX_IDLE_MS = 30_000;

/**
 * A connection idle longer than this is let read what arrived while it idled (two turns of the event loop) before it
 * is used: a frozen Lambda container thaws with the server's goodbye (57P01 after a failover, a restart or a
 * terminated backend) unread in the socket, and the first statement would be written into a closed session.
 */
const READ_BEFORE_USE_AFTER_MS = 1_000;

/** Default of {@link PgExecutorOptions.queryTimeoutMs}. */
export const DEFAULT_QUERY_TIMEOUT_MS = 30_000;

/** Default of {@link PgExecutorOptions.replanAfterMs}. */
export const DEFAULT_REPLAN_AFTER_MS = 10_000;

/**
 * Whether a checked-out connection is still open after the event loop has polled its socket, reading what the server
 * sent while it idled (an error, the end of the stream). A checked-out client has no listener of the pool, so one is
 * added for that turn: an error without a listener would crash the process.
 */
async function stillOpen(client: pg.PoolClient): Promise<boolean> {
  let closed = false;
  const onClosed = () => {
    closed = true;
  };
  client.on('error', onClosed);
  client.on('end', onClosed);
  try {
    // Two turns: from an I/O callback (a request, the Lambda runtime's next invocation) the first check phase
    // comes before the next poll; the second comes after a poll that read the socket.
    for (let turn = 0; turn < 2 && !closed; turn++) await new Promise((resolve) => setImmediate(resolve));
  } finally {
    client.removeListener('error', onClosed);
    client.removeListener('end', onClosed);
  }
  return !closed;
}

/**
 * A `SqlExecutor` over a `pg` pool. Each `query` takes any pooled connection; `transaction` holds one connection
 * for `BEGIN … COMMIT` and releases it, destroying it when the connection failed so the pool never hands out a
 * broken one. A connection idle longer than `maxIdleMs` is closed at checkout instead of used; one idle longer than a
 * second first reads what the server sent meanwhile, and is replaced when that closed it. When the server had
 * closed a session before it was used (a stale connection: 57P05 on a statement, or any connection failure on
 * `BEGIN`, where nothing has run yet), the statement is retried once on a new connection. Transactions begin read
 * committed whatever the session's default, and where a set-up answers a `default_isolation` other than read
 * committed, every single statement runs in a read committed transaction of its own. No session state is set here
 * (`openPostgresStore` sets DateStyle only where the server's differs: see `SESSION_SETTINGS`), so it works behind a
 * transaction-mode pooler. The executor owns the pool: `close()` ends it (once). It also
 * listens to the pool's `error` event, because an idle connection that the server drops would otherwise crash the
 * process; the next query reports the outage instead.
 */
export function createPgExecutor(pool: pg.Pool, options: PgExecutorOptions = {}): SqlExecutor {
  pool.on('error', () => {});
  const maxIdleMs = options.maxIdleMs ?? DEFAULT_MAX_IDLE_MS;
  const now = options.now ?? Date.now;
  const named = options.namedStatements !== false;
  const replanAfterMs = Math.max(0, options.replanAfterMs ?? DEFAULT_REPLAN_AFTER_MS);
  const queryTimeoutMs = Math.max(0, options.queryTimeoutMs ?? DEFAULT_QUERY_TIMEOUT_MS);
  const idleSince = new WeakMap<pg.PoolClient, number>();
  const sessionSetup = options.sessionSetup;
  // The connections that ran `sessionSetup`.
  const setUp = new WeakSet<pg.PoolClient>();
  // Whether a set-up found a default isolation other than read committed: statements then run in a transaction.
  let wrapAutocommit = false;
  let closing: Promise<void> | undefined;
  // Per connection: the server-side name of each named statement prepared on it, and since when.
  const preparedOn = new WeakMap<
    pg.PoolClient,
    Map<string, { readonly as: string; readonly since: number }>
  >();
  let generation = 0;

  /**
   * The name `name` runs under on `client`: the one it was prepared under, until that is `replanAfterMs` old; then
   * the old one is deallocated (when the session holds it: one that lost it has nothing to free) and a new one is used,
   * so the next execution prepares and plans the statement again.
   */
  const nameOn: NameOn = async (client, name) => {
    if (!named || name === undefined) return undefined;
    let names = preparedOn.get(client);
    if (names === undefined) {
      names = new Map();
      preparedOn.set(client, names);
    }
    const current = names.get(name);
    if (current !== undefined && now() - current.since < replanAfterMs) return current.as;
    if (current !== undefined) {
      // Only a statement the session holds under that name is deallocated: a DEALLOCATE that fails would abort a
      // transaction this statement runs in (a store transaction, or a single statement wrapped in one where the
      // default isolation is not read committed), and PgBouncer 1.21+ keeps prepared statements under names of its
      // own, so the session never holds ours there.
      const { rows } = await pgQuery<{ held: boolean }>(
        client,
        'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_prepared_statements WHERE name = $1) AS held',
        [current.as],
        undefined,
        queryTimeoutMs,
      );
      if (rows[0]?.held === true) {
        await pgQuery(client, `DEALLOCATE "${current.as}"`, undefined, undefined, queryTimeoutMs);
      }
      // pg remembers what it parsed on the connection; the old name is never used again.
      const parsed = (client as { connection?: { parsedStatements?: Record<string, unknown> } }).connection
        ?.parsedStatements;
      if (parsed !== undefined) delete parsed[current.as];
    }
    const as = `${name}_${(generation++).toString(36)}`;
    names.set(name, { as, since: now() });
    return as;
  };

  /** A connection that has not idled past `maxIdleMs` (stale ones are destroyed: at most the pool's size). */
  async function checkout(): Promise<pg.PoolClient> {
    for (;;) {
      let client: pg.PoolClient;
      try {
        client = await pool.connect();
      } catch (error) {
        throw translateError(error);
      }
      const since = idleSince.get(client);
      if (since !== undefined && now() - since > maxIdleMs) {
        client.release(true);
        continue;
      }
      if (since !== undefined && now() - since > READ_BEFORE_USE_AFTER_MS && !(await stillOpen(client))) {
        // The server closed it while it idled (an outside audit: a thawed container answered 503 to a webhook
        // and failed its tick on such a connection): another one, or a new one.
        client.release(true);
        continue;
      }
      if (sessionSetup !== undefined && !setUp.has(client)) {
        // A checked-out client has no listener of the pool: a connection dropped during the set-up (a pooler that
        // restarts while the statement waits in its queue) would otherwise crash the process.
        let dropped: Error | undefined;
        const onError = (error: Error) => {
          dropped = error;
        };
        client.on('error', onError);
        try {
          const { rows } = await pgQuery<{ default_isolation?: unknown }>(
            client,
            sessionSetup,
            undefined,
            undefined,
            queryTimeoutMs,
          );
          const isolation = rows[0]?.default_isolation;
          if (typeof isolation === 'string' && isolation !== 'read committed') wrapAutocommit = true;
        } catch (error) {
          client.release(dropped ?? true);
          throw translateError(dropped ?? error);
        } finally {
          client.removeListener('error', onError);
        }
        if (dropped !== undefined) {
          client.release(dropped);
          throw translateError(dropped);
        }
        setUp.add(client);
      }
      return client;
    }
  }

  /**
   * Runs `work` on one checked-out connection, retrying once on a new one when `retryable` says the failure came
   * from a session that was already gone. The connection is destroyed when it failed.
   */
  async function withConnection<T>(
    work: (client: pg.PoolClient, markBroken: (cause: unknown) => void) => Promise<T>,
    retryable: (error: unknown) => boolean,
  ): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const client = await checkout();
      let broken: unknown;
      // A checked-out client has no listener of the pool: without ours, a dropped connection would crash the process.
      const onError = (error: Error) => {
        broken = error;
      };
      client.on('error', onError);
      try {
        return await work(client, (cause) => {
          broken ??= cause;
        });
      } catch (error) {
        if (isUnavailable(error)) broken ??= error;
        if (attempt === 1 && retryable(error)) continue;
        throw error;
      } finally {
        client.removeListener('error', onError);
        if (broken === undefined) idleSince.set(client, now());
        client.release(broken === undefined ? undefined : broken instanceof Error ? broken : true);
      }
    }
  }

  /**
   * Runs `work` in `BEGIN ISOLATION LEVEL READ COMMITTED … COMMIT` on `client` (ROLLBACK on its failure, the
   * connection marked broken when even that fails); `begun` is told once BEGIN was answered.
   */
  async function inReadCommitted<T>(
    client: pg.PoolClient,
    markBroken: (cause: unknown) => void,
    work: () => Promise<T>,
    begun: () => void = () => {},
  ): Promise<T> {
    // Read committed whatever the session's default (the claims and forwards are written for it).
    await pgQuery(client, 'BEGIN ISOLATION LEVEL READ COMMITTED', undefined, undefined, queryTimeoutMs);
    begun();
    try {
      const result = await work();
      await pgQuery(client, 'COMMIT', undefined, undefined, queryTimeoutMs);
      return result;
    } catch (error) {
      if (!isUnavailable(error)) {
        try {
          await pgQuery(client, 'ROLLBACK', undefined, undefined, queryTimeoutMs);
        } catch (rollbackError) {
          markBroken(rollbackError);
        }
      }
      // Statements already threw translated errors; anything else is the caller's own and passes unchanged.
      throw error;
    }
  }

  const executor: SqlExecutor = {
    query: <R>(text: string, values?: readonly unknown[], queryOptions?: QueryOptions) =>
      // An autocommit statement may have run when a connection fails mid-way; only the server's own word that
      // it had closed the idle session before (57P05) proves it did not.
      withConnection(
        async (client, markBroken) => {
          const run = async () =>
            pgQuery<R>(
              client,
              text,
              values,
              await nameOn(client, queryOptions?.name),
              queryOptions?.timeoutMs ?? queryTimeoutMs,
            );
          // Where the session's default isolation is not read committed (known once a connection ran its set-up,
          // so decided here, after the checkout), in a read committed transaction of its own: the default is left
          // as it is, since behind a transaction-mode pooler a session setting would change it for every other
          // client of the server connection.
          return wrapAutocommit ? inReadCommitted(client, markBroken, run) : run();
        },
        (error) => isIdleSessionClosed(error),
      ),
    transaction: (fn) => {
      let begun = false;
      return withConnection(
        async (client, markBroken) => {
          begun = false;
          return inReadCommitted(
            client,
            markBroken,
            () => fn(pgClientExecutor(client, nameOn, queryTimeoutMs)),
            () => {
              begun = true;
            },
          );
        },
        // Nothing ran before BEGIN: a connection failure there is a stale session, and a new one may succeed. A
        // BEGIN that went unanswered is not retried: a silent database would hold the retry as long again.
        (error) => !begun && isUnavailable(error) && !isQueryTimeout(error),
      );
    },
    close() {
      closing ??= pool.ending || pool.ended ? Promise.resolve() : pool.end();
      return closing;
    },
  };
  return executor;
}

function fromPglite<R>(result: Results<unknown>): QueryResult<R> {
  // PGlite counts only rows changed by INSERT/UPDATE/DELETE; a SELECT reports 0 there.
  return { rows: result.rows as R[], rowCount: Math.max(result.affectedRows ?? 0, result.rows.length) };
}

async function pgliteQuery<R>(
  target: PGlite | Transaction,
  text: string,
  values: readonly unknown[] | undefined,
): Promise<QueryResult<R>> {
  try {
    if (values && values.length > 0) return fromPglite<R>(await target.query(text, values as unknown[]));
    // `exec` is PGlite's simple protocol: several statements, one result each.
    const results = await target.exec(text);
    const last = results[results.length - 1];
    return last ? fromPglite<R>(last) : { rows: [], rowCount: 0 };
  } catch (error) {
    throw translateError(error);
  }
}

/**
 * A `SqlExecutor` over one PGlite database. PGlite is a single session: its `transaction()` and its `query()`
 * share one mutex, so a query that another caller issues while a transaction is open waits until that
 * transaction ends instead of running inside it, and transactions run one at a time. `close()` closes the
 * database (once), then releases `lock` when one is given (the data directory's, `lockDataDir`).
 */
export function createPgliteExecutor(db: PGlite, lock?: { release(): Promise<void> }): SqlExecutor {
  let closing: Promise<void> | undefined;
  return {
    query: (text, values) => pgliteQuery(db, text, values),
    async transaction(fn) {
      let failure: { error: unknown } | undefined;
      try {
        return await db.transaction(async (t) => {
          const tx: SqlExecutor = {
            query: (text, values) => pgliteQuery(t, text, values),
            transaction: (inner) => inner(tx),
            close: async () => {},
          };
          try {
            return await fn(tx);
          } catch (error) {
            failure = { error };
            throw error;
          }
        });
      } catch (error) {
        // The callback's own error passes unchanged; BEGIN/COMMIT/ROLLBACK failures are PGlite's and translated.
        if (failure && failure.error === error) throw error;
        throw translateError(error);
      }
    },
    close() {
      closing ??= (async () => {
        try {
          if (!db.closed) await db.close();
        } finally {
          await lock?.release();
        }
      })();
      return closing;
    },
  };
}

/** Options of {@link createPreparedGuard}. */
export interface PreparedGuardOptions {
  /** A named execution that took longer than this has the next execution run unnamed, as a probe. Default 50 ms. */
  readonly slowMs?: number;
  /** How long statements run unnamed after the probe ran in a quarter of the slow named time. Default 60000 ms. */
  readonly pauseMs?: number;
  /** Default `performance.now`. */
  readonly now?: () => number;
}

/** SQLSTATEs of a pooler that does not keep prepared statements: 26000 (unknown name), 42P05 (name taken). */
const PREPARED_LOST = new Set(['26000', '42P05']);

/** Decides, per execution, whether a statement runs named (see {@link createPreparedGuard}). */
export interface PreparedGuard {
  /** The name to run `text` under now, or undefined to run it unnamed. */
  nameFor(text: string): string | undefined;
  /**
   * Runs `text` through `executor`, named when `nameFor` says so. After a named execution slower than `slowMs` the
   * next one runs unnamed; when that one took less than a quarter of the time, the cached plan is the cause and
   * names pause for `pauseMs`, else (a loaded database) they go on. A pooler's "unknown / existing prepared statement" error turns them off for good and the
   * statement runs again unnamed (it did not run: the error comes at Parse or Bind). With `inTransaction` (the
   * statement runs in an explicit transaction, which that error has aborted) it is not run again there: the call
   * fails with `StoreUnavailableError`, and the caller's try again of its transaction runs it unnamed.
   */
  query<R>(
    executor: SqlExecutor,
    text: string,
    values: readonly unknown[],
    options?: { readonly inTransaction?: boolean },
  ): Promise<QueryResult<R>>;
}

/**
 * Names for statements whose generic plan can go bad. PostgreSQL's cached generic plan is made from the table's
 * statistics when it was made: one cached while the outbox was small and analyzed as such reads it with a
 * sequential scan and a sort, which costs hundreds of milliseconds once the table has grown, until the next
 * (auto)ANALYZE invalidates it. A named execution slower than `slowMs` may show it, or only a loaded database: the
 * next execution runs unnamed, planned for its parameters, and when it takes less than a quarter of the time the
 * statement runs unnamed for `pauseMs`, enough for autovacuum to analyze the table.
 * Behind a pooler in transaction mode that does not keep prepared statements (PgBouncer before 1.21) the first
 * named statement fails and names stay off.
 */
export function createPreparedGuard(options: PreparedGuardOptions = {}): PreparedGuard {
  const slowMs = options.slowMs ?? 50;
  const pauseMs = options.pauseMs ?? 60_000;
  const now = options.now ?? (() => performance.now());
  const names = new Map<string, string>();
  let pausedUntil = Number.NEGATIVE_INFINITY;
  let off = false;
  // The time of a slow named execution, until the unnamed probe after it has run.
  let slowNamedMs: number | undefined;
  const guard: PreparedGuard = {
    nameFor(text) {
      if (off || now() < pausedUntil) return undefined;
      let name = names.get(text);
      if (name === undefined) {
        name = `queuebox_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`;
        // A few texts per store (schema × inline size); a new text beyond that runs unnamed.
        if (names.size >= 16) return undefined;
        names.set(text, name);
      }
      return name;
    },
    async query<R>(
      executor: SqlExecutor,
      text: string,
      values: readonly unknown[],
      options?: { readonly inTransaction?: boolean },
    ) {
      const probe = slowNamedMs;
      const name = probe === undefined ? guard.nameFor(text) : undefined;
      const started = now();
      if (name === undefined) {
        const result = await executor.query<R>(text, values);
        if (probe !== undefined && slowNamedMs === probe) {
          slowNamedMs = undefined;
          if ((now() - started) * 4 < probe) pausedUntil = now() + pauseMs;
        }
        return result;
      }
      try {
        const result = await executor.query<R>(text, values, { name });
        const took = now() - started;
        if (took > slowMs) slowNamedMs = took;
        return result;
      } catch (error) {
        const state = sqlStateOf(error) ?? sqlStateOf((error as { cause?: unknown } | null)?.cause);
        if (state === undefined || !PREPARED_LOST.has(state)) throw error;
        off = true;
        if (options?.inTransaction) {
          // PgBouncer before 1.21 in transaction mode: the statement was prepared on another server connection. The
          // error aborted the transaction, so running it again here would fail with 25P02 (an outside review).
          throw new StoreUnavailableError(
            'The connection pooler does not keep prepared statements (named statements are off from now on); the transaction is tried again',
            { cause: error, context: { sqlState: state } },
          );
        }
        return executor.query<R>(text, values);
      }
    },
  };
  return guard;
}
