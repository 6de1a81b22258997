import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@queuebox/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadDeployConfig, secretStandIn } from '../../infra/config.ts';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'queuebox-infra-config-'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function failure(promise: Promise<unknown>): Promise<ConfigError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof ConfigError)) throw new Error(`expected a ConfigError, got ${String(error)}`);
  return error;
}

const YAML = `admin: { token: secret://queuebox/admin#token, protectMetrics: true }
database:
  url: env://DATABASE_URL
  schema: app_queue
sources:
  stripe:
    type: http
    auth: { scheme: stripe, secrets: [secret://stripe#webhook] }
    idempotencyKey: { path: $.id }
    eventTypePath: $.type
  orders:
    type: amqp
    url: secret://orders-mq#url
    queue: orders.in
  ops:
    type: http
    auth: { scheme: basic, secrets: [secret://ops#login] }
    eventTypePath: $.kind
destinations:
  billing: { type: http, url: secret://billing#url, timeoutMs: env://BILLING_TIMEOUT }
routes:
  - { match: "#", destination: billing }
aws:
  functions:
    outboxTick: { rateMinutes: 10 }
  alarms:
    oldestPendingAgeSeconds: 600
    email: [ops@example.com]
  network: { nat: managed }
  sources:
    orders:
      mqBrokerArn: arn:aws:mq:eu-west-1:123456789012:broker:orders:b-1
      auth: { type: basic, secretArn: arn:aws:secretsmanager:eu-west-1:123456789012:secret:mq-AbCdEf }
`;

describe('loadDeployConfig', () => {
  it('validates the file, deployment settings included, with stand-ins for secrets', async () => {
    // Prepare: DATABASE_URL is not set: on AWS the database section is infra's
    await writeFile(join(dir, 'queuebox.yaml'), YAML);

    // Act
    const loaded = await loadDeployConfig({
      root: dir,
      env: { BILLING_TIMEOUT: '5000', QUEUEBOX_OUTBOX__MAXATTEMPTS: '4' },
    });

    // Assess
    expect(loaded.file).toBe('queuebox.yaml');
    expect(loaded.config.outbox.maxAttempts).toBe(4);
    expect(loaded.config.aws.functions.outboxTick.rateMinutes).toBe(10);
    expect(loaded.config.aws.alarms.oldestPendingAgeSeconds).toBe(600);
    expect(loaded.config.destinations.billing).toMatchObject({ timeoutMs: 5000 });
    expect(loaded.config.aws.network.nat).toBe('managed');
    expect(loaded.config.aws.alarms.email).toEqual(['ops@example.com']);
    expect(loaded.config.aws.sources.orders?.mqBrokerArn).toBe(
      'arn:aws:mq:eu-west-1:123456789012:broker:orders:b-1',
    );
    // The document keeps the references and the deployment settings as written: nothing is split off.
    expect(loaded.document.aws).toEqual({
      functions: { outboxTick: { rateMinutes: 10 } },
      alarms: { oldestPendingAgeSeconds: 600, email: ['ops@example.com'] },
      network: { nat: 'managed' },
      sources: {
        orders: {
          mqBrokerArn: 'arn:aws:mq:eu-west-1:123456789012:broker:orders:b-1',
          auth: {
            type: 'basic',
            secretArn: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:mq-AbCdEf',
          },
        },
      },
    });
    expect(loaded.references.map((r) => r.text)).toContain('secret://orders-mq#url');
    // AWS puts the admin API behind IAM: the local token is not shipped, so it needs no secret, nor protectMetrics,
    // which needs that token (no function serves /metrics).
    expect(loaded.document.admin).toEqual({});
    expect(loaded.references.map((r) => r.text)).not.toContain('secret://queuebox/admin#token');
  });

  it('reads the file named by QUEUEBOX_CONFIG and refuses one that does not exist', async () => {
    // Prepare
    await writeFile(join(dir, 'prod.yaml'), 'outbox: { maxAttempts: 7 }\n');

    // Act
    const loaded = await loadDeployConfig({ root: dir, env: { QUEUEBOX_CONFIG: 'prod.yaml' } });
    const error = await failure(loadDeployConfig({ root: dir, env: { QUEUEBOX_CONFIG: 'nope.yaml' } }));

    // Assess
    expect(loaded.config.outbox.maxAttempts).toBe(7);
    expect(error.issues).toEqual([
      { path: '', message: 'the configuration file nope.yaml does not exist', origin: 'QUEUEBOX_CONFIG' },
    ]);
  });

  it("drops the local runtime's database.listenUrl: its env:// or secret:// is neither read nor stood in for", async () => {
    // Prepare
    await writeFile(
      join(dir, 'queuebox.yaml'),
      'database: { url: env://DATABASE_URL, listenUrl: env://LISTEN_URL }\n',
    );
    await writeFile(
      join(dir, 'secret.yaml'),
      'database: { url: env://DATABASE_URL, listenUrl: "secret://local-db#listenUrl" }\n',
    );

    // Act
    const fromEnv = await loadDeployConfig({ root: dir, env: {} });
    const fromSecret = await loadDeployConfig({ root: dir, env: { QUEUEBOX_CONFIG: 'secret.yaml' } });

    // Assess
    expect(fromEnv.config.database.listenUrl).toBeUndefined();
    expect(fromSecret.references.map((r) => r.text)).not.toContain('secret://local-db#listenUrl');
  });

  it('deploys the defaults when there is no queuebox.yaml', async () => {
    // Act
    const loaded = await loadDeployConfig({ root: dir, env: {} });

    // Assess
    expect(loaded.file).toBeUndefined();
    expect(loaded.config.sources).toEqual({});
    expect(loaded.config.aws.database.aurora.minAcu).toBe(0);
  });

  it('reports every problem with its line, deployment settings included, and unset env:// variables', async () => {
    // Prepare
    await writeFile(
      join(dir, 'queuebox.yaml'),
      `outbox: { maxAtempts: 3 }
destinations:
  billing: { type: http, url: https://billing.example, timeoutMs: env://BILLING_TIMEOUT }
aws:
  network: { nat: cheap }
  database:
    aurora: { minAcu: 2, maxAcu: 1 }
`,
    );

    // Act
    const error = await failure(loadDeployConfig({ root: dir, env: {} }));

    // Assess
    expect(error.issues).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: 'aws.network.nat', origin: 'queuebox.yaml:5' }),
        expect.objectContaining({ path: 'aws.database.aurora.maxAcu', message: 'must be at least minAcu' }),
        expect.objectContaining({
          path: 'destinations.billing.timeoutMs',
          message: 'refers to the environment variable BILLING_TIMEOUT, which is not set',
        }),
        expect.objectContaining({ path: 'outbox.maxAtempts', origin: 'queuebox.yaml:1' }),
      ]),
    );
    expect(error.issues).toHaveLength(4);
  });

  it('says when a problem was found on a stand-in for a secret', async () => {
    // Prepare: a Kafka source whose brokers come from a secret cannot be checked (or mapped) at deploy time
    await writeFile(
      join(dir, 'queuebox.yaml'),
      'sources:\n  clicks: { type: kafka, brokers: [secret://kafka#broker], topics: [clicks] }\n',
    );

    // Act
    const error = await failure(loadDeployConfig({ root: dir, env: {} }));

    // Assess
    expect(error.issues).toEqual([
      expect.objectContaining({
        path: 'sources.clicks.brokers[0]',
        message: expect.stringMatching(/checked with a stand-in for its secret:\/\/ reference/),
      }),
    ]);
  });
});

