/**
 * Finds the real services integration tests talk to, once per test process, and says which one it used and why.
 *
 * Order for every service: the `QUEUEBOX_TEST_*` environment variable, then the usual local port (checked with a
 * real protocol exchange, not only a TCP connect), then a container started with testcontainers when a container
 * runtime exists, else "unavailable" with the reason (PostgreSQL falls back to the embedded PGlite instead).
 * Containers started here are stopped when the process exits; testcontainers' Ryuk reaper removes them if the
 * process is killed.
 */
import { connect } from 'node:net';
import type { StartedTestContainer } from 'testcontainers';
import { LOCAL_POSTGRES_URL } from './postgres-url.ts';

/** A service the tests can use. */
export interface FoundService {
  readonly available: true;
  /** Connection string: a URL, a comma-separated broker list (Kafka), or for SQL Server a URL or an ADO.NET string. */
  readonly url: string;
  /** Which source was used and why, e.g. `QUEUEBOX_TEST_POSTGRES_URL` or `local server at 127.0.0.1:5432`. */
  readonly via: string;
}

/** A service the tests cannot use here, and why. */
export interface MissingService {
  readonly available: false;
  readonly reason: string;
}

/** The answer of every finder. */
export type ServiceLocation = FoundService | MissingService;

/**
 * PostgreSQL is always available: a server, or the embedded PGlite as the last resort. `provider` tells which;
 * for `pglite` the url is `memory://` (an in-memory database, PGlite's own notation).
 */
export type PostgresLocation = FoundService & { readonly provider: 'postgres' | 'pglite' };

/** How long a local probe waits before it calls a port dead. */
const PROBE_TIMEOUT_MS = 1_500;

/** Local defaults (the services of a developer machine and of CI). */
const LOCAL = {
  postgres: { host: '127.0.0.1', port: 5432, url: LOCAL_POSTGRES_URL },
  amqp: { host: '127.0.0.1', port: 5672, url: 'amqp://guest:guest@127.0.0.1:5672' },
  nats: { host: '127.0.0.1', port: 4222, url: 'nats://127.0.0.1:4222' },
  kafka: { host: '127.0.0.1', port: 9092, url: '127.0.0.1:9092' },
  sqs: { host: '127.0.0.1', port: 9324, url: 'http://127.0.0.1:9324' },
} as const;

/** Container images used when nothing else answers. */
export const TEST_IMAGES = {
  postgres: 'postgres:16',
  rabbitmq: 'rabbitmq:4',
  nats: 'nats:2',
  sqlserver: 'mcr.microsoft.com/mssql/server:2022-latest',
} as const;

/** The `sa` password of the SQL Server test container (a throwaway container, never a real server). */
const SQLSERVER_CONTAINER_PASSWORD = 'QueueBox-Test-1';

const started: StartedTestContainer[] = [];
const cache = new Map<string, Promise<ServiceLocation>>();

function once<T extends ServiceLocation>(name: string, find: () => Promise<T>): Promise<T> {
  let pending = cache.get(name) as Promise<T> | undefined;
  if (!pending) {
    pending = find().then(
      (location) => {
        console.info(
          location.available
            ? `[test services] ${name}: ${location.via}`
            : `[test services] ${name}: unavailable — ${location.reason}`,
        );
        return location;
      },
      (error: unknown) => {
        const location: MissingService = {
          available: false,
          reason: `finding it failed: ${messageOf(error)}`,
        };
        console.info(`[test services] ${name}: unavailable — ${location.reason}`);
        return location as T;
      },
    );
    cache.set(name, pending);
  }
  return pending;
}

