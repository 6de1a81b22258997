import { mkdir } from 'node:fs/promises';
import {
  createServer,
  type RequestListener,
  type Server,
  type ServerOptions,
  type ServerResponse,
  STATUS_CODES,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { resolve } from 'node:path';
import type { Duplex } from 'node:stream';
import { createAdminHandler } from '@queuebox/admin';
import { awsPublisherFactories } from '@queuebox/aws';
import { configWarnings, type QueueBoxConfig } from '@queuebox/config';
import {
  ConfigError,
  createLogThrottle,
  type DrainLoop,
  errorFields,
  isMissingInstallIdError,
  type Store,
} from '@queuebox/core';
import type { RelayDrainReport } from '@queuebox/inbox';
import { kafkaPublisherFactory } from '@queuebox/kafka';
import { natsPublisherFactory } from '@queuebox/nats';
import {
  defaultPublisherFactories,
  drainBudgetFor,
  loopDrainOf,
  type OutboxDrainReport,
  type PublisherFactory,
  requestTimeoutOf,
  type TransformRegistry,
} from '@queuebox/outbox';
import { rabbitmqPublisherFactory } from '@queuebox/rabbitmq';
import { openStore } from '@queuebox/store';
import { checkServices, createServices, type Services } from '@queuebox/use-cases';
import {
  type Capture,
  createStepAside,
  createWakeUpCapture,
  type PgliteListener,
  type StepAside,
  type StepAsideOptions,
} from '@queuebox/wake-ups';
import { type BrokerConsumers, startBrokerConsumers } from './broker-consumers.ts';
import { type DatabaseWaitTiming, waitForDatabase } from './database-wait.ts';
import { createDemoReceiver } from './demo-receiver.ts';
import { relayDrainSummary, startTableLoop } from './drain-loops.ts';
import { createKeyWaitWarning } from './key-wait-warning.ts';
import { createLogger, type Logger } from './logger.ts';
import { type Maintenance, startMaintenance } from './maintenance.ts';
import { createQueueBoxMetrics, type QueueBoxMetrics } from './metrics.ts';
import { awaitContinue, createRequestHandler } from './server.ts';

/**
 * Publisher factories of the local runtime: every destination type has one (http, rabbitmq, kafka, nats, sqs, sns,
 * eventbridge), as in functions/outbox-tick.ts. The AWS SDK clients load only when an AWS destination publishes.
 */
export const LOCAL_PUBLISHER_FACTORIES: Readonly<Record<string, PublisherFactory>> = {
  ...defaultPublisherFactories,
  rabbitmq: rabbitmqPublisherFactory,
  kafka: kafkaPublisherFactory,
  nats: natsPublisherFactory,
  ...awsPublisherFactories,
};

/** Options of {@link startRuntime}. */
export interface RuntimeOptions {
  /** Default: JSON lines on stdout at `config.logLevel`. */
  readonly logger?: Logger;
  /**
   * Opens the store. Default {@link openLocalStore} (`@queuebox/store`; for PGlite the data directory is created and
   * the instance kept for its wake-ups). With an injected store, PostgreSQL wake-ups still listen on
   * `database.url`, but a PGlite store gets none (there is no instance to listen on): its loops poll.
   */
  readonly openStore?: (database: QueueBoxConfig['database']) => Promise<Store>;
  /** Apply pending migrations before serving. Default true (docs/design.md §4: the local runtime migrates at start). */
  readonly migrate?: boolean;
  /**
   * Time budget of one relay or outbox drain; deliveries still running at its end are aborted and retried. Default
   * {@link localDrainBudgetMs} of the destinations: room for the longest request.
   */
  readonly drainBudgetMs?: number;
  /**
   * Longest wait at shutdown for requests and drains in progress before the store is closed anyway, and then
   * again for closing the publishers and the store. Default `drainBudgetMs` + 5000 ms, so a drain always gets to
   * settle its batch.
   */
  readonly shutdownTimeoutMs?: number;
  /** Transform functions registered in code (`transform: { function }`), for the outbox. Default none. */
  readonly outboxTransforms?: TransformRegistry;
  /** Directory relative paths (PGlite's data directory) start from. Default `process.cwd()`. */
  readonly cwd?: string;
  /**
   * Listen for inserts (LISTEN/NOTIFY on PostgreSQL and PGlite, `@queuebox/wake-ups`) and drain at once. Default
   * true; false leaves the drains to their poll intervals (e.g. to measure the difference).
   */
  readonly wakeUps?: boolean;
  /**
   * When the outbox's PostgreSQL wake-up listener steps aside under load and comes back (`createStepAside` of
   * `@queuebox/wake-ups`; tests shorten its intervals). False keeps it listening whatever the load. Default its
   * defaults.
   */
  readonly wakeUpStepAside?:
    | false
    | Omit<StepAsideOptions, 'want' | 'wake' | 'waitingCommits' | 'outboxInserts' | 'onChange' | 'onError'>;
  /** Publisher factories by destination type. Default {@link LOCAL_PUBLISHER_FACTORIES} (every type). */
  readonly publisherFactories?: Readonly<Record<string, PublisherFactory>>;
  /** Consume the amqp, kafka, nats and sqs sources. Default true. */
  readonly brokerConsumers?: boolean;
  /** How often the row gauges of /metrics are refreshed from the admin stats; 0 turns it off. Default 15000 ms. */
  readonly statsIntervalMs?: number;
  /** How often retention (`retention.*`) runs, the first time at start; 0 turns it off. Default 300000 ms. */
  readonly retentionIntervalMs?: number;
  /**
   * Abandons a start that waits for its database (`npm start` aborts it on SIGTERM / SIGINT): `startRuntime` then
   * closes what it opened and rejects with the signal's `reason`. Once started, stop with `Runtime.stop`.
   */
  readonly signal?: AbortSignal;
  /** The pauses and WARN rate while the database cannot be reached at start. Default: see `waitForDatabase`. */
  readonly databaseWait?: DatabaseWaitTiming;
}

/** A running local runtime. */
export interface Runtime {
  /** The bound address, e.g. `http://127.0.0.1:8080`. */
  readonly url: string;
  readonly port: number;
  readonly host: string;
  readonly store: Store;
  readonly metrics: QueueBoxMetrics;
  /** The wake-up listener (kind `none` on SQL Server, or when `wakeUps` is false). */
  readonly capture: Capture;
  /** Wakes the relay / outbox drain at once (what a stored push row / a forward does by itself). */
  wakeRelay(): void;
  wakeOutbox(): void;
  /**
   * Graceful stop: stop accepting requests, stop claiming, let requests and deliveries in progress finish
   * (bounded by `shutdownTimeoutMs`), close the publishers, then the store (their closes bounded by
   * `shutdownTimeoutMs` too, with a warning naming what did not close). Resolves `true` when everything finished
   * in time, `false` when a timeout cut it short (claims left behind return when their lease expires). Calling it
   * again returns the same promise.
   */
  stop(reason?: string): Promise<boolean>;
}

/**
 * What bounds unfinished requests (with `http.maxConnections`, see `createStoppableServer`): a request must arrive whole within
 * `requestTimeoutMs`, its headers within 10 s of it, or it is answered 408 and its connection closed. Node checks
 * these every `connectionsCheckingInterval`; a second keeps a 408 within a second of its due time (Node's default
 * is 30 s).
 */
export function serverLimits(limits: { readonly requestTimeoutMs: number }): ServerOptions {
  return {
    requestTimeout: limits.requestTimeoutMs,
    headersTimeout: Math.min(HEADERS_TIMEOUT_MS, limits.requestTimeoutMs),
    connectionsCheckingInterval: 1000,
  };
}

/** The local drains' budget: `drainBudgetFor` the destinations' longest request (45 s with HTTP's 15 s default). */
export function localDrainBudgetMs(
  destinations: Readonly<Record<string, { readonly type: string; readonly timeoutMs?: number }>>,
): number {
  return drainBudgetFor(Math.max(0, ...Object.values(destinations).map(requestTimeoutOf)));
}

/** Longest wait for a request's headers. */
const HEADERS_TIMEOUT_MS = 10_000;

/** Longest wait for the store to close after a start abandoned by `RuntimeOptions.signal`. */
const ABANDONED_CLOSE_MS = 1_000;

function listen(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolvePromise, reject) => {
    const onError = (error: Error) => reject(error);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolvePromise(server.address() as AddressInfo);
    });
  });
}

