import { describe, expect, it } from 'vitest';
import {
  configJsonSchema,
  type HttpDestinationConfig,
  type HttpSourceConfig,
  type KafkaSourceConfig,
  type NatsSourceConfig,
  parseConfig,
  providerOfUrl,
} from '../src/index.ts';
import { aKafkaSource, aNatsSource, anAmqpSource, anHttpDestination, anHttpSource } from './fixtures.ts';

describe('defaults', () => {
  it('match the specification fragment and docs/design.md §8 for an empty configuration', () => {
    // Act
    const config = parseConfig({});

    // Assess
    expect(config.inbox.relay).toEqual({
      enabled: true,
      pollIntervalMs: 100,
      batchSize: 100,
      claimTimeoutMs: 300000,
    });
    expect(config.inbox.relay.maxAttempts).toBeUndefined();
    expect(config.inbox.basePath).toBe('/inbox');
    expect(config.inbox.maxBodyBytes).toBe(1048576);
    expect(config.outbox).toEqual({
      pollIntervalMs: 100,
      batchSize: 200,
      claimTimeoutMs: 300000,
      maxAttempts: 10,
      backoff: { baseMs: 1000, maxMs: 600000 },
      maxPayloadBytes: 67108864,
      largePayloadBudgetBytes: 16777216,
    });
    expect(config.http.port).toBe(8080);
    expect(config.database).toEqual({
      provider: 'pglite',
      schema: 'queuebox',
      poolSize: 10,
      preparedStatements: true,
      connectTimeoutMs: 30000,
      queryTimeoutMs: 30000,
      dataDir: '.queuebox/pglite',
    });
    expect(config.sources).toEqual({});
    expect(config.destinations).toEqual({});
    expect(config.routes).toEqual([]);
    expect(config.aws.functions.outboxTick.timeoutSeconds).toBe(60);
    expect(config.aws.functions.relayTick.timeoutSeconds).toBe(60);
    expect(config.aws.functions.inboxHttp.timeoutSeconds).toBe(29);
    expect(config.logLevel).toBe('info');
  });

  it('keep sent and processed rows 168 hours (7 days) and dead rows 720 hours (30 days)', () => {
    // Act
    const config = parseConfig({});

    // Assess
    expect(config.retention).toEqual({ keepSentHours: 168, keepDeadHours: 720, batchSize: 1000 });
  });

  it('fill a nested section that is only partly given', () => {
    // Act
    const config = parseConfig({ outbox: { backoff: { baseMs: 50 } }, inbox: { relay: { enabled: false } } });

    // Assess
    expect(config.outbox.backoff).toEqual({ baseMs: 50, maxMs: 600000 });
    expect(config.outbox.maxAttempts).toBe(10);
    expect(config.inbox.relay).toMatchObject({ enabled: false, batchSize: 100 });
  });
});