/** PostgreSQL: `QUEUEBOX_TEST_POSTGRES_URL`, else 127.0.0.1:5432, else a postgres:16 container, else PGlite. */
export function findPostgres(): Promise<PostgresLocation> {
  return once('PostgreSQL', async (): Promise<PostgresLocation> => {
    const fromEnv = process.env.QUEUEBOX_TEST_POSTGRES_URL;
    if (fromEnv)
      return { available: true, provider: 'postgres', url: fromEnv, via: 'QUEUEBOX_TEST_POSTGRES_URL' };
    const local = await probePostgres(LOCAL.postgres.url);
    if (local === true) {
      return {
        available: true,
        provider: 'postgres',
        url: LOCAL.postgres.url,
        via: `local server at ${LOCAL.postgres.host}:${LOCAL.postgres.port} (select 1 answered)`,
      };
    }
    const runtime = await containerRuntime();
    let container: string;
    if (runtime.available) {
      try {
        const { GenericContainer, Wait } = await import('testcontainers');
        const started = await track(
          new GenericContainer(TEST_IMAGES.postgres)
            .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust', POSTGRES_DB: 'test' })
            .withExposedPorts(5432)
            // The entrypoint starts a temporary server first; the second message is the real one.
            .withWaitStrategy(Wait.forLogMessage(/database system is ready to accept connections/, 2))
            .start(),
        );
        return {
          available: true,
          provider: 'postgres',
          url: `postgres://postgres@${started.getHost()}:${started.getMappedPort(5432)}/test`,
          via: `testcontainers ${TEST_IMAGES.postgres} (no server at 127.0.0.1:5432: ${local})`,
        };
      } catch (error) {
        container = `the ${TEST_IMAGES.postgres} container did not start: ${messageOf(error)}`;
      }
    } else {
      container = `no container runtime: ${runtime.reason}`;
    }
    // PostgreSQL never comes back unavailable: PGlite is the last resort, and the line printed says why.
    return {
      available: true,
      provider: 'pglite',
      url: 'memory://',
      via: `embedded PGlite in memory (no server at 127.0.0.1:5432: ${local}; ${container})`,
    };
  });
}

export function findRabbitMq(): Promise<ServiceLocation> {
  return once('RabbitMQ', async () => {
    const fromEnv = process.env.QUEUEBOX_TEST_AMQP_URL;
    if (fromEnv) return found(fromEnv, 'QUEUEBOX_TEST_AMQP_URL');
    const local = await probeAmqp(LOCAL.amqp.host, LOCAL.amqp.port);
    if (local === true) {
      return found(
        LOCAL.amqp.url,
        `local broker at ${LOCAL.amqp.host}:${LOCAL.amqp.port} (AMQP handshake answered)`,
      );
    }
    const runtime = await containerRuntime();
    if (!runtime.available) {
      return missing(`no broker at 127.0.0.1:5672 (${local}) and no container runtime: ${runtime.reason}`);
    }
    const { GenericContainer, Wait } = await import('testcontainers');
    const container = await track(
      new GenericContainer(TEST_IMAGES.rabbitmq)
        .withExposedPorts(5672)
        .withWaitStrategy(Wait.forLogMessage(/Server startup complete/))
        .start(),
    );
    return found(
      `amqp://guest:guest@${container.getHost()}:${container.getMappedPort(5672)}`,
      `testcontainers ${TEST_IMAGES.rabbitmq} (no broker at 127.0.0.1:5672: ${local})`,
    );
  });
}

/** NATS with JetStream: `QUEUEBOX_TEST_NATS_URL`, else 127.0.0.1:4222, else a `nats -js` container. */
export function findNats(): Promise<ServiceLocation> {
  return once('NATS', async () => {
    const fromEnv = process.env.QUEUEBOX_TEST_NATS_URL;
    if (fromEnv) return found(fromEnv, 'QUEUEBOX_TEST_NATS_URL');
    const local = await probeNats(LOCAL.nats.host, LOCAL.nats.port);
    if (local === true) {
      return found(
        LOCAL.nats.url,
        `local server at ${LOCAL.nats.host}:${LOCAL.nats.port} (INFO greeting received)`,
      );
    }
    const runtime = await containerRuntime();
    if (!runtime.available) {
      return missing(`no server at 127.0.0.1:4222 (${local}) and no container runtime: ${runtime.reason}`);
    }
    const { GenericContainer, Wait } = await import('testcontainers');
    const container = await track(
      new GenericContainer(TEST_IMAGES.nats)
        .withCommand(['-js'])
        .withExposedPorts(4222)
        .withWaitStrategy(Wait.forLogMessage(/Server is ready/))
        .start(),
    );
    return found(
      `nats://${container.getHost()}:${container.getMappedPort(4222)}`,
      `testcontainers ${TEST_IMAGES.nats} -js (no server at 127.0.0.1:4222: ${local})`,
    );
  });
}