/** An HTTP server that can stop under steady keep-alive traffic: see {@link createStoppableServer}. */
export interface StoppableServer {
  readonly server: Server;
  /**
   * Stops accepting connections, lets the requests in progress finish and resolves once every connection closed:
   * each connection is closed after its current answer (`Connection: close`), or at once when it has none.
   */
  close(): Promise<void>;
}

/** How many connections {@link createStoppableServer} serves, and how it answers more. */
export interface ConnectionLimits {
  /** Connections served as usual (`http.maxConnections`). Default: no limit. */
  readonly maxConnections?: number;
  /**
   * How long an unfinished request may take to arrive whole (`http.requestTimeoutMs`); after a stop began, a request
   * still arriving is cut when it has had this long (Node stops checking its own timeouts at `server.close()`).
   * Default 30 s.
   */
  readonly requestTimeoutMs?: number;
}

/**
 * Connections beyond `maxConnections` that are still read, so that each is answered rather than reset: `/health`
 * is served on them, any other request gets 503 `overloaded` with `Retry-After`. A connection beyond these is
 * answered 503 at once and closed. An outside overload audit: 256 connections that sent nothing, or a body a byte a
 * second, made every webhook and every `/health` probe on a new connection a reset, so a load balancer or a
 * readiness probe took a working instance out.
 */