describe('database provider', () => {
  it.each([
    ['postgres://u:p@localhost:5432/db', 'postgres'],
    ['postgresql://localhost/db', 'postgres'],
    ['sqlserver://localhost:1433;database=x', 'sqlserver'],
    ['mssql://sa:pw@localhost/db', 'sqlserver'],
  ])('is inferred from %s', (url, provider) => {
    // Act
    const config = parseConfig({ database: { url } });

    // Assess
    expect(config.database.provider).toBe(provider);
    expect(config.database.url).toBe(url);
  });

  it('may be explicit, with a connection string that has no scheme', () => {
    // Act
    const config = parseConfig({
      database: { provider: 'sqlserver', url: 'Server=db;Database=q;User Id=sa' },
    });

    // Assess
    expect(config.database.provider).toBe('sqlserver');
  });

  it('is postgres through the RDS Data API when database.dataApi is set, without a url', () => {
    // Prepare
    const dataApi = {
      resourceArn: 'arn:aws:rds:us-east-1:123456789012:cluster:queuebox-prod',
      secretArn: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:queuebox-db-AbCdEf',
    };

    // Act
    const config = parseConfig({ database: { dataApi } });

    // Assess
    expect(config.database).toMatchObject({
      provider: 'postgres',
      dataApi: { ...dataApi, resumeTimeoutMs: 25_000 },
    });
    expect(config.database.url).toBeUndefined();
    expect(() => parseConfig({ database: { dataApi, url: 'postgres://x/y' } })).toThrow(
      /no connection string/,
    );
    expect(() => parseConfig({ database: { dataApi, provider: 'sqlserver' } })).toThrow(/Aurora PostgreSQL/);
    expect(() => parseConfig({ database: { dataApi: { ...dataApi, resourceArn: 'cluster-1' } } })).toThrow(
      /ARN of an Aurora cluster/,
    );
  });

  it('takes the connect and query timeouts of a database url; 0 lifts the query timeout, not the connect one', () => {
    const url = 'postgres://x@127.0.0.1/y';

    const config = parseConfig({ database: { url, connectTimeoutMs: 5000, queryTimeoutMs: 0 } });

    expect(config.database).toMatchObject({
      provider: 'postgres',
      connectTimeoutMs: 5000,
      queryTimeoutMs: 0,
    });
    expect(() => parseConfig({ database: { url, connectTimeoutMs: 0 } })).toThrow(/connectTimeoutMs/);
    expect(() => parseConfig({ database: { url, queryTimeoutMs: -1 } })).toThrow(/queryTimeoutMs/);
    expect(() => parseConfig({ database: { url, queryTimeoutMs: 1.5 } })).toThrow(/queryTimeoutMs/);
  });

  it('takes a listenUrl for the wake-up listener of a PostgreSQL url only, and only a postgres:// one', () => {
    const url = 'postgres://app@pgbouncer.internal:6432/q';
    const listenUrl = 'postgres://app@db.internal:5432/q';
    const dataApi = {
      resourceArn: 'arn:aws:rds:us-east-1:123456789012:cluster:queuebox-prod',
      secretArn: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:qb-AbCdEf',
    };

    expect(parseConfig({ database: { url, listenUrl } }).database).toMatchObject({ url, listenUrl });
    expect(parseConfig({ database: { url } }).database.listenUrl).toBeUndefined();
    for (const database of [
      { listenUrl },
      { provider: 'pglite', listenUrl },
      { url: 'sqlserver://db:1433;database=q', listenUrl },
      { dataApi, listenUrl },
    ]) {
      expect(() => parseConfig({ database }), JSON.stringify(database)).toThrow(
        /database\.listenUrl.*only for PostgreSQL over database\.url/,
      );
    }
    expect(() => parseConfig({ database: { url, listenUrl: 'db.internal:5432/q' } })).toThrow(
      /database\.listenUrl.*must be a postgres:\/\/ or postgresql:\/\/ URL$/m,
    );
    expect(() => parseConfig({ database: { url, listenUrl: 'mssql://db/q' } })).toThrow(
      /database\.listenUrl.*not mssql:\/\//,
    );
  });

  it('reads an RDS database secret given as the url (managed rotation keeps it current) as the URL it describes', () => {
    const secret = (fields: Record<string, unknown>) => ({ database: { url: JSON.stringify(fields) } });
    const rds = { host: 'db.internal', port: 5432, username: 'qb', password: 'p@ss:w/rd', dbname: 'orders' };

    // PostgreSQL with verified TLS, as RDS expects (infra's Aurora URL asks the same)
    expect(parseConfig(secret({ engine: 'postgres', ...rds })).database).toMatchObject({
      provider: 'postgres',
      url: 'postgres://qb:p%40ss%3Aw%2Frd@db.internal:5432/orders?sslmode=verify-full',
    });
    expect(parseConfig(secret({ ...rds, engine: 'aurora-postgresql', port: undefined })).database.url).toBe(
      'postgres://qb:p%40ss%3Aw%2Frd@db.internal/orders?sslmode=verify-full',
    );
    expect(
      parseConfig(secret({ ...rds, engine: 'sqlserver-se', port: '1433', dbname: undefined })).database,
    ).toMatchObject({ provider: 'sqlserver', url: 'sqlserver://qb:p%40ss%3Aw%2Frd@db.internal:1433/' });
    // AWS's SQL Server rotation function wants the engine `sqlserver`
    expect(parseConfig(secret({ ...rds, engine: 'sqlserver' })).database.url).toBe(
      'sqlserver://qb:p%40ss%3Aw%2Frd@db.internal:5432/orders',
    );
    expect(() => parseConfig(secret({ engine: 'mysql', ...rds }))).toThrow(/database\.url.*engine "mysql"/);
    expect(() => parseConfig(secret({ url: 'postgres://x/y' }))).toThrow(
      /database\.url.*not a database secret: it needs host, username and password/,
    );
    expect(() => parseConfig(secret({ ...rds, port: 'x' }))).toThrow(/port is not a port number/);
    // The refusals never quote the secret.
    let message = '';
    try {
      parseConfig(secret({ engine: 'mysql', ...rds }));
    } catch (error) {
      message = String(error);
    }
    expect(message).not.toContain('p@ss');
  });

  it('recognises schemes without regard to case and ignores other text', () => {
    expect(providerOfUrl('POSTGRES://x')).toBe('postgres');
    expect(providerOfUrl('mysql://x')).toBeUndefined();
    expect(providerOfUrl('Server=x')).toBeUndefined();
  });
});

