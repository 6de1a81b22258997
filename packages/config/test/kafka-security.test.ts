/**
 * `ssl` and `sasl` of Kafka destinations and sources (outside audit: a cluster that needs TLS or SASL, MSK or
 * Confluent Cloud, was refused with "unknown key ssl"): what is taken, what is refused at its path, and that no
 * password or private key is printed.
 */
import type { ConfigIssue } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import {
  configWarnings,
  createInMemorySecretResolver,
  parseConfig,
  redactConfig,
  resolveReferences,
  validateConfig,
} from '../src/index.ts';
import { aKafkaSource } from './fixtures.ts';

const CA = '-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n';
const KEY = '-----BEGIN PRIVATE KEY-----\nMIIEsecretkeybytes\n-----END PRIVATE KEY-----\n';
const PASSWORD = 'kafka-Pa55word-never-shown';

function issuesOf(input: unknown): ConfigIssue[] {
  const result = validateConfig(input);
  return result.ok ? [] : result.issues;
}

const kafkaDestination = (overrides: Record<string, unknown> = {}) => ({
  destinations: {
    msk: { type: 'kafka', brokers: ['b-1.example.kafka.us-east-1.amazonaws.com:9096'], ...overrides },
  },
});

const kafkaSource = (overrides: Record<string, unknown> = {}) => ({
  sources: { orders: aKafkaSource(overrides) },
});