export const OVERFLOW_CONNECTIONS = 64;

/** How long, after a stop began, a connection that sent part of a request's headers has to finish them. */
const STOP_HEADERS_GRACE_MS = 2_000;

/** How long a connection beyond `maxConnections` may take to send its request's headers. */
const OVERFLOW_HEADERS_MS = 2_000;

/** The body of the 503 `overloaded` answers. */
const OVERLOADED_BODY = JSON.stringify({
  error: 'overloaded',
  message: 'The server holds as many connections as it serves; try again shortly',
});

/** What a connection beyond every slot is answered, before it is closed. */
const OVERLOADED_RAW = `HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(OVERLOADED_BODY)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n${OVERLOADED_BODY}`;

/**
 * An HTTP server whose {@link StoppableServer.close} finishes under steady keep-alive traffic. `server.close()` alone
 * only closes the connections idle at that moment: a keep-alive client that had a request in progress got its answer
 * without `Connection: close`, sent its next request on the same connection and was served, again and again, so the
 * server never closed before the shutdown timeout. Once the stop began, every answer carries `Connection: close`
 * (Node then closes the connection after it); an answer whose headers were already out at the stop closes its
 * connection when it finishes, unless the client already sent its next request, which is answered with
 * `Connection: close` as well. `listenerFor` gets `isStopping`, true from the stop on, so a request that comes on an
 * open connection after the stop can be refused rather than start new work.
 *
 * At the stop a connection with no request in progress is closed at once when it sent nothing (a silent one, or an
 * idle keep-alive one), and after 2 s when it sent part of a request's headers; a request still arriving is cut
 * once it has had `requestTimeoutMs`: `server.close()` ends
 * Node's checks of its header and request timeouts, so one silent connection held every stop for the whole shutdown
 * timeout and made it unclean (an outside lifecycle audit: 40 s and exit 1 for a TCP probe that said nothing).
 *
 * With `maxConnections`, connections past it are answered instead of reset (see {@link OVERFLOW_CONNECTIONS}).
 */
export function createStoppableServer(
  options: ServerOptions,
  listenerFor: (isStopping: () => boolean) => RequestListener,
  limits: ConnectionLimits = {},
): StoppableServer {
  let stopping = false;
  let closed: Promise<void> | undefined;
  const requestTimeoutMs = limits.requestTimeoutMs ?? 30_000;
  // The responses in progress, per connection, in request order (pipelined requests queue their answers).
  const inProgress = new Map<Socket, ServerResponse[]>();
  // Every open connection, and those beyond maxConnections.
  const sockets = new Set<Socket>();
  const overflow = new WeakSet<Socket>();
  // When each request in progress began, for the cut of one still arriving at the stop.
  const startedAt = new WeakMap<ServerResponse, number>();
  // What each connection had read when its last answer was written: more since is part of a next request.
  const readAtAnswer = new WeakMap<Socket, number>();
  const listener = listenerFor(() => stopping);
  const server = createServer(options, (request, response) => {
    if (overflow.has(request.socket) && (request.url ?? '').split('?')[0] !== '/health') {
      // Beyond maxConnections: answered, never handled, so the slots' work is not added to.
      request.resume();
      response
        .writeHead(503, {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(OVERLOADED_BODY),
          'retry-after': '1',
          connection: 'close',
        })
        .end(OVERLOADED_BODY);
      return;
    }
    // A connection beyond maxConnections is closed after its /health answer: it makes room.
    if (stopping || overflow.has(request.socket)) response.setHeader('connection', 'close');
    // Kept as in progress after the stop began too: a request whose headers ended within the stop's grace is
    // answered (503, its body read) before its connection is closed, not reset (review).
    const socket = request.socket;
    const queued = inProgress.get(socket);
    if (queued === undefined) inProgress.set(socket, [response]);
    else queued.push(response);
    startedAt.set(response, Date.now());
    response.once('close', () => {
      readAtAnswer.set(socket, socket.bytesRead);
      const list = inProgress.get(socket);
      if (list === undefined) return;
      const at = list.indexOf(response);
      if (at >= 0) list.splice(at, 1);
      if (list.length === 0) inProgress.delete(socket);
    });
    listener(request, response);
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    const max = limits.maxConnections;
    if (max === undefined || sockets.size <= max) return;
    if (sockets.size > max + OVERFLOW_CONNECTIONS || stopping) {
      socket.end(OVERLOADED_RAW);
      socket.destroySoon();
      return;
    }
    overflow.add(socket);
    // Its headers within a short while, or it makes room: a slot kept by a silent connection is not kept here too.
    const cut = setTimeout(() => {
      if (!inProgress.has(socket)) socket.destroy();
    }, OVERFLOW_HEADERS_MS);
    cut.unref();
    socket.once('data', () => clearTimeout(cut));
  });
  // `Expect: 100-continue`: node:http answered 100 to every such request itself, before any check, so a client sent
  // 5 MB that a 413 or a 415 then refused. Now the request handler answers 100 only when it is about to read the
  // body, and a request its headers already decide is answered at once (see awaitContinue, RFC 9110 §10.1.1); the
  // request goes through the listener above like any other.
  server.on('checkContinue', (request, response) => {
    awaitContinue(request);
    server.emit('request', request, response);
  });
  server.on('clientError', answerClientError);
  const closeIdle = () => server.closeIdleConnections();
  return {
    server,
    close() {
      closed ??= new Promise<void>((resolvePromise) => {
        stopping = true;
        const now = Date.now();
        for (const [socket, responses] of inProgress) {
          // Only the last answer of a connection closes it: an earlier pipelined one that closed it would drop the
          // answers queued behind it, of requests already handled (stored, never answered).
          const last = responses[responses.length - 1];
          if (last === undefined) continue;
          if (!last.headersSent) last.setHeader('connection', 'close');
          // Its headers said keep-alive: the connection is idle once it finished (and closed, unless the client
          // already sent its next request, which gets `Connection: close`).
          else last.once('close', closeIdle);
          // A request still arriving has what is left of its requestTimeoutMs, as Node would have allowed it.
          const first = responses[0];
          if (first !== undefined && !first.req.complete) {
            const left = requestTimeoutMs - (now - (startedAt.get(first) ?? now));
            const cut = setTimeout(
              () => {
                if (!first.req.complete) socket.destroy();
              },
              Math.max(0, left),
            );
            cut.unref();
            socket.once('close', () => clearTimeout(cut));
          }
        }
        // A connection with no request in progress has nothing to finish: closed at once when it sent nothing since
        // its last answer; one with part of a request's headers gets STOP_HEADERS_GRACE_MS to finish them (it is then
        // answered 503 like any request after the stop).
        for (const socket of sockets) {
          if (inProgress.has(socket)) continue;
          if (socket.bytesRead <= (readAtAnswer.get(socket) ?? 0)) {
            socket.destroy();
            continue;
          }
          const cut = setTimeout(() => {
            if (!inProgress.has(socket)) socket.destroy();
          }, STOP_HEADERS_GRACE_MS);
          cut.unref();
          socket.once('close', () => clearTimeout(cut));
        }
        inProgress.clear();
        server.close(() => resolvePromise());
        // Keep-alive connections without a request in progress would hold close() open until they time out.
        closeIdle();
      });
      return closed;
    },
  };
}