/**
 * Kafka: `QUEUEBOX_TEST_KAFKA_BROKERS` (comma-separated host:port list), else 127.0.0.1:9092 when it accepts a
 * TCP connection, else unavailable (no container fallback; `bash scripts/kafka.sh start` runs a local broker).
 */
export function findKafka(): Promise<ServiceLocation> {
  return once('Kafka', async () => {
    const fromEnv = process.env.QUEUEBOX_TEST_KAFKA_BROKERS;
    if (fromEnv) return found(fromEnv, 'QUEUEBOX_TEST_KAFKA_BROKERS');
    const local = await probeTcp(LOCAL.kafka.host, LOCAL.kafka.port);
    if (local === true) {
      return found(LOCAL.kafka.url, `local broker at ${LOCAL.kafka.host}:${LOCAL.kafka.port} (TCP connect)`);
    }
    return missing(
      `QUEUEBOX_TEST_KAFKA_BROKERS is not set and nothing listens on 127.0.0.1:9092 (${local}); bash scripts/kafka.sh start runs one`,
    );
  });
}

/**
 * An SQS-compatible endpoint (ElasticMQ): `QUEUEBOX_TEST_SQS_ENDPOINT`, else 127.0.0.1:9324 when it answers an
 * SQS `ListQueues` call, else unavailable (no container fallback; `bash scripts/elasticmq.sh start` runs one).
 */
export function findSqs(): Promise<ServiceLocation> {
  return once('SQS', async () => {
    const fromEnv = process.env.QUEUEBOX_TEST_SQS_ENDPOINT;
    if (fromEnv) return found(fromEnv, 'QUEUEBOX_TEST_SQS_ENDPOINT');
    const local = await probeSqs(LOCAL.sqs.url);
    if (local === true) {
      return found(
        LOCAL.sqs.url,
        `local ElasticMQ at ${LOCAL.sqs.host}:${LOCAL.sqs.port} (ListQueues answered)`,
      );
    }
    return missing(
      `QUEUEBOX_TEST_SQS_ENDPOINT is not set and no SQS endpoint answers on 127.0.0.1:9324 (${local}); bash scripts/elasticmq.sh start runs one`,
    );
  });
}

/**
 * SQL Server: `QUEUEBOX_TEST_SQLSERVER_URL` (a `sqlserver://` URL or an ADO.NET connection string), else a
 * SQL Server 2022 container when a container runtime exists (database `test` created in it), else unavailable
 * with the reason `no container runtime: <error>`.
 */
export function findSqlServer(): Promise<ServiceLocation> {
  return once('SQL Server', async () => {
    const fromEnv = process.env.QUEUEBOX_TEST_SQLSERVER_URL;
    if (fromEnv) return found(fromEnv, 'QUEUEBOX_TEST_SQLSERVER_URL');
    const runtime = await containerRuntime();
    if (!runtime.available) return missing(`no container runtime: ${runtime.reason}`);
    const { GenericContainer, Wait } = await import('testcontainers');
    const container = await track(
      new GenericContainer(TEST_IMAGES.sqlserver)
        .withEnvironment({ ACCEPT_EULA: 'Y', MSSQL_SA_PASSWORD: SQLSERVER_CONTAINER_PASSWORD })
        .withExposedPorts(1433)
        .withWaitStrategy(Wait.forLogMessage(/SQL Server is now ready for client connections/))
        .withStartupTimeout(180_000)
        .start(),
    );
    const server = `Server=${container.getHost()},${container.getMappedPort(1433)};User Id=sa;Password=${SQLSERVER_CONTAINER_PASSWORD};Encrypt=true;TrustServerCertificate=true`;
    await createSqlServerDatabase(`${server};Database=master`, 'test');
    return found(
      `${server};Database=test`,
      `testcontainers ${TEST_IMAGES.sqlserver} (QUEUEBOX_TEST_SQLSERVER_URL not set)`,
    );
  });
}