describe('ssl and sasl of a Kafka destination or source', () => {
  it.each([
    ['MSK SCRAM', { ssl: true, sasl: { mechanism: 'scram-sha-512', username: 'u', password: PASSWORD } }],
    ['MSK IAM', { ssl: true, sasl: { mechanism: 'aws' } }],
    ['MSK IAM with its region', { ssl: true, sasl: { mechanism: 'aws', region: 'eu-west-1' } }],
    ['Confluent Cloud', { ssl: true, sasl: { mechanism: 'plain', username: 'KEY', password: PASSWORD } }],
    ['SCRAM-SHA-256', { ssl: true, sasl: { mechanism: 'scram-sha-256', username: 'u', password: PASSWORD } }],
    ['TLS with a private CA', { ssl: { ca: CA } }],
    ['mutual TLS', { ssl: { ca: CA, cert: CA, key: KEY, rejectUnauthorized: true } }],
    [
      'references, resolved later',
      {
        ssl: { ca: 'secret://kafka#ca' },
        sasl: { mechanism: 'plain', username: 'u', password: 'env://KAFKA_PASSWORD' },
      },
    ],
    ['no TLS', { ssl: false }],
    [
      'SASL_PLAINTEXT (accepted: a private network)',
      { sasl: { mechanism: 'plain', username: 'u', password: PASSWORD } },
    ],
  ])('takes %s, on a destination and on a source, as written', (_label, security) => {
    // Act
    const destination = parseConfig(kafkaDestination(security)).destinations.msk;
    const source = parseConfig(kafkaSource(security)).sources.orders;

    // Assess
    expect(destination).toMatchObject(security);
    expect(source).toMatchObject(security);
  });

  it.each([
    ['sasl aws without ssl', { sasl: { mechanism: 'aws' } }, 'ssl', /only over TLS/],
    ['sasl aws with ssl false', { ssl: false, sasl: { mechanism: 'aws' } }, 'ssl', /only over TLS/],
    ['an unknown mechanism', { ssl: true, sasl: { mechanism: 'gssapi' } }, 'sasl.mechanism', /plain/],
    [
      'a password missing',
      { ssl: true, sasl: { mechanism: 'scram-sha-512', username: 'u' } },
      'sasl.password',
      /./,
    ],
    [
      'a password with a line break',
      { ssl: true, sasl: { mechanism: 'plain', username: 'u', password: `${PASSWORD}\n` } },
      'sasl.password',
      /trailing line break/,
    ],
    [
      'a username on aws',
      { ssl: true, sasl: { mechanism: 'aws', username: 'u' } },
      'sasl.username',
      /unknown key/,
    ],
    [
      'a region that is none',
      { ssl: true, sasl: { mechanism: 'aws', region: 'Ireland' } },
      'sasl.region',
      /AWS region/,
    ],
    ['ssl as text', { ssl: 'yes' }, 'ssl', /true, false or/],
    ['a file path as ca', { ssl: { ca: '/etc/ssl/kafka-ca.pem' } }, 'ssl.ca', /PEM text/],
    ['a certificate as key', { ssl: { cert: CA, key: CA } }, 'ssl.key', /PRIVATE KEY/],
    ['cert without key', { ssl: { cert: CA } }, 'ssl.key', /both cert and key/],
    ['an unknown ssl key', { ssl: { cafile: 'x' } }, 'ssl.cafile', /unknown key/],
  ])('refuses %s at its path', (_label, security, path, message) => {
    for (const [input, prefix] of [
      [kafkaDestination(security), 'destinations.msk'],
      [kafkaSource(security), 'sources.orders'],
    ] as const) {
      // Act
      const issues = issuesOf(input);

      // Assess
      const issue = issues.find((i) => i.path === `${prefix}.${path}`);
      expect(issue, JSON.stringify(issues)).toBeDefined();
      expect(issue?.message).toMatch(message);
    }
  });

  it('never quotes a password or a key in a problem', () => {
    // Prepare
    const input = kafkaDestination({
      ssl: { cert: CA, key: `${KEY.replace('PRIVATE KEY', 'PUBLIC KEY')}` },
      sasl: { mechanism: 'plain', username: 'u', password: ` ${PASSWORD}` },
    });

    // Act
    const text = JSON.stringify(issuesOf(input));

    // Assess
    expect(text).toContain('destinations.msk.sasl.password');
    expect(text).toContain('destinations.msk.ssl.key');
    expect(text).not.toContain(PASSWORD);
    expect(text).not.toContain('MIIEsecretkeybytes');
  });

  it('prints neither the password nor a key read from a secret (config check)', async () => {
    // Prepare
    const resolved = await resolveReferences(
      kafkaDestination({
        ssl: { ca: CA, cert: CA, key: 'secret://kafka#key' },
        sasl: { mechanism: 'scram-sha-512', username: 'queuebox', password: 'secret://kafka#password' },
      }),
      {
        env: {},
        secrets: createInMemorySecretResolver({ kafka: JSON.stringify({ key: KEY, password: PASSWORD }) }),
      },
    );
    const config = parseConfig(resolved.value, undefined, { references: resolved.references });

    // Act
    const printed = JSON.stringify(redactConfig(config));

    // Assess
    expect(resolved.issues).toEqual([]);
    expect(config.destinations.msk).toMatchObject({ ssl: { key: KEY }, sasl: { password: PASSWORD } });
    expect(printed).not.toContain(PASSWORD);
    expect(printed).not.toContain('MIIEsecretkeybytes');
    expect(printed).toContain('"username":"queuebox"');
  });

  it('prints no password written in the file itself', () => {
    // Prepare
    const config = parseConfig(
      kafkaSource({ ssl: true, sasl: { mechanism: 'plain', username: 'u', password: PASSWORD } }),
    );

    // Act
    const printed = JSON.stringify(redactConfig(config));

    // Assess
    expect(printed).not.toContain(PASSWORD);
    expect(printed).toContain('"mechanism":"plain"');
  });

  it('prints no private key written in the file itself', () => {
    // Prepare
    const config = parseConfig(kafkaDestination({ ssl: { ca: CA, cert: CA, key: KEY } }));

    // Act
    const printed = JSON.stringify(redactConfig(config));

    // Assess: the key hidden, the certificates (public) shown
    expect(printed).not.toContain('MIIEsecretkeybytes');
    expect(printed).toContain('"key":"***"');
  });
});

describe('configWarnings of Kafka connections', () => {
  it('warns of a password sent without TLS and of broker certificates not checked, never quoting a value', () => {
    // Prepare (an outside security review: config check said nothing of either)
    const config = parseConfig({
      ...kafkaDestination({ sasl: { mechanism: 'plain', username: 'u', password: PASSWORD } }),
      ...kafkaSource({ ssl: { ca: CA, rejectUnauthorized: false } }),
    });
    // Act
    const warnings = configWarnings(config);
    // Assess
    expect(warnings.map((w) => w.path)).toEqual([
      'destinations.msk.sasl',
      'sources.orders.ssl.rejectUnauthorized',
    ]);
    expect(JSON.stringify(warnings)).not.toContain(PASSWORD);
  });

  it('says nothing of SCRAM over TLS with the CA given, nor of MSK IAM', () => {
    const config = parseConfig({
      ...kafkaDestination({
        ssl: { ca: CA },
        sasl: { mechanism: 'scram-sha-512', username: 'u', password: PASSWORD },
      }),
      ...kafkaSource({ ssl: true, sasl: { mechanism: 'aws', region: 'eu-west-1' } }),
    });
    expect(configWarnings(config)).toEqual([]);
  });
});