/**
 * What Node does with a request it cannot parse or that came too slowly (its `clientError`), but answered in JSON
 * with a stable `error` code like every other answer, where Node's default answers carry no body: 431
 * `headers_too_large` (over Node's 16 KiB of headers), 408 `request_timeout` (`http.requestTimeoutMs`, or headers
 * not whole within 10 s), 400 `bad_request` (not HTTP/1.1). A connection already reset, or whose answer has begun,
 * is destroyed, as Node does.
 */
export function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  const answering = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (error.code === 'ECONNRESET' || !socket.writable || answering?.headersSent === true) {
    socket.destroy();
    return;
  }
  const [status, code, message] =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'headers_too_large', 'The request headers are larger than 16 KiB']
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'request_timeout', 'The request did not arrive whole in time']
        : [400, 'bad_request', 'The request is not valid HTTP/1.1'];
  const body = JSON.stringify({ error: code, message });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<{ done: true; value: T } | { done: false }> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<{ done: false }>((resolvePromise) => {
    timer = setTimeout(() => resolvePromise({ done: false }), ms);
  });
  return Promise.race([work.then((value) => ({ done: true as const, value })), timeout]).finally(() =>
    clearTimeout(timer),
  );
}

function hostForUrl(host: string): string {
  if (host === '0.0.0.0' || host === '::') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

/**
 * Opens the configured store with `@queuebox/store`; for PGlite the data directory is resolved against `cwd`
 * (default `process.cwd()`) and created first. Does not migrate.
 */
export async function openConfiguredStore(
  database: QueueBoxConfig['database'],
  cwd: string = process.cwd(),
): Promise<Store> {
  if (database.provider === 'pglite') {
    const dataDir = await privateDataDir(resolve(cwd, database.dataDir));
    return openStore({ ...database, dataDir });
  }
  return openStore(database);
}

/**
 * The embedded database's directory, made if missing with mode 0700: PGlite writes its files readable and writable by
 * everyone (0666 under a 022 umask), so the directory is what keeps the payloads from other local users (an outside
 * audit). An existing directory keeps the mode its owner gave it.
 */
async function privateDataDir(dataDir: string): Promise<string> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  return dataDir;
}

/** A store the runtime opened, and the PGlite instance under it when there is one (for its wake-ups). */
export interface LocalStore {
  readonly store: Store;
  readonly pglite?: PgliteListener;
}