describe('secretStandIn', () => {
  it('fits the key: URLs of the right scheme, user:password for basic auth, text otherwise', () => {
    // Prepare
    const document = {
      sources: { a: { type: 'amqp' }, h: { type: 'http', auth: { scheme: 'basic' } } },
      destinations: { d: { type: 'http' }, r: { type: 'rabbitmq' } },
    };

    // Act / Assess
    expect(secretStandIn(document, ['sources', 'a', 'url'])).toBe('amqp://secret.invalid');
    expect(secretStandIn(document, ['destinations', 'd', 'url'])).toBe('https://secret.invalid/');
    expect(secretStandIn(document, ['destinations', 'r', 'url'])).toBe('amqp://secret.invalid');
    expect(secretStandIn(document, ['sources', 'h', 'auth', 'secrets', 0])).toBe('secret:secret');
    expect(secretStandIn(document, ['destinations', 'd', 'headers', 'Authorization'])).toBe('secret');
  });
});

describe('Standard Webhooks secrets behind secret:// references', () => {
  it('deploy: a stand-in of the shape the schema asks for, inbound (standard-webhooks, svix) and signing outbound', async () => {
    // Prepare: the README's own example of an outbound signing secret, and both inbound schemes
    await writeFile(
      join(dir, 'queuebox.yaml'),
      `sources:
  sw:
    type: http
    auth: { scheme: standard-webhooks, secrets: [secret://sw-webhook] }
    topic: "sw.{{ eventType }}"
  svix:
    type: http
    auth: { scheme: svix, secrets: [secret://svix#whsec] }
destinations:
  billing:
    type: http
    url: https://billing.example/hooks
    signing: { scheme: standard-webhooks, secrets: [secret://billing#whsec] }
routes:
  - { match: "#", destination: billing }
`,
    );

    // Act: refused before, with "must decode to at least 24 bytes (this one has 4)" for each of the three
    const loaded = await loadDeployConfig({ root: dir, env: {} });

    // Assess: the document keeps the references; only validation saw stand-ins
    expect(loaded.references.map((r) => r.text).sort()).toEqual([
      'secret://billing#whsec',
      'secret://svix#whsec',
      'secret://sw-webhook',
    ]);
    const document = { destinations: { d: { type: 'http' } }, sources: { s: { auth: { scheme: 'svix' } } } };
    expect(secretStandIn(document, ['destinations', 'd', 'signing', 'secrets', 0])).toMatch(
      /^whsec_[A-Za-z0-9+/=]{44}$/,
    );
    expect(secretStandIn(document, ['sources', 's', 'auth', 'secrets', 0])).toMatch(/^whsec_/);
  });
});