describe('sources', () => {
  it('take their type defaults: http topic {{ eventType }}, path = name, correlation header', () => {
    // Act
    const config = parseConfig({ sources: { stripe: anHttpSource() } });

    // Assess
    const source = config.sources.stripe as HttpSourceConfig;
    expect(source).toMatchObject({
      type: 'http',
      mode: 'push',
      topic: '{{ eventType }}',
      path: 'stripe',
      correlationIdHeader: 'X-Correlation-Id',
      auth: { scheme: 'stripe', secrets: ['whsec_test'], toleranceSec: 300 },
      idempotencyKey: { path: '$.id' },
    });
  });

  it('default broker topics to {{ source }} and fill names from the source name', () => {
    // Act
    const config = parseConfig({
      sources: { 'orders-in': anAmqpSource(), clicks: aKafkaSource(), audit: aNatsSource() },
    });

    // Assess
    expect(config.sources['orders-in']).toMatchObject({ topic: '{{ source }}', prefetch: 10 });
    expect(config.sources.clicks as KafkaSourceConfig).toMatchObject({
      topic: '{{ source }}',
      groupId: 'queuebox-clicks',
    });
    expect(config.sources.audit as NatsSourceConfig).toMatchObject({
      topic: '{{ source }}',
      durable: 'queuebox-audit',
      batchSize: 100,
    });
  });

  it('drop the default correlation header when a correlation path is set', () => {
    // Act
    const config = parseConfig({ sources: { s: anHttpSource({ correlationIdPath: '$.meta.correlation' }) } });

    // Assess
    expect(config.sources.s?.correlationIdHeader).toBeUndefined();
    expect(config.sources.s?.correlationIdPath).toBe('$.meta.correlation');
  });

  it('accept every authentication scheme with its own keys', () => {
    // Prepare
    const auths = {
      a: { scheme: 'hmac', secrets: ['k1', 'k2'], header: 'X-Signature', prefix: 'sha256=' },
      b: { scheme: 'github', secrets: ['k'] },
      c: {
        scheme: 'standard-webhooks',
        secrets: ['whsec_YSBzaWduaW5nIGtleSBvZiAyNCBieXRlcw=='],
        toleranceSec: 60,
      },
      i: { scheme: 'svix', secrets: ['whsec_YSBzaWduaW5nIGtleSBvZiAyNCBieXRlcw=='], toleranceSec: 300 },
      d: { scheme: 'shopify', secrets: ['k'] },
      e: { scheme: 'slack', secrets: ['k'] },
      f: { scheme: 'bearer', secrets: ['t'] },
      g: { scheme: 'basic', secrets: ['user:pass', 'user:next'] },
      h: { scheme: 'none' },
    };
    const sources = Object.fromEntries(
      Object.entries(auths).map(([name, auth]) => [name, anHttpSource({ auth })]),
    );

    // Act
    const config = parseConfig({ sources });

    // Assess
    expect((config.sources.a as HttpSourceConfig).auth).toEqual({
      scheme: 'hmac',
      secrets: ['k1', 'k2'],
      header: 'X-Signature',
      prefix: 'sha256=',
      algorithm: 'sha256',
      encoding: 'hex',
    });
    expect((config.sources.c as HttpSourceConfig).auth).toMatchObject({ toleranceSec: 60 });
    expect((config.sources.h as HttpSourceConfig).auth).toEqual({ scheme: 'none' });
  });

  it('take transforms as jsonata or a registered function', () => {
    // Act
    const config = parseConfig({
      sources: {
        a: anHttpSource({ transform: { jsonata: '$merge([$, {"x": 1}])' } }),
        b: anHttpSource({ transform: { function: 'normalize-order' } }),
      },
    });

    // Assess
    expect(config.sources.a?.transform).toEqual({ jsonata: '$merge([$, {"x": 1}])' });
    expect(config.sources.b?.transform).toEqual({ function: 'normalize-order' });
  });
});

