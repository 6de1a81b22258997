// Small factories for infra tests: configuration inputs that a test extends or breaks.
import { parseConfig, type QueueBoxConfig } from '@queuebox/config';
import type { FunctionName } from '@queuebox/deploy-contract';
import { collectReferences, type DeployConfig } from '../../infra/config.ts';
import { type DeployPlan, planDeployment } from '../../infra/plan.ts';

type Input = Record<string, unknown>;

export function anHttpSource(overrides: Input = {}): Input {
  return {
    type: 'http',
    auth: { scheme: 'stripe', secrets: ['secret://stripe#webhook'] },
    idempotencyKey: { path: '$.id' },
    eventTypePath: '$.type',
    ...overrides,
  };
}

export function aKafkaSource(overrides: Input = {}): Input {
  return { type: 'kafka', brokers: ['b-1.kafka.internal:9092'], topics: ['clicks'], ...overrides };
}

export function anAmqpSource(overrides: Input = {}): Input {
  return { type: 'amqp', url: 'amqps://mq.internal:5671', queue: 'orders.in', ...overrides };
}

export function anSqsSource(overrides: Input = {}): Input {
  return { type: 'sqs', queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/jobs-in', ...overrides };
}

export function aNatsSource(overrides: Input = {}): Input {
  return { type: 'nats', servers: ['nats://nats.internal:4222'], stream: 'AUDIT', ...overrides };
}

/** A configuration with one HTTP source, one HTTP destination and one route. */
export function aConfigInput(overrides: Input = {}): Input {
  return {
    sources: { stripe: anHttpSource() },
    destinations: {
      billing: {
        type: 'http',
        url: 'https://billing.example/hooks',
        signing: { scheme: 'standard-webhooks', secrets: ['secret://billing#whsec'] },
      },
    },
    routes: [{ match: 'stripe.#', destination: 'billing' }],
    ...overrides,
  };
}

export function aConfig(overrides: Input = {}): QueueBoxConfig {
  return parseConfig(aConfigInput(overrides));
}

export const MSK_ARN =
  'arn:aws:kafka:eu-west-1:123456789012:cluster/events/0f1e2d3c-aaaa-bbbb-cccc-1234567890ab-3';
export const MQ_ARN =
  'arn:aws:mq:eu-west-1:123456789012:broker:orders:b-1234abcd-56ef-78ab-90cd-1234567890ab';
export const MQ_SECRET = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:orders-mq-AbCdEf';
export const DB_SECRET = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:orders-db-XyZ123';

/** A loaded deploy configuration built from an input, as loadDeployConfig would return it (no file). */
export function aDeployConfig(input: Input = aConfigInput()): DeployConfig {
  return {
    file: undefined,
    // The fixtures' references sit in text keys, so they validate as written.
    config: parseConfig(input),
    document: structuredClone(input),
    references: collectReferences(input),
    writtenProvider: undefined,
    origins: new Map(),
  };
}

/** The ARN of a function of the `queuebox` app on stage `prod`. */
export const fnArn = (fn: FunctionName) =>
  `arn:aws:lambda:eu-west-1:123456789012:function:queuebox-prod-${fn}`;

/** A plan with every broker trigger kind (MSK, self-managed Kafka with SASL, Amazon MQ), alarm e-mails, the VPC layout. */
export function aBrokerPlan(): DeployPlan {
  const input = aConfigInput({
    sources: {
      stripe: anHttpSource(),
      clicks: aKafkaSource({ topics: ['clicks', 'views'] }),
      legacy: aKafkaSource({ brokers: ['kafka.example.com:9096'], topics: ['legacy'] }),
      orders: anAmqpSource(),
    },
    aws: {
      sources: {
        clicks: { mskClusterArn: MSK_ARN },
        legacy: { auth: { type: 'sasl-scram-512', secretArn: MQ_SECRET }, batchWindowSeconds: 5 },
        orders: { mqBrokerArn: MQ_ARN, auth: { type: 'basic', secretArn: MQ_SECRET } },
      },
      alarms: { email: ['ops@example.com', 'dev@example.com'] },
      // Self-managed Kafka polled from the install's private subnets: the VPC layout.
      network: { functionsInVpc: true },
    },
  });
  return planDeployment(aDeployConfig(input), { app: 'queuebox', stage: 'prod', env: {} });
}
