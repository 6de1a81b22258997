/**
 * What the Lambda handler tests share: real-shaped events (API Gateway HTTP API v2, EventBridge, infra's tick
 * events), a Lambda context whose remaining time runs down for real, a temporary configuration file, the EMF lines
 * a handler printed, and an in-memory recorder of wake-up invokes (the Lambda API is not our persistence).
 */
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { loadConfig } from '@queuebox/config';
import type { KafkaLambdaEvent } from '@queuebox/kafka';
import type { AmazonMqRabbitEvent } from '@queuebox/rabbitmq';
import { createServiceCache, type ServiceCache, type ServiceCacheOptions } from '@queuebox/use-cases';
import type { FunctionInvoker } from '@queuebox/wake-ups';
import type { APIGatewayProxyEventV2, Context, ScheduledEvent } from 'aws-lambda';
import { afterAll, beforeAll } from 'vitest';
import { Logger, Metrics, type ShellOptions } from '../../functions/lambda-shell/lambda.ts';
import { createHandler as createMigrate } from '../../functions/migrate.ts';
import { cleanup, TEST_SECRET, tempDir } from '../local/support.ts';

/** Options of {@link anApiGatewayEvent}. */
export interface ApiGatewayEventOptions {
  readonly method?: string;
  /** Default `/inbox/demo`. */
  readonly path?: string;
  /** Header names as given (any letter case). */
  readonly headers?: Readonly<Record<string, string>>;
  /** `cookies` of payload format 2.0 (API Gateway moves the Cookie header there). */
  readonly cookies?: readonly string[];
  readonly body?: string;
  /** Send the body base64-encoded with `isBase64Encoded: true`, as API Gateway does for binary media. Default true. */
  readonly base64?: boolean;
  /** Default `$default`; a named stage prefixes `rawPath`. */
  readonly stage?: string;
  /**
   * The query string without `?`, as `rawQueryString`; `queryStringParameters` is derived as API Gateway does
   * (payload 2.0: a repeated name's values joined with commas). Default none.
   */
  readonly query?: string;
}

/** `queryStringParameters` of payload format 2.0: each name once, repeated values joined with commas. */
function commaJoinedQuery(query: string): Record<string, string> {
  const joined: Record<string, string> = {};
  for (const [name, value] of new URLSearchParams(query)) {
    joined[name] = joined[name] === undefined ? value : `${joined[name]},${value}`;
  }
  return joined;
}

/** An API Gateway HTTP API event, payload format 2.0, as Lambda receives it. */
export function anApiGatewayEvent(options: ApiGatewayEventOptions = {}): APIGatewayProxyEventV2 {
  const method = options.method ?? 'POST';
  const path = options.path ?? '/inbox/demo';
  const stage = options.stage ?? '$default';
  const rawPath = stage === '$default' ? path : `/${stage}${path}`;
  const base64 = options.base64 ?? true;
  const now = new Date();
  const source = path.split('/').pop() ?? '';
  return {
    version: '2.0',
    routeKey: `${method} /inbox/{source}`,
    rawPath,
    rawQueryString: options.query ?? '',
    ...(options.query ? { queryStringParameters: commaJoinedQuery(options.query) } : {}),
    ...(options.cookies ? { cookies: [...options.cookies] } : {}),
    headers: {
      'content-length': String(Buffer.byteLength(options.body ?? '')),
      host: 'abc123.execute-api.eu-west-1.amazonaws.com',
      'user-agent': 'Stripe/1.0 (+https://stripe.com/docs/webhooks)',
      'x-amzn-trace-id': `Root=1-${Math.floor(now.getTime() / 1000).toString(16)}-${randomUUID().replace(/-/g, '').slice(0, 24)}`,
      'x-forwarded-for': '203.0.113.7',
      'x-forwarded-port': '443',
      'x-forwarded-proto': 'https',
      ...options.headers,
    },
    pathParameters: { source },
    requestContext: {
      accountId: '123456789012',
      apiId: 'abc123',
      domainName: 'abc123.execute-api.eu-west-1.amazonaws.com',
      domainPrefix: 'abc123',
      http: {
        method,
        path: rawPath,
        protocol: 'HTTP/1.1',
        sourceIp: '203.0.113.7',
        userAgent: 'Stripe/1.0 (+https://stripe.com/docs/webhooks)',
      },
      requestId: randomUUID(),
      routeKey: `${method} /inbox/{source}`,
      stage,
      time: now.toUTCString(),
      timeEpoch: now.getTime(),
    },
    ...(options.body === undefined
      ? {}
      : { body: base64 ? Buffer.from(options.body, 'utf8').toString('base64') : options.body }),
    isBase64Encoded: base64 && options.body !== undefined,
  };
}

