/**
 * The preamble of an integration test file that needs services: find each one, and when any is missing, one
 * reason for the whole file, printed once, for `describe.skipIf(skipReason)`.
 */
import {
  findKafka,
  findNats,
  findPostgres,
  findRabbitMq,
  findSqlServer,
  findSqs,
  type ServiceLocation,
} from './services.ts';

/** What a test file can need. `postgres` means a PostgreSQL server: the PGlite fallback does not count. */
export type Service = 'postgres' | 'rabbitmq' | 'nats' | 'kafka' | 'sqs' | 'sqlserver';

/** What `requireServices` answers. */
export interface Requirements<S extends Service> {
  /** Why the file's tests are skipped (every missing service, with the finder's reason), or undefined. */
  readonly skipReason: string | undefined;
  /** Whether every service was found (`skipReason === undefined`). */
  readonly available: boolean;
  /** The connection string of each service; `''` for one that is missing (the tests are skipped then). */
  readonly url: Readonly<Record<S, string>>;
  /** Where each service was found (`local broker at 127.0.0.1:5672 (…)`, for test titles); `''` for a missing one. */
  readonly via: Readonly<Record<S, string>>;
}

const NAMES: Record<Service, string> = {
  postgres: 'PostgreSQL server',
  rabbitmq: 'RabbitMQ',
  nats: 'NATS',
  kafka: 'Kafka',
  sqs: 'SQS endpoint',
  sqlserver: 'SQL Server',
};

async function locate(service: Service): Promise<ServiceLocation> {
  switch (service) {
    case 'postgres': {
      const postgres = await findPostgres();
      // The embedded PGlite answers no LISTEN across processes, no TCP, no outage: these files need a server.
      return postgres.provider === 'postgres' ? postgres : { available: false, reason: postgres.via };
    }
    case 'rabbitmq':
      return findRabbitMq();
    case 'nats':
      return findNats();
    case 'kafka':
      return findKafka();
    case 'sqs':
      return findSqs();
    case 'sqlserver':
      return findSqlServer();
  }
}

/**
 * Finds `services` (each finder once per process, see services.ts) and, when any is missing, prints
 * `[<label>] skipped: no RabbitMQ (<reason>)` (every missing one, joined by `; `) once.
 *
 * ```ts
 * const needs = await requireServices('rabbitmq publisher', ['rabbitmq']);
 * describe.skipIf(needs.skipReason)('createRabbitMqPublisher', () => { … needs.url.rabbitmq … });
 * ```
 */
export async function requireServices<const S extends Service>(
  label: string,
  services: readonly S[],
): Promise<Requirements<S>> {
  const located = await Promise.all(services.map(async (s) => [s, await locate(s)] as const));
  const url = {} as Record<S, string>;
  const via = {} as Record<S, string>;
  const missing: string[] = [];
  for (const [service, location] of located) {
    url[service] = location.available ? location.url : '';
    via[service] = location.available ? location.via : '';
    if (!location.available) missing.push(`no ${NAMES[service]} (${location.reason})`);
  }
  const skipReason = missing.length === 0 ? undefined : missing.join('; ');
  if (skipReason !== undefined) console.info(`[${label}] skipped: ${skipReason}`);
  return { skipReason, available: skipReason === undefined, url, via };
}