describe('what a function start would refuse, refused at deploy', () => {
  it('a JSONata expression that does not compile, and a transform function, which no Lambda function registers', async () => {
    // Prepare
    await writeFile(
      join(dir, 'queuebox.yaml'),
      `sources:
  s:
    type: http
    auth: { scheme: none }
    eventTypePath: $.type
    transform: { jsonata: "{ 'a': $.b " }
destinations:
  d: { type: http, url: https://d.example/, transform: { function: enrich } }
routes:
  - { match: "#", destination: d, transform: { jsonata: "$merge([$, {'x': 1}])" } }
`,
    );

    // Act: both deployed before, and every function then failed at its start
    const error = await failure(loadDeployConfig({ root: dir, env: {} }));

    // Assess: the broken two, with their lines; the good route transform passes
    expect(error.issues.map((i) => i.path)).toEqual(['sources.s.transform', 'destinations.d.transform']);
    expect(error.issues[0]?.message).toMatch(/the JSONata expression does not compile/);
    expect(error.issues[1]?.message).toMatch(
      /transform function "enrich", but on AWS no function is registered/,
    );
    expect(error.issues[0]?.origin).toMatch(/^queuebox\.yaml:\d+$/);
  });

  it('an env:// or secret:// reference under database in a key the functions are shipped as written', async () => {
    // Prepare
    await writeFile(
      join(dir, 'queuebox.yaml'),
      'database:\n  url: env://DATABASE_URL\n  schema: env://QUEUE_SCHEMA\n  queryTimeoutMs: secret://db#timeout\n',
    );

    // Act: deployed before (the shipped file said env://QUEUE_SCHEMA, which no function had)
    const error = await failure(loadDeployConfig({ root: dir, env: { QUEUE_SCHEMA: 'app_queue' } }));

    // Assess: the url is infra's to decide, so only the other two
    expect(error.issues.map((i) => i.path)).toEqual(['database.schema', 'database.queryTimeoutMs']);
    expect(error.issues[0]?.message).toMatch(/the functions cannot read/);
  });
});

describe('the database provider at deploy', () => {
  it('takes an existing database’s provider from its url as the runtime does', async () => {
    // Prepare: no provider written; the url says SQL Server
    await writeFile(
      join(dir, 'queuebox.yaml'),
      `database: { url: "sqlserver://db.example:1433;database=app" }
aws:
  database: { secretArn: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf" }
`,
    );

    // Act
    const loaded = await loadDeployConfig({ root: dir, env: {} });

    // Assess: planned as PostgreSQL before, and every function refused the shipped file
    expect(loaded.writtenProvider).toBe('sqlserver');
    expect(loaded.config.database.provider).toBe('sqlserver');
  });

  it('reads an env:// url from the deploying shell for it, and refuses SQL Server where the deploy would create Aurora', async () => {
    // Prepare: no aws.database.secretArn, so the deploy creates Aurora PostgreSQL
    await writeFile(join(dir, 'queuebox.yaml'), 'database: { url: env://DATABASE_URL }\n');

    // Act: planned Aurora PostgreSQL without a word before
    const error = await failure(
      loadDeployConfig({ root: dir, env: { DATABASE_URL: 'mssql://db.example:1433;database=app' } }),
    );

    // Assess
    expect(error.issues).toEqual([expect.objectContaining({ path: 'database' })]);
    expect(error.issues[0]?.message).toMatch(
      /names SQL Server, but on AWS QueueBox creates an Aurora PostgreSQL cluster/,
    );
    // A PostgreSQL url, or none, deploys
    await expect(
      loadDeployConfig({ root: dir, env: { DATABASE_URL: 'postgres://db.example/app' } }),
    ).resolves.toMatchObject({ writtenProvider: 'postgres' });
  });
});

describe('deployment settings from the deploying environment', () => {
  it('overlays QUEUEBOX_AWS__… variables and validates the database section for the existing database', async () => {
    // Prepare: an existing SQL Server database, named only in the deploying shell
    await writeFile(join(dir, 'queuebox.yaml'), 'aws:\n  network: { nat: managed }\n');
    const env = {
      QUEUEBOX_AWS__NETWORK__NAT: 'none',
      QUEUEBOX_AWS__DATABASE__SECRETARN: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf',
      QUEUEBOX_AWS__DATABASE__PROVIDER: 'sqlserver',
    };

    // Act
    const loaded = await loadDeployConfig({ root: dir, env });

    // Assess
    expect(loaded.config.aws.network.nat).toBe('none');
    expect(loaded.origins.get('aws.network.nat')).toBe('QUEUEBOX_AWS__NETWORK__NAT');
    expect(loaded.config.aws.database).toMatchObject({ provider: 'sqlserver', urlKey: 'url' });
    expect(loaded.config.database.provider).toBe('sqlserver');
  });
});
