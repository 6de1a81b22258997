import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@queuebox/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig, parseConfig } from '../src/index.ts';
import { aKafkaSource, anAmqpSource } from './fixtures.ts';

// The deployment settings infra reads live in the one schema, so `queuebox config check` and the local runtime
// (both go through loadConfig) accept the same file `sst deploy` does.

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'queuebox-config-aws-'));
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

const DEPLOYMENT_YAML = `sources:
  clicks: { type: kafka, brokers: ["127.0.0.1:9092"], topics: [clicks] }
  orders: { type: amqp, url: "amqp://127.0.0.1", queue: orders.in }
aws:
  network:
    existing:
      privateSubnetIds: [subnet-0a1b, subnet-0c2d]
      securityGroupIds: [sg-0e3f]
  database:
    secretArn: arn:aws:secretsmanager:eu-west-1:123456789012:secret:orders-db-AbCdEf
    urlKey: connection
    provider: sqlserver
  alarms:
    oldestPendingAgeSeconds: 600
    email: [ops@example.com]
  secrets:
    external: [shared/partner-token]
  sources:
    clicks:
      mskClusterArn: arn:aws:kafka:eu-west-1:123456789012:cluster/events/0f1e2d3c-3
      auth: { type: sasl-scram-512, secretArn: arn:aws:secretsmanager:eu-west-1:123456789012:secret:k-AbCdEf }
      startingPosition: TRIM_HORIZON
    orders:
      mqBrokerArn: arn:aws:mq:eu-west-1:123456789012:broker:orders:b-1
      auth: { type: basic, secretArn: arn:aws:secretsmanager:eu-west-1:123456789012:secret:mq-AbCdEf }
      virtualHost: shop
`;