/** Whether testcontainers can reach a container runtime; asked once per process. */
export function containerRuntime(): Promise<ServiceLocation> {
  let pending = cache.get('container runtime');
  if (!pending) {
    pending = (async (): Promise<ServiceLocation> => {
      try {
        const { getContainerRuntimeClient } = await import('testcontainers');
        const client = await getContainerRuntimeClient();
        return found(client.info.containerRuntime.host, 'testcontainers found a container runtime');
      } catch (error) {
        return missing(messageOf(error));
      }
    })();
    cache.set('container runtime', pending);
  }
  return pending;
}

/** Stops the containers this process started. Runs by itself before exit; exported for a global teardown. */
export async function stopStartedContainers(): Promise<void> {
  const containers = started.splice(0);
  await Promise.allSettled(containers.map((c) => c.stop()));
}

let exitHookInstalled = false;

async function track(starting: Promise<StartedTestContainer>): Promise<StartedTestContainer> {
  const container = await starting;
  started.push(container);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    // `beforeExit` may await; on a hard exit testcontainers' Ryuk reaper removes the containers instead.
    process.once('beforeExit', () => {
      void stopStartedContainers();
    });
  }
  return container;
}

function found(url: string, via: string): FoundService {
  return { available: true, url, via };
}

function missing(reason: string): MissingService {
  return { available: false, reason };
}

function messageOf(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) {
    return error.errors.map(messageOf).join('; ');
  }
  if (error instanceof Error) return error.message || error.name;
  return String(error);
}

/** Connects, sends `select 1`, and answers true or the reason it failed. */
async function probePostgres(url: string): Promise<true | string> {
  const tcp = await probeTcp(LOCAL.postgres.host, LOCAL.postgres.port);
  if (tcp !== true) return tcp;
  const { default: pg } = await import('pg');
  const client = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: PROBE_TIMEOUT_MS,
    query_timeout: PROBE_TIMEOUT_MS,
  });
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch (error) {
    return `select 1 failed: ${messageOf(error)}`;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Opens a TCP connection, writes `hello` when given, and hands the first bytes received to `check`. */
function probeSocket(
  host: string,
  port: number,
  hello?: Buffer,
  check?: (first: Buffer) => true | string,
): Promise<true | string> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const finish = (result: true | string) => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(PROBE_TIMEOUT_MS, () => finish(`no answer within ${PROBE_TIMEOUT_MS} ms`));
    socket.once('error', (error) => finish(messageOf(error)));
    socket.once('connect', () => {
      if (!check) return finish(true);
      if (hello) socket.write(hello);
    });
    if (check) socket.once('data', (data: Buffer) => finish(check(data)));
  });
}

function probeTcp(host: string, port: number): Promise<true | string> {
  return probeSocket(host, port);
}

/** AMQP 0-9-1: after the protocol header the broker sends a method frame (type 1), Connection.Start. */
function probeAmqp(host: string, port: number): Promise<true | string> {
  return probeSocket(host, port, Buffer.from([0x41, 0x4d, 0x51, 0x50, 0, 0, 9, 1]), (first) =>
    first[0] === 1 ? true : `not an AMQP 0-9-1 broker (first byte ${first[0]})`,
  );
}

/** A NATS server greets every client with `INFO {...}`. */
function probeNats(host: string, port: number): Promise<true | string> {
  return probeSocket(host, port, undefined, (first) =>
    first.toString('latin1').startsWith('INFO ') ? true : 'no NATS INFO greeting',
  );
}

async function createSqlServerDatabase(masterConnection: string, database: string): Promise<void> {
  const { default: mssql } = await import('mssql');
  const pool = await new mssql.ConnectionPool(masterConnection).connect();
  try {
    await pool
      .request()
      .input('name', mssql.NVarChar(128), database)
      .query(`IF DB_ID(@name) IS NULL EXEC(N'CREATE DATABASE ' + QUOTENAME(@name))`);
  } finally {
    await pool.close();
  }
}

/** Whether an SQS endpoint answers a query-protocol `ListQueues` call with a `ListQueuesResponse`. */
async function probeSqs(url: string): Promise<true | string> {
  try {
    const response = await fetch(`${url}/?Action=ListQueues`, {
      signal: AbortSignal.timeout(PROBE_TIMEOUT_MS),
    });
    const text = await response.text();
    return text.includes('ListQueuesResponse')
      ? true
      : `HTTP ${response.status} without a ListQueuesResponse`;
  } catch (error) {
    return messageOf(error);
  }
}