/** The EventBridge "Scheduled Event" envelope of a rule with a rate expression. */
export function aScheduledEvent(): ScheduledEvent {
  return {
    version: '0',
    id: randomUUID(),
    'detail-type': 'Scheduled Event',
    source: 'aws.events',
    account: '123456789012',
    time: new Date().toISOString(),
    region: 'eu-west-1',
    resources: ['arn:aws:events:eu-west-1:123456789012:rule/queuebox-dev-OutboxTick'],
    detail: {},
  };
}

/** infra's tick event (TickEvent of @queuebox/deploy-contract): what its schedules send as the rule's input. */
export function aTickEvent(trigger: 'schedule' | 'wakeup' | 'deferred' = 'schedule'): {
  trigger: typeof trigger;
} {
  return { trigger };
}

/** A Lambda context whose `getRemainingTimeInMillis` counts down from `remainingMs` (default 60000) in real time. */
export function aLambdaContext(
  options: { readonly remainingMs?: number; readonly functionName?: string } = {},
): Context {
  const functionName = options.functionName ?? 'queuebox-test-Function';
  const deadline = Date.now() + (options.remainingMs ?? 60_000);
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:eu-west-1:123456789012:function:${functionName}`,
    memoryLimitInMB: '512',
    awsRequestId: randomUUID(),
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: `2026/11/30/[$LATEST]${randomUUID().replace(/-/g, '')}`,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/** One recorded invoke. */
export interface RecordedInvoke {
  readonly functionName: string;
  readonly payload: unknown;
}

/** An in-memory {@link FunctionInvoker} that records every wake-up. */
export function anInvokeRecorder(): FunctionInvoker & { readonly invokes: RecordedInvoke[] } {
  const invokes: RecordedInvoke[] = [];
  return {
    invokes,
    async invokeAsync(functionName, payload) {
      invokes.push({ functionName, payload });
    },
  };
}

/** A clock the test moves by hand. */
export function aManualClock(start = Date.now()): { now(): number; advance(ms: number): void } {
  let now = start;
  return {
    now: () => now,
    advance(ms) {
      now += ms;
    },
  };
}

/** The test configuration: one Standard Webhooks source `demo`, one signed HTTP destination, one route. */
export function functionConfigYaml(options: {
  readonly databaseUrl: string;
  readonly schema: string;
  readonly receiverUrl: string;
}): string {
  return `database:
  url: ${JSON.stringify(options.databaseUrl)}
  schema: ${options.schema}
  poolSize: 2
outbox:
  backoff: { baseMs: 100, maxMs: 1000 }
sources:
  demo:
    type: http
    auth: { scheme: standard-webhooks, secrets: [${TEST_SECRET}] }
    eventTypePath: $.type
    aggregateIdPath: $.data.id
    topic: "demo.{{ eventType }}"
destinations:
  receiver:
    type: http
    url: ${options.receiverUrl}
    timeoutMs: 15000
    signing: { scheme: standard-webhooks, secrets: [${TEST_SECRET}] }
routes:
  - { match: "demo.#", destination: receiver }
logLevel: debug
`;
}

/** Writes `yaml` to a temporary queuebox.yaml and answers its path (removed by test/local/support.ts `cleanup`). */
export async function writeConfigFile(yaml: string): Promise<string> {
  const file = join(await tempDir('queuebox-functions-'), 'queuebox.yaml');
  await writeFile(file, yaml);
  return file;
}

/** Shell options of a test handler, with the caches its handlers built (close them after the file). */
export type TestShell = ShellOptions & {
  /** Every cache a handler built with these options, in order. */
  readonly caches: ServiceCache[];
  /** The last one. */
  readonly cache: ServiceCache;
};

/**
 * Shell options for a test handler: the configuration read the way a function reads it, from the file that
 * `QUEUEBOX_CONFIG` names, in an environment holding only what infra sets (the developer's own `QUEUEBOX_*`
 * variables cannot leak in); the store opened by `openStore` (default `@queuebox/store`'s); Powertools Logger silent
 * unless `QUEUEBOX_TEST_LOGS` is set; and the given extras.
 */
export function testShell(
  configFile: string,
  extra: ShellOptions & { readonly openStore?: ServiceCacheOptions['openStore'] } = {},
): TestShell {
  const env = { QUEUEBOX_CONFIG: configFile };
  const { openStore, ...rest } = extra;
  const caches: ServiceCache[] = [];
  return {
    logger: new Logger({
      serviceName: 'queuebox-test',
      logLevel: process.env.QUEUEBOX_TEST_LOGS ? 'DEBUG' : 'SILENT',
    }),
    metrics: new Metrics({ namespace: 'QueueBox', serviceName: 'queuebox-test' }),
    createCache: (options) => {
      const cache = createServiceCache({
        ...options,
        loadConfig: () => loadConfig({ env }),
        ...(openStore ? { openStore } : {}),
      });
      caches.push(cache);
      return cache;
    },
    env: {},
    ...rest,
    caches,
    get cache() {
      const last = caches.at(-1);
      if (!last) throw new Error('no handler was created with these options yet');
      return last;
    },
  };
}

/**
 * The set-up of one describe block of function tests on one schema: before its tests, a configuration on PostgreSQL
 * `databaseUrl` / `schema` (see `functionConfigYaml`; `receiverUrl` defaults to a port nothing answers, for tests that
 * deliver nothing), or the text `yaml()` gives, written and migrated by the migrate function; after them, the caches
 * of every shell made with `shell` (and of the migration's) closed, and the temporary files removed (`cleanup`).
 * `configFile()` is the configuration's path once the block's `beforeAll` ran.
 */
export function useMigratedFunctions(options: {
  readonly databaseUrl: string;
  readonly schema: { readonly name: string };
  readonly receiverUrl?: string;
  readonly yaml?: () => string;
}): {
  configFile(): string;
  shell(file: string, extra?: Parameters<typeof testShell>[1]): TestShell;
} {
  const shells: TestShell[] = [];
  let configFile: string | undefined;
  const shell = (file: string, extra: Parameters<typeof testShell>[1] = {}) => {
    const made = testShell(file, extra);
    shells.push(made);
    return made;
  };
  beforeAll(async () => {
    configFile = await writeConfigFile(
      options.yaml?.() ??
        functionConfigYaml({
          databaseUrl: options.databaseUrl,
          schema: options.schema.name,
          receiverUrl: options.receiverUrl ?? 'http://127.0.0.1:1/unused',
        }),
    );
    await createMigrate(shell(configFile))(undefined, aLambdaContext());
  });
  afterAll(async () => {
    for (const made of shells) for (const cache of made.caches) await cache.close();
    await cleanup();
  });
  return {
    configFile: () => {
      if (configFile === undefined)
        throw new Error('useMigratedFunctions: configFile() before beforeAll ran');
      return configFile;
    },
    shell,
  };
}

/**
 * A configuration with one source per broker entry point: `clicks` (Kafka, the event type from its `event-type`
 * header), `orders-in` (AMQP, topic `orders.{{ eventType }}` from the message's type) and `audit` (a NATS pull source
 * on `stream`, subjects `<subjectPrefix>.>`).
 */
export function brokerSourcesYaml(options: {
  readonly databaseUrl: string;
  readonly schema: string;
  readonly natsUrl: string;
  readonly stream: string;
  readonly subjectPrefix: string;
}): string {
  return `database:
  url: ${JSON.stringify(options.databaseUrl)}
  schema: ${options.schema}
  poolSize: 2
sources:
  clicks:
    type: kafka
    brokers: [127.0.0.1:9092]
    topics: [clicks]
    eventTypeFromHeader: event-type
  orders-in:
    type: amqp
    url: amqp://guest:guest@127.0.0.1:5672
    queue: orders.in
    eventTypeFromHeader: true
    topic: "orders.{{ eventType }}"
  audit:
    type: nats
    servers: [${JSON.stringify(options.natsUrl)}]
    stream: ${options.stream}
    subject: ${options.subjectPrefix}.>
    mode: pull
`;
}

/** One EMF document a handler printed: its `_aws` metadata and the values. */
export type EmfDocument = Record<string, unknown> & {
  _aws: { CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string }[] }[] };
};

/** Collects the EMF documents written to stdout while `work` runs (Powertools Metrics writes them there). */
export async function captureEmf<T>(work: () => Promise<T>): Promise<{ result: T; emf: EmfDocument[] }> {
  const emf: EmfDocument[] = [];
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    for (const line of text.split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        const parsed = JSON.parse(line) as Record<string, unknown>;
        if (parsed._aws) {
          emf.push(parsed as EmfDocument);
        }
      } catch {
        // not JSON: passed through below
      }
    }
    // EMF documents are kept for the test, everything else is written as usual.
    const others = text
      .split('\n')
      .filter((line) => !line.startsWith('{"_aws"'))
      .join('\n');
    return others.trim() === '' ? true : (write as (...args: unknown[]) => boolean)(others, ...rest);
  }) as typeof process.stdout.write;
  try {
    return { result: await work(), emf };
  } finally {
    process.stdout.write = write;
  }
}

/**
 * Every line written to stdout and stderr while `work` runs (Powertools Logger and Metrics write there through
 * their own consoles), kept instead of printed.
 */
export async function captureOutput<T>(work: () => Promise<T>): Promise<{ result: T; lines: string[] }> {
  const lines: string[] = [];
  const streams = [process.stdout, process.stderr] as const;
  const writes = streams.map((stream) => stream.write);
  for (const stream of streams) {
    stream.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
      lines.push(...text.split('\n').filter((line) => line.trim() !== ''));
      const callback = rest.find((arg) => typeof arg === 'function') as (() => void) | undefined;
      callback?.();
      return true;
    }) as typeof stream.write;
  }
  try {
    return { result: await work(), lines };
  } finally {
    streams.forEach((stream, i) => {
      stream.write = writes[i] as typeof stream.write;
    });
  }
}

/** The value of metric `name` in the EMF documents, summed. */
export function emfValue(emf: readonly EmfDocument[], name: string): number {
  let sum = 0;
  for (const doc of emf) {
    const value = doc[name];
    if (typeof value === 'number') sum += value;
    else if (Array.isArray(value)) sum += value.reduce((a: number, b: number) => a + b, 0);
  }
  return sum;
}

/** One EMF document as a {@link RecordingMetrics} kept it: the metrics' values and the dimensions it carried. */
export interface RecordedMetrics {
  readonly metrics: Readonly<Record<string, number>>;
  readonly dimensions: Readonly<Record<string, string>>;
}

/**
 * Powertools Metrics that keeps each published document instead of printing it, so a test reads what a handler
 * published (gauges included) without capturing stdout. `gauges(table)` answers the `DeadRows` documents of one table.
 */
export class RecordingMetrics extends Metrics {
  readonly published: RecordedMetrics[] = [];
  /** Each document's dimension sets as EMF declares them, names sorted within a set (see `dimensionSetsOf`). */
  private readonly sets = new WeakMap<RecordedMetrics, string[][]>();

  constructor() {
    super({ namespace: 'QueueBox', serviceName: 'queuebox-test' });
  }

  override publishStoredMetrics(): this {
    if (this.hasStoredMetrics()) {
      const emf = this.serializeMetrics() as unknown as EmfDocument;
      const [directive] = emf._aws.CloudWatchMetrics;
      const names = directive?.Metrics.map((m) => m.Name) ?? [];
      const dimensionNames = directive?.Dimensions.flat() ?? [];
      const document: RecordedMetrics = {
        metrics: Object.fromEntries(names.map((name) => [name, Number(emf[name])])),
        dimensions: Object.fromEntries(dimensionNames.map((name) => [name, String(emf[name])])),
      };
      this.sets.set(
        document,
        (directive?.Dimensions ?? []).map((set) => [...set].sort()),
      );
      this.published.push(document);
    }
    this.clearMetrics();
    this.clearDimensions();
    this.clearMetadata();
    return this;
  }

  /**
   * The dimension sets of a published document, as CloudWatch matches them: `dimensions` merges the sets, so
   * `[["service", "Table"]]` and `[["service"], ["Table"]]` read alike there, while an alarm on `{ service, Table }`
   * sees only the first (an outside audit of the alarms).
   */
  dimensionSetsOf(document: RecordedMetrics): string[][] {
    return this.sets.get(document) ?? [];
  }

  /** The documents that carried the `DeadRows` gauge of `table`. */
  gauges(table: 'outbox' | 'inbox'): RecordedMetrics[] {
    return this.published.filter((d) => d.dimensions.Table === table && 'DeadRows' in d.metrics);
  }
}

/** Header values as a test gives them: text (sent as its UTF-8 bytes) or the bytes themselves. */
export type TestHeaderBytes = Readonly<Record<string, string | readonly number[]>>;

const bytesOf = (value: string | readonly number[]) =>
  typeof value === 'string' ? [...Buffer.from(value, 'utf8')] : [...value];
const base64Of = (value: unknown) =>
  Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64');

/** An MSK event as the event source mapping delivers it: records by `topic-partition`, base64 values, byte headers. */
export function anMskEvent(
  records: readonly { offset: number; value: unknown; headers?: TestHeaderBytes }[],
): KafkaLambdaEvent {
  return {
    eventSource: 'aws:kafka',
    eventSourceArn:
      'arn:aws:kafka:eu-west-1:123456789012:cluster/queuebox/abcd1234-ab12-cd34-ef56-abcdef123456-1',
    bootstrapServers: 'b-1.queuebox.abc123.c2.kafka.eu-west-1.amazonaws.com:9098',
    records: {
      'clicks-0': records.map((r) => ({
        topic: 'clicks',
        partition: 0,
        offset: r.offset,
        timestamp: 1_796_000_000_000 + r.offset,
        timestampType: 'CREATE_TIME' as const,
        key: base64Of('user-1'),
        value: base64Of(r.value),
        headers: Object.entries(r.headers ?? {}).map(([name, value]) => ({ [name]: bytesOf(value) })),
      })),
    },
  };
}

/** An Amazon MQ for RabbitMQ event: messages by `queue::vhost`, base64 `data`, `{ bytes }` header values. */
export function anAmazonMqEvent(
  messages: readonly { messageId: string; type: string; body: unknown; headers?: TestHeaderBytes }[],
): AmazonMqRabbitEvent {
  return {
    eventSource: 'aws:rmq',
    eventSourceArn:
      'arn:aws:mq:eu-west-1:123456789012:broker:queuebox:b-9bcfa592-423a-4942-879d-eb284b418fc8',
    rmqMessagesByQueue: {
      'orders.in::/': messages.map((m) => ({
        basicProperties: {
          contentType: 'application/json',
          contentEncoding: null,
          headers: Object.fromEntries(
            Object.entries(m.headers ?? {}).map(([k, v]) => [k, { bytes: bytesOf(v) }]),
          ),
          deliveryMode: 2,
          priority: 0,
          correlationId: `corr-${m.messageId}`,
          replyTo: null,
          expiration: null,
          messageId: m.messageId,
          timestamp: 'Nov 30, 2026, 6:00:00 AM',
          type: m.type,
          userId: null,
          appId: 'orders-service',
          clusterId: null,
          bodySize: base64Of(m.body).length,
        },
        redelivered: false,
        data: base64Of(m.body),
      })),
    },
  };
}