describe('deployment settings (aws.*)', () => {
  it('are accepted in the file the local runtime loads, with their defaults filled', async () => {
    // Prepare
    await writeFile(join(dir, 'queuebox.yaml'), DEPLOYMENT_YAML);

    // Act
    const config = await loadConfig({ cwd: dir, env: {} });

    // Assess
    expect(config.aws.network).toEqual({
      nat: 'ec2',
      azs: 2,
      existing: { privateSubnetIds: ['subnet-0a1b', 'subnet-0c2d'], securityGroupIds: ['sg-0e3f'] },
    });
    expect(config.aws.database).toEqual({
      secretArn: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:orders-db-AbCdEf',
      urlKey: 'connection',
      provider: 'sqlserver',
      aurora: { minAcu: 0, maxAcu: 4, pauseAfterMinutes: 5, version: '17', idleSessionTimeoutSeconds: 60 },
    });
    expect(config.aws.alarms).toEqual({ oldestPendingAgeSeconds: 600, email: ['ops@example.com'] });
    expect(config.aws.secrets.external).toEqual(['shared/partner-token']);
    expect(config.aws.sources.clicks).toMatchObject({
      auth: { type: 'sasl-scram-512' },
      startingPosition: 'TRIM_HORIZON',
      batchSize: 100,
      batchWindowSeconds: 0,
      enabled: true,
      inVpc: true,
    });
    // No default here: infra takes the virtual host from the source's url.
    expect(config.aws.sources.clicks?.virtualHost).toBeUndefined();
    // A new consumer group starts at the oldest record kept, as the local consumer does (an outside Kafka audit: LATEST
    // on AWS skipped what the local runtime read).
    expect(config.aws.sources.orders).toMatchObject({
      virtualHost: 'shop',
      startingPosition: 'TRIM_HORIZON',
    });
  });

  it('default to a new VPC, Aurora, no alarm emails, no external secrets and no mapping settings', () => {
    // Act
    const { aws } = parseConfig({});

    // Assess
    expect(aws.network).toEqual({ nat: 'ec2', azs: 2 });
    expect(aws.database).toEqual({
      urlKey: 'url',
      aurora: { minAcu: 0, maxAcu: 4, pauseAfterMinutes: 5, version: '17', idleSessionTimeoutSeconds: 60 },
    });
    expect(aws.alarms.email).toEqual([]);
    expect(aws.secrets.external).toEqual([]);
    expect(aws.sources).toEqual({});
  });

  it("default sqs-source's timeout to 30 s, which a queue made with SQS's defaults (visibility 30 s) accepts", () => {
    // Act
    const { aws } = parseConfig({});

    // Assess: Lambda refuses a mapping whose function timeout exceeds the queue's visibility timeout
    expect(aws.functions.sqsSource.timeoutSeconds).toBe(30);
  });

  it('cap the HTTP functions at 29 s, so their 503 comes before API Gateway gives up at 30 s', () => {
    // Act
    const at29 = parseConfig({ aws: { functions: { inboxHttp: { timeoutSeconds: 29 } } } });
    const at30 = () =>
      parseConfig({
        aws: { functions: { inboxHttp: { timeoutSeconds: 30 }, adminHttp: { timeoutSeconds: 30 } } },
      });

    // Assess
    expect(at29.aws.functions.inboxHttp.timeoutSeconds).toBe(29);
    expect(at30).toThrow(ConfigError);
    try {
      at30();
    } catch (error) {
      expect((error as ConfigError).issues.map((i) => [i.path, i.message])).toEqual([
        ['aws.functions.inboxHttp.timeoutSeconds', 'must be at most 29 s'],
        ['aws.functions.adminHttp.timeoutSeconds', 'must be at most 29 s'],
      ]);
    }
  });

  it('refuse an Aurora engine older than PostgreSQL 14, which the outbox claim needs', () => {
    // Act
    const at14 = parseConfig({ aws: { database: { aurora: { version: '14.9' } } } });
    const issuesAt = (version: string) => {
      try {
        parseConfig({ aws: { database: { aurora: { version } } } });
        return [];
      } catch (error) {
        return (error as ConfigError).issues.map((i) => [i.path, i.message]);
      }
    };

    // Assess
    expect(at14.aws.database.aurora.version).toBe('14.9');
    expect(issuesAt('13.12')).toEqual([
      [
        'aws.database.aurora.version',
        'QueueBox needs PostgreSQL 14 or later (its outbox claim reads pg_column_compression)',
      ],
    ]);
  });

  it('refuse a misspelt key inside them with its line and the closest known key', async () => {
    // Prepare
    await writeFile(
      join(dir, 'queuebox.yaml'),
      [
        'aws:',
        '  network:',
        '    naat: managed', // line 3
        '  database:',
        '    aurora: { minAcu: 0, maxAcus: 8 }', // line 5
        '  alarms:',
        '    emails: [ops@example.com]', // line 7
        '  sources:',
        '    orders:',
        '      mqBrokerArm: arn:aws:mq:eu-west-1:123456789012:broker:orders:b-1', // line 10
      ].join('\n'),
    );

    // Act
    const error = await failure(loadConfig({ cwd: dir, env: {} }));

    // Assess
    expect(error.issues).toEqual([
      {
        path: 'aws.alarms.emails',
        message: 'unknown key "emails" (did you mean "email"?)',
        origin: 'queuebox.yaml:7',
      },
      {
        path: 'aws.network.naat',
        message: 'unknown key "naat" (did you mean "nat"?)',
        origin: 'queuebox.yaml:3',
      },
      {
        path: 'aws.database.aurora.maxAcus',
        message: 'unknown key "maxAcus" (did you mean "maxAcu"?)',
        origin: 'queuebox.yaml:5',
      },
      {
        path: 'aws.sources.orders.mqBrokerArm',
        message: 'unknown key "mqBrokerArm" (did you mean "mqBrokerArn"?)',
        origin: 'queuebox.yaml:10',
      },
    ]);
  });

  it('refuse values infra could not deploy, all at once', () => {
    // Act
    let error: unknown;
    try {
      parseConfig({
        sources: { clicks: aKafkaSource(), orders: anAmqpSource() },
        aws: {
          network: { nat: 'cheap', azs: 1 },
          database: { secretArn: 'orders-db', aurora: { minAcu: 2, maxAcu: 1 } },
          alarms: { email: ['ops'] },
          sources: { clicks: { auth: { type: 'sasl' } }, 'bad name': {} },
        },
      });
    } catch (e) {
      error = e;
    }

    // Assess
    if (!(error instanceof ConfigError)) throw new Error(`expected a ConfigError, got ${String(error)}`);
    expect(error.issues.map((i) => [i.path, i.message])).toEqual(
      expect.arrayContaining([
        ['aws.network.nat', '"cheap" is not one of ec2, managed, none'],
        ['aws.network.azs', 'must be at least 2'],
        ['aws.database.secretArn', 'must be the ARN of a Secrets Manager secret'],
        ['aws.database.aurora.maxAcu', 'must be at least minAcu'],
        ['aws.alarms.email[0]', 'must be an email address'],
        ['aws.sources.clicks.auth.type', expect.stringMatching(/^"sasl" is not one of none, iam, /)],
        ['aws.sources.bad name', expect.stringMatching(/must be the name of a configured source/)],
      ]),
    );
    expect(error.issues).toHaveLength(7);
  });

  it("accept an SQS mapping's maximumConcurrency from 2 to 1000 (Lambda's ScalingConfig bounds) and refuse any other", () => {
    // Prepare
    const withConcurrency = (maximumConcurrency: unknown) => () =>
      parseConfig({ aws: { sources: { jobs: { maximumConcurrency } } } });
    const problem = (value: unknown) => {
      try {
        withConcurrency(value)();
      } catch (error) {
        return (error as ConfigError).issues.map((i) => [i.path, i.message]);
      }
      return [];
    };

    // Act + Assess
    expect(withConcurrency(2)().aws.sources.jobs?.maximumConcurrency).toBe(2);
    expect(withConcurrency(1000)().aws.sources.jobs?.maximumConcurrency).toBe(1000);
    expect(
      parseConfig({ aws: { sources: { jobs: {} } } }).aws.sources.jobs?.maximumConcurrency,
    ).toBeUndefined();
    expect(problem(1)).toEqual([['aws.sources.jobs.maximumConcurrency', 'must be at least 2']]);
    expect(problem(1001)).toEqual([['aws.sources.jobs.maximumConcurrency', 'must be at most 1000']]);
    expect(problem(2.5)).toEqual([
      ['aws.sources.jobs.maximumConcurrency', expect.stringMatching(/^must be a whole number/)],
    ]);
  });

  it('take KMS keys only by key ARN, and refuse an alias ARN, which IAM cannot grant on, saying so', () => {
    // Prepare
    const KEY = 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab';
    const MRK = 'arn:aws-us-gov:kms:us-gov-west-1:123456789012:key/mrk-0123456789abcdef0123456789abcdef';
    const ALIAS = 'arn:aws:kms:eu-west-1:123456789012:alias/orders';
    const withKeys =
      (key: string, secretKey = key) =>
      () =>
        parseConfig({
          sources: { clicks: aKafkaSource() },
          destinations: {
            out: { type: 'sqs', queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/out' },
          },
          aws: {
            sources: {
              jobs: { queueKmsKeyArn: key },
              clicks: { auth: { type: 'sasl-scram-512', kmsKeyArn: secretKey } },
            },
            destinations: { out: { kmsKeyArn: key } },
            secrets: { kmsKeyArns: [key] },
          },
        });
    const issuesOf = (attempt: () => unknown) => {
      try {
        attempt();
      } catch (error) {
        return (error as ConfigError).issues.map((i) => [i.path, i.message]);
      }
      return [];
    };

    // Act
    const accepted = withKeys(KEY, MRK)();
    const aliases = issuesOf(withKeys(ALIAS));
    const others = [
      'arn:aws:kms:eu-west-1:123456789012:key/not-a-key-id',
      '1234abcd-12ab-34cd-56ef-1234567890ab',
      'alias/orders',
      'arn:aws:secretsmanager:eu-west-1:123456789012:secret:k-AbCdEf',
    ].map((value) => issuesOf(withKeys(value)));

    // Assess
    expect(accepted.aws.sources.jobs?.queueKmsKeyArn).toBe(KEY);
    expect(accepted.aws.sources.clicks?.auth?.kmsKeyArn).toBe(MRK);
    expect(accepted.aws.destinations.out?.kmsKeyArn).toBe(KEY);
    const paths = [
      'aws.sources.jobs.queueKmsKeyArn',
      'aws.sources.clicks.auth.kmsKeyArn',
      'aws.destinations.out.kmsKeyArn',
      'aws.secrets.kmsKeyArns[0]',
    ];
    expect(aliases.map(([path]) => path).sort()).toEqual([...paths].sort());
    for (const [, message] of aliases) {
      expect(message).toMatch(/^is an alias ARN: IAM matches KMS keys only by their key ARN/);
      expect(message).toContain('aws kms describe-key --key-id alias/<name>');
    }
    for (const issues of others) {
      expect(issues.map(([path]) => path).sort()).toEqual([...paths].sort());
      for (const [, message] of issues) expect(message).toMatch(/^must be the ARN of a KMS key/);
    }
  });

  it('default aws.destinations to none and refuse a misnamed one or an unknown key in it', () => {
    // Act
    let error: unknown;
    try {
      parseConfig({ aws: { destinations: { 'bad name': {}, out: { kmsKeyArns: [] } } } });
    } catch (e) {
      error = e;
    }

    // Assess
    expect(parseConfig({}).aws.destinations).toEqual({});
    if (!(error instanceof ConfigError)) throw new Error(`expected a ConfigError, got ${String(error)}`);
    expect(error.issues.map((i) => [i.path, i.message])).toEqual(
      expect.arrayContaining([
        ['aws.destinations.bad name', expect.stringMatching(/must be the name of a configured destination/)],
        [
          'aws.destinations.out.kmsKeyArns',
          expect.stringMatching(/^unknown key "kmsKeyArns" \(did you mean "kmsKeyArn"\?\)/),
        ],
      ]),
    );
    expect(error.issues).toHaveLength(2);
  });
});