/**
 * Like {@link openConfiguredStore}, but for PGlite it opens the instance itself and hands it back too: PGlite is
 * one in-process session, so the wake-ups must `listen()` on the very instance the store queries.
 */
export async function openLocalStore(
  database: QueueBoxConfig['database'],
  cwd: string = process.cwd(),
): Promise<LocalStore> {
  if (database.provider !== 'pglite') return { store: await openConfiguredStore(database, cwd) };
  const dataDir = await privateDataDir(resolve(cwd, database.dataDir));
  const [{ PGlite }, { createPgliteExecutor, createPostgresStore, lockDataDir, PGLITE_PARSERS }] =
    await Promise.all([import('@electric-sql/pglite'), import('@queuebox/store-postgres')]);
  // One process at a time on the directory (the CLI's admin commands included): see lockDataDir.
  const lock = await lockDataDir(dataDir);
  let db: Awaited<ReturnType<typeof PGlite.create>> | undefined;
  try {
    db = await PGlite.create({ dataDir, parsers: { ...PGLITE_PARSERS } });
    const store = createPostgresStore({
      executor: createPgliteExecutor(db, lock),
      schema: database.schema,
      provider: 'pglite',
    });
    return { store, pglite: db };
  } catch (error) {
    await db?.close().catch(() => undefined);
    await lock.release();
    throw error;
  }
}

/**
 * Starts QueueBox in this process, as the Lambda functions run it on AWS: opens the store (the embedded PGlite
 * under `.queuebox/` when no database is configured) and migrates it, builds the ingestion, the relay and the
 * outbox poller (with publishers for http, rabbitmq, kafka and nats destinations) from the validated
 * configuration, serves HTTP on `http.host`:`http.port` (port 0 picks a free one; the bound address is logged as
 * `{"message":"listening","port":…}`) with the admin API under `/admin` when `admin.token` is set, and runs the relay
 * and outbox drain loops (`inbox.relay.pollIntervalMs`, `outbox.pollIntervalMs`), one long-lived consumer per
 * amqp / kafka / nats source, the wake-up listener (LISTEN/NOTIFY on PostgreSQL and PGlite), the stats gauges and
 * retention. A stored push row wakes the relay at once; a relay drain that forwarded rows wakes the outbox at once;
 * a notification of an insert wakes the drain of its table. It listens before it touches the database: while the
 * database cannot be reached (`StoreUnavailableError`: refused, reset, timed out, host not resolved yet, starting
 * up), it waits and tries again with back-off ({@link waitForDatabase}), `/health` and the sources answering 503,
 * and starts the rest once the database answers and is migrated. Throws (after closing what it opened) when the
 * store cannot be opened, the database refuses for good (authentication, no such database, a failed migration),
 * the configuration cannot be compiled, the port is taken, or `options.signal` abandons the start.
 */