describe('destinations and routes', () => {
  it('take their defaults', () => {
    // Act
    const config = parseConfig({
      destinations: {
        billing: anHttpDestination(),
        rabbit: { type: 'rabbitmq', url: 'amqp://127.0.0.1', exchange: 'events' },
        kafka: { type: 'kafka', brokers: ['b-1:9092'] },
        nats: { type: 'nats', servers: ['nats://127.0.0.1:4222'] },
      },
      routes: [{ match: 'orders.*', destination: 'rabbit' }],
    });

    // Assess
    expect(config.destinations.billing as HttpDestinationConfig).toEqual({
      type: 'http',
      url: 'https://billing.example/hooks',
      method: 'POST',
      headers: {},
      timeoutMs: 15000,
      retryableStatuses: [],
      maxConcurrency: 16,
      maxErrorBodyBytes: 256,
    });
    expect(config.destinations.rabbit).toMatchObject({ routingKey: '{{ topic }}', persistent: true });
    expect(config.destinations.kafka).toMatchObject({ topic: '{{ topic }}', allowAutoTopicCreation: false });
    expect(config.destinations.nats).toMatchObject({ subject: '{{ topic }}', jetstream: true });
    expect(config.routes).toEqual([{ match: 'orders.*', destination: 'rabbit' }]);
  });

  it("bound a Kafka destination's produce request between 1 KiB and the broker's default 100 MiB", () => {
    const kafka = (maxRequestBytes: number) => ({
      destinations: { kafka: { type: 'kafka', brokers: ['b-1:9092'], maxRequestBytes } },
    });

    expect(parseConfig(kafka(1_048_576)).destinations.kafka).toMatchObject({ maxRequestBytes: 1_048_576 });
    expect(() => parseConfig(kafka(1000))).toThrow(/destinations\.kafka\.maxRequestBytes/);
    expect(() => parseConfig(kafka(104_857_601))).toThrow(/destinations\.kafka\.maxRequestBytes/);
  });

  it('keep the routes in their configured order', () => {
    // Act
    const config = parseConfig({
      destinations: { a: anHttpDestination(), b: anHttpDestination() },
      routes: [
        { match: 'orders.created', destination: 'b' },
        { match: 'orders.#', destination: 'a' },
        { match: '#', destination: 'b' },
      ],
    });

    // Assess
    expect(config.routes.map((r) => r.match)).toEqual(['orders.created', 'orders.#', '#']);
  });
});

describe('configJsonSchema', () => {
  it('describes the file for editors, with strict objects and descriptions', () => {
    // Act
    const schema = configJsonSchema() as {
      additionalProperties?: boolean;
      properties: Record<string, { description?: string }>;
    };

    // Assess
    expect(schema.additionalProperties).toBe(false);
    expect(Object.keys(schema.properties)).toContain('sources');
    expect(schema.properties.outbox?.description).toBe('The outbox poller.');
  });
});