export async function startRuntime(config: QueueBoxConfig, options: RuntimeOptions = {}): Promise<Runtime> {
  const logger = options.logger ?? createLogger({ level: config.logLevel });
  const cwd = options.cwd ?? process.cwd();
  const drainBudgetMs = options.drainBudgetMs ?? localDrainBudgetMs(config.destinations);
  const shutdownTimeoutMs = options.shutdownTimeoutMs ?? drainBudgetMs + 5_000;
  const metrics = createQueueBoxMetrics({
    sources: Object.keys(config.sources),
    httpSources: Object.entries(config.sources).flatMap(([name, source]) =>
      source.type === 'http' ? [name] : [],
    ),
    brokerSources:
      options.brokerConsumers === false
        ? []
        : Object.entries(config.sources).flatMap(([name, source]) => (source.type === 'http' ? [] : [name])),
    destinations: Object.keys(config.destinations),
  });

  // What `queuebox config check` warns about, said where an operator of the runtime sees it.
  for (const warning of configWarnings(config))
    logger.warn(`configuration warning: ${warning.path} ${warning.message}`, { path: warning.path });

  const opened: { store?: Store; services?: Services; server?: Server } = {};
  const stopping = new AbortController();
  let databaseReady = false;
  try {
    // Every problem the assembly below would find, at once (it stops at its first and leaves source JSONata to
    // `ready()`), before the store is opened: what `queuebox config check` reports.
    const problems = await checkServices(
      config,
      options.outboxTransforms ? { outboxTransforms: options.outboxTransforms } : {},
    );
    if (problems.length > 0) throw new ConfigError(problems);
    logger.info('opening store', {
      provider: config.database.provider,
      schema: config.database.schema,
      ...(config.database.provider === 'pglite' ? { dataDir: config.database.dataDir } : {}),
    });
    const local: LocalStore = options.openStore
      ? { store: await options.openStore(config.database) }
      : await openLocalStore(config.database, cwd);
    const { store } = local;
    opened.store = store;
    // The same assembly as the Lambda functions; it compiles the configuration before anything is migrated, so a
    // bad transform costs no migration.
    // The outbox wake-up listener's step-aside decision, set once the capture exists (below), when it is
    // PostgreSQL's. It counts rows as each batch settles: a drain under load runs for its whole budget, and counted
    // at its end, a busy minute looked idle (an outside audit saw the listener come back every 5-8 s at full load).
    let stepAside: StepAside | undefined;
    const services = createServices(config, store, {
      ...(options.outboxTransforms ? { outboxTransforms: options.outboxTransforms } : {}),
      publisherFactories: options.publisherFactories ?? LOCAL_PUBLISHER_FACTORIES,
      logger: logger.child({ component: 'outbox' }),
      onOutboxSettled: (rows) => {
        metrics.recordSettled(rows);
        stepAside?.claimed(rows.length);
      },
    });
    opened.services = services;
    await services.ready();
    const { ingestion, brokerIngestion, relay, poller, publishers } = services;

    for (const [name, destination] of Object.entries(config.destinations)) {
      if (publishers.get(name) === undefined) {
        logger.warn('no publisher for destination in the local runtime; rows routed to it go dead', {
          destination: name,
          type: destination.type,
        });
      }
    }

    let relayLoop: DrainLoop | undefined;
    let outboxLoop: DrainLoop | undefined;
    const wakeRelay = () => relayLoop?.wake();
    const wakeOutbox = () => outboxLoop?.wake();

    const token = config.admin.token;
    const admin =
      token === undefined || token === ''
        ? undefined
        : createAdminHandler({
            store,
            token,
            onError: (error, request) =>
              logger.error('admin request failed', {
                component: 'admin',
                method: request.method,
                error: errorFields(error),
              }),
          });
    const demoReceiver = createDemoReceiver(config.destinations, logger);
    // The refused and failed requests' lines and the broker sources' dead messages, throttled (one of a kind a minute,
    // then a count): one throttle, so that the stop writes what each still counts.
    const logThrottle = createLogThrottle();
    const httpServer = createStoppableServer(
      serverLimits(config.http),
      (isStopping) =>
        createRequestHandler({
          ingestion,
          logThrottle,
          basePath: config.inbox.basePath,
          ping: () => store.ping(),
          metrics,
          logger,
          onStored: wakeRelay,
          demoReceiver,
          admin,
          metricsToken: config.admin.protectMetrics ? config.admin.token : undefined,
          onAdminWrite() {
            wakeOutbox();
            wakeRelay();
          },
          isStopping,
          isReady: () => databaseReady,
        }),
      { maxConnections: config.http.maxConnections, requestTimeoutMs: config.http.requestTimeoutMs },
    );
    const { server } = httpServer;
    opened.server = server;
    const address = await listen(server, config.http.port, config.http.host);
    const url = `http://${hostForUrl(address.address)}:${address.port}`;

    // Until the database answers (and is migrated), /health answers 503 and sources 503 with Retry-After; a
    // database that cannot be reached yet is waited for, any other failure ends the start (see waitForDatabase).
    await waitForDatabase({
      async attempt() {
        await store.ping();
        if (options.migrate ?? true) {
          const report = await store.migrate({
            // A migration that runs again (a deadlock's victim, or a lock wait behind a long transaction) says so
            // while the start waits, not only in its last error (an outside audit: 19 s of silence).
            onMigration: (progress) => {
              if (progress.phase === 'retrying') {
                logger.warn('migration waits for a lock or lost a deadlock; trying it again', {
                  migration: `${String(progress.version).padStart(4, '0')}_${progress.name}`,
                });
              }
            },
          });
          logger.info('migrations applied', {
            applied: report.applied.map((m) => `${String(m.version).padStart(4, '0')}_${m.name}`),
            version: report.current,
          });
          if (report.newer) {
            logger.warn(
              'the database schema is newer than this QueueBox; running on it (a rolling upgrade, or a rollback): finish the upgrade',
              { schemaVersion: report.newer.applied, knownVersion: report.newer.known },
            );
          }
        }
        // The install id names every delivered message (message_uid): read now, so a role that may not read it ends
        // the start instead of failing every delivery behind a /health that answers ok. A schema that is only behind
        // (migrate: false during a rolling upgrade, before `npx queuebox migrate`) starts as before: the outbox
        // claims nothing until it is migrated, and the first claim after that reads the id.
        await store.installId().catch((error: unknown) => {
          if (!isMissingInstallIdError(error)) throw error;
          logger.warn(
            'the schema is behind this QueueBox: the outbox delivers nothing until it is migrated',
            {
              error: error.message,
            },
          );
        });
        // PGlite: this process holds the data directory, so a processing row is a claim of a process that died
        // holding it (kill -9). Its lease ends now, and the first drains return it instead of after the lease.
        const released = await store.releaseClaims?.();
        if (released !== undefined && released.outbox + released.inbox > 0) {
          logger.info('claims of a previous process released', released);
        }
      },
      signal: options.signal,
      log: logger,
      fields: { url, port: address.port },
      ...options.databaseWait,
    });
    databaseReady = true;

    // The loops start once nothing can fail any more; a row stored before they run is found by their first drain.
    const relayOn = config.inbox.relay.enabled && relay.sources.length > 0;
    if (relayOn) {
      const relayLog = logger.child({ component: 'relay' });
      // A forward that waited a second or more for a key an application's open transaction held: said, at most
      // once a minute (see `createKeyWaitWarning`).
      const warnKeyWait = createKeyWaitWarning({ log: relayLog });
      relayLoop = startTableLoop<RelayDrainReport>({
        name: 'relay',
        // The shutdown's signal ends a drain that waits for rows blocked behind another relay (a crashed one's
        // lease runs for minutes) at once, instead of at its deadline, the whole drain budget later.
        drain: (deadline) => relay.drain({ deadline, signal: stopping.signal }),
        isIdle: (report) => report.stoppedFor !== 'time',
        pollIntervalMs: config.inbox.relay.pollIntervalMs,
        budgetMs: drainBudgetMs,
        signal: stopping.signal,
        log: relayLog,
        metrics,
        onDrain(report) {
          metrics.recordRelayDrain(report);
          warnKeyWait(report);
          // Not `outboxIds`: a forward whose answer was lost counts its rows, not their outbox ids.
          if (report.forwarded > 0) wakeOutbox();
        },
        summary: relayDrainSummary,
      });
    }
    // Hands over: a drain that stops for time returns while its requests run, and the next claims beside them.
    const outboxDrain = loopDrainOf(poller, {
      pollIntervalMs: config.outbox.pollIntervalMs,
      signal: stopping.signal,
    });
    outboxLoop = startTableLoop<OutboxDrainReport>({
      name: 'outbox',
      drain: outboxDrain.drain,
      finish: outboxDrain.finish,
      isIdle: (report) => report.stoppedFor !== 'time',
      isFinished: (report) => report.stoppedFor === 'closed',
      pollIntervalMs: config.outbox.pollIntervalMs,
      budgetMs: drainBudgetMs,
      signal: stopping.signal,
      log: logger.child({ component: 'outbox' }),
      metrics,
      onDrain: (report) => metrics.recordOutboxDrain(report),
      wakeDrain: () => poller.wake?.(),
      summary: (report) =>
        report.claimed + report.reclaimed.returned + report.reclaimed.dead > 0
          ? {
              claimed: report.claimed,
              sent: report.sent,
              retried: report.retried,
              dead: report.dead,
              released: report.released,
              stale: report.stale,
              stoppedFor: report.stoppedFor,
            }
          : undefined,
    });

    // Wake-ups only cut latency: the loops above already poll, so the capture starts in the background and its
    // troubles are logged, never fatal.
    const capture = createWakeUpCapture({
      enabled: options.wakeUps ?? true,
      database: config.database,
      pglite: local.pglite,
      logger,
      onOutbox: () => {
        stepAside?.notified();
        wakeOutbox();
      },
      onInbox: wakeRelay,
      onListeningChange: (on) => metrics.recordWakeUpListening(on),
    });
    metrics.recordWakeUpListening(false);
    metrics.recordWakeUpAside(false);
    const { want, waitingCommits, outboxInserts } = capture;
    if (want !== undefined && options.wakeUpStepAside !== false) {
      const wakeUpLog = logger.child({ component: 'wake-ups' });
      stepAside = createStepAside({
        ...options.wakeUpStepAside,
        want: (wanted) => want.call(capture, 'outbox', wanted),
        ...(waitingCommits === undefined ? {} : { waitingCommits: () => waitingCommits.call(capture) }),
        ...(outboxInserts === undefined ? {} : { outboxInserts: () => outboxInserts.call(capture) }),
        wake: wakeOutbox,
        onChange(aside, perSecond, waitingShare) {
          metrics.recordWakeUpAside(aside);
          if (aside) {
            wakeUpLog.info(
              'wake-ups: outbox listener steps aside under load; the drain polls every few ms and enqueuing commits no longer wait for each other',
              { notificationsPerSecond: perSecond, commitsWaitingShare: waitingShare },
            );
          } else {
            wakeUpLog.info('wake-ups: outbox listener back (load fell)', { claimedPerSecond: perSecond });
          }
        },
        onError(error) {
          wakeUpLog.warn('wake-ups: could not take or give back the outbox wake-up lock', {
            error: error instanceof Error ? error : new Error(String(error)),
          });
        },
      });
    }
    const captureStarted = capture.start().then((on) => {
      if (capture.kind === 'pglite') {
        metrics.recordWakeUpListening(on);
        if (on) logger.info('wake-ups: listening for inserts (PGlite)', { component: 'wake-ups' });
      }
    });

    const consumers: BrokerConsumers | undefined =
      options.brokerConsumers === false
        ? undefined
        : startBrokerConsumers({
            logThrottle,
            sources: config.sources,
            ingestion: brokerIngestion,
            logger,
            installId: () => store.installId(),
            onIngested(source, result) {
              metrics.recordBrokerIngestion(source, result);
              if (result.wakeRelay) wakeRelay();
            },
            onFailures: (source, failures) => metrics.recordBrokerConsumerFailures(source, failures),
          });

    const maintenance: Maintenance = startMaintenance({
      admin: store.admin,
      retention: config.retention,
      metrics,
      logger,
      signal: stopping.signal,
      ...(options.statsIntervalMs === undefined ? {} : { statsIntervalMs: options.statsIntervalMs }),
      ...(options.retentionIntervalMs === undefined
        ? {}
        : { retentionIntervalMs: options.retentionIntervalMs }),
    });

    logger.info('listening', {
      url,
      host: address.address,
      port: address.port,
      inbox: ingestion.routes.map((r) => ({ source: r.source, path: r.path })),
      consumers: consumers?.sources ?? [],
      relay: relayOn ? relay.sources : 'off',
      destinations: Object.keys(config.destinations),
      wakeUps: capture.kind,
      admin: admin ? `${url}/admin` : 'off (set admin.token)',
      ...(demoReceiver ? { demoReceiver: `${url}/_demo/receiver` } : {}),
    });

    let stopped: Promise<boolean> | undefined;
    const stop = (reason = 'stop') => {
      stopped ??= (async () => {
        logger.info('shutting down', { reason, timeoutMs: shutdownTimeoutMs });
        // Consumers first: no new broker delivery is taken, the ones in hand are stored and acknowledged while the
        // store is still open. Then no new claim; deliveries in flight finish and settle.
        const consumersStopped = consumers?.stop();
        stopping.abort();
        // The poller's settles of delivered rows are tried again through an outage until their batch's deadline,
        // which comes before shutdownTimeoutMs; past the timeout they are given up at once.
        const pollerGiveUp = new AbortController();
        const finished = await withTimeout(
          Promise.all([
            consumersStopped,
            httpServer.close(),
            relayLoop?.done,
            outboxLoop?.done,
            poller.close({ signal: pollerGiveUp.signal }),
            maintenance.done,
            captureStarted.then(() => {
              stepAside?.close();
              return capture.close();
            }),
          ]),
          shutdownTimeoutMs,
        );
        logThrottle.flush();
        if (!finished.done) {
          pollerGiveUp.abort();
          logger.warn(
            'shutdown timeout: closing with work in progress; its claims return when their lease expires',
            {
              timeoutMs: shutdownTimeoutMs,
            },
          );
          server.closeAllConnections();
        }
        // The publishers close first (a delivery still in flight finishes and settles while the store is open), then
        // the store, within shutdownTimeoutMs again (the store at least 1 s of it): a close that hangs (a broker
        // or a database connection stuck on a server that went silent) must not keep the stop from ending. The
        // store's close also releases the PGlite data directory's lock.
        const closeBy = Date.now() + shutdownTimeoutMs;
        const closeStep = async (what: 'publishers' | 'store', close: () => Promise<void>, ms: number) => {
          const step = await withTimeout(
            close().catch((error: unknown) => {
              logger.error(`closing the ${what} failed`, { error: errorFields(error) });
            }),
            ms,
          );
          return step.done ? [] : [what];
        };
        const notClosed = [
          ...(await closeStep('publishers', () => publishers.close(), shutdownTimeoutMs)),
          ...(await closeStep('store', () => store.close(), Math.max(1_000, closeBy - Date.now()))),
        ];
        if (notClosed.length > 0) {
          logger.warn(
            `shutdown timeout: the ${notClosed.join(' and the ')} did not close in time; stopping anyway`,
            {
              timeoutMs: shutdownTimeoutMs,
              notClosed,
            },
          );
        }
        // Delivered rows whose settle failed for good (an outage through the stop) are delivered again after their
        // lease: not a clean stop (the poller logged a WARN with the counts).
        const left = poller.closeReport?.() ?? { unsettled: 0, unsettledSent: 0 };
        const clean = finished.done && notClosed.length === 0 && left.unsettled === 0;
        logger.info('stopped', { clean, ...(left.unsettled > 0 ? left : {}) });
        return clean;
      })();
      return stopped;
    };

    return {
      url,
      port: address.port,
      host: address.address,
      store,
      metrics,
      capture,
      wakeRelay,
      wakeOutbox,
      stop,
    };
  } catch (error) {
    stopping.abort();
    opened.server?.close();
    await opened.services?.close().catch(() => {});
    const storeClosed = opened.store?.close().catch(() => {});
    // An abandoned start does not wait out a connection attempt in progress (up to database.connectTimeoutMs).
    await (options.signal?.aborted
      ? withTimeout(Promise.resolve(storeClosed), ABANDONED_CLOSE_MS)
      : storeClosed);
    throw error;
  }
}
