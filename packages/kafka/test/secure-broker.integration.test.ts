/**
 * A Kafka destination and a local Kafka source on a broker that needs TLS and SASL (outside audit: `ssl` and `sasl`
 * were refused by the configuration and never given to kafkajs, so MSK with SCRAM, IAM or TLS and Confluent Cloud
 * could not be reached). The broker is the private one of scripts/kafka-secure.sh (SASL_SSL on 19092, SSL on
 * 19093, PLAINTEXT on 19094 for this file's admin client), started here when it does not answer; the shared broker on
 * 9092 is not touched. The configuration goes through `parseConfig`, the destination through
 * `kafkaPublisherFactory` and the source through the local runtime's `startBrokerConsumers`, as `queuebox start`
 * wires them.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseConfig } from '@queuebox/config';
import type { BrokerIngestionPort, BrokerMessage, OutgoingMessage } from '@queuebox/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafkaTestKit, type KafkaTestKit } from '../../../test/brokers/support/kafka.ts';
import { startBrokerConsumers } from '../../local/src/broker-consumers.ts';
import { createLogger } from '../../local/src/logger.ts';
import { kafkaPublisherFactory } from '../src/index.ts';

const run = promisify(execFile);
const repo = join(import.meta.dirname, '..', '..', '..');
const version = process.env.QUEUEBOX_KAFKA_VERSION ?? '4.1.2';
const kafkaLib = join(
  process.env.QUEUEBOX_KAFKA_HOME ?? join(homedir(), '.cache', 'queuebox', `kafka-${version}`),
  'lib',
);
const secureHome =
  process.env.QUEUEBOX_KAFKA_SECURE_HOME ?? join(homedir(), '.cache', 'queuebox', `kafka-secure-${version}`);

const SASL_SSL = '127.0.0.1:19092';
const SSL = '127.0.0.1:19093';
const PLAINTEXT = '127.0.0.1:19094';
/** The users scripts/kafka-secure.sh creates. */
const USER = 'queuebox';
const PASSWORD = 'queuebox-secret';
const WRONG_PASSWORD = 'not-the-Pa55word-of-queuebox';

/** Why this file cannot run here (as the other Kafka tests: no Java, or no jars), printed once; else undefined. */
async function missing(): Promise<string | undefined> {
  try {
    await run('java', ['-version']);
  } catch {
    return 'no java on PATH (scripts/kafka-secure.sh runs Kafka on Java 17+)';
  }
  if (!existsSync(kafkaLib)) return `no Kafka jars at ${kafkaLib} (bash scripts/kafka.sh start fetches them)`;
  return undefined;
}
const skipReason = await missing();
if (skipReason !== undefined) console.info(`[kafka secure broker] skipped: ${skipReason}`);

let kit: KafkaTestKit;
let ca: string;

beforeAll(async () => {
  if (skipReason !== undefined) return;
  // Quick when it already runs (services.sh starts it); a first start makes the CA and formats storage (~15 s).
  await run('bash', [join(repo, 'scripts', 'kafka-secure.sh'), 'start'], { timeout: 170_000 });
  ca = readFileSync(join(secureHome, 'tls', 'ca.pem'), 'utf8');
  kit = await createKafkaTestKit([PLAINTEXT]);
}, 180_000);

afterAll(async () => {
  await kit?.cleanup();
});

let nextId = 1;
function aMessage(overrides: Partial<OutgoingMessage> = {}): OutgoingMessage {
  const id = String(nextId++);
  return { id, topic: 'ignored', key: `k-${id}`, payload: { id }, headers: {}, attempt: 0, ...overrides };
}

/** An inbox that keeps what it is given, in order. */
function memoryIngestion(): BrokerIngestionPort & { readonly messages: BrokerMessage[] } {
  const messages: BrokerMessage[] = [];
  return {
    messages,
    async ingest(_source, message) {
      messages.push(message);
      return { status: 'stored', id: String(messages.length), wakeRelay: false };
    },
  };
}

async function eventually<T>(what: string, check: () => T | undefined, timeoutMs = 30_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** A configuration with one Kafka destination and one Kafka source, both with `security`, parsed and defaulted. */
function configWith(topic: string, groupId: string, brokers: string, security: Record<string, unknown>) {
  return parseConfig({
    sources: { secured: { type: 'kafka', brokers: [brokers], topics: [topic], groupId, ...security } },
    destinations: { secured: { type: 'kafka', brokers: [brokers], topic, ...security } },
  });
}

describe.skipIf(skipReason)('Kafka destination and source on a broker with TLS and SASL', () => {
  it('publish and consume through SCRAM-SHA-512 over TLS, with the CA given', async () => {
    // Prepare
    const topic = await kit.topic('secure-scram', 1);
    const config = configWith(topic, kit.group('secure-scram'), SASL_SSL, {
      ssl: { ca },
      sasl: { mechanism: 'scram-sha-512', username: USER, password: PASSWORD },
    });
    const publisher = kafkaPublisherFactory('secured', config.destinations.secured ?? { type: 'kafka' });
    const ingestion = memoryIngestion();
    const lines: string[] = [];
    const consumers = startBrokerConsumers({
      sources: config.sources,
      ingestion,
      logger: createLogger({ level: 'warn', write: (line) => lines.push(line) }),
      kafkaRetryDelayMs: 200,
    });
    try {
      // Act
      const outcomes = await Promise.all(
        [1, 2, 3].map((n) => publisher.publish(aMessage({ payload: { n } }))),
      );
      await eventually('three records stored', () => (ingestion.messages.length >= 3 ? true : undefined));

      // Assess
      expect(outcomes).toEqual([{ kind: 'sent' }, { kind: 'sent' }, { kind: 'sent' }]);
      expect(ingestion.messages.map((m) => JSON.parse(Buffer.from(m.body).toString('utf8')))).toEqual([
        { n: 1 },
        { n: 2 },
        { n: 3 },
      ]);
      // A fresh broker may still be loading its group coordinator (retried): no login or TLS problem, though.
      expect(lines.filter((l) => /authentication|certificate|SASL|SSL|TLS/i.test(l))).toEqual([]);
    } finally {
      await consumers.stop();
      await publisher.close();
    }
  });

  it.each(['plain', 'scram-sha-256'])('publishes through %s over TLS', async (mechanism) => {
    // Prepare
    const topic = await kit.topic(`secure-${mechanism}`, 1);
    const config = configWith(topic, kit.group('secure-unused'), SASL_SSL, {
      ssl: { ca },
      sasl: { mechanism, username: USER, password: PASSWORD },
    });
    const publisher = kafkaPublisherFactory('secured', config.destinations.secured ?? { type: 'kafka' });
    try {
      // Act
      const outcome = await publisher.publish(aMessage({ payload: { mechanism } }));

      // Assess
      expect(outcome).toEqual({ kind: 'sent' });
      expect((await kit.read(topic, 1)).map((r) => r.value)).toEqual([JSON.stringify({ mechanism })]);
    } finally {
      await publisher.close();
    }
  });

  it('a wrong password is a retry with a clear error, and the source reports it, never the password', async () => {
    // Prepare
    const topic = await kit.topic('secure-wrong', 1);
    const config = configWith(topic, kit.group('secure-wrong'), SASL_SSL, {
      ssl: { ca },
      sasl: { mechanism: 'scram-sha-512', username: USER, password: WRONG_PASSWORD },
    });
    const publisher = kafkaPublisherFactory('secured', config.destinations.secured ?? { type: 'kafka' });
    const lines: string[] = [];
    const consumers = startBrokerConsumers({
      sources: config.sources,
      ingestion: memoryIngestion(),
      logger: createLogger({ level: 'warn', write: (line) => lines.push(line) }),
      kafkaRetryDelayMs: 200,
    });
    try {
      // Act
      const outcome = await publisher.publish(aMessage());
      const problem = await eventually('the source reporting the refused login', () =>
        lines.find((l) => l.includes('broker consumer problem')),
      );

      // Assess
      expect(outcome.kind).toBe('retry');
      expect(outcome.kind === 'retry' ? outcome.error : '').toMatch(
        /SASL SCRAM SHA512 authentication failed/,
      );
      expect(problem).toMatch(/authentication failed/i);
      expect(JSON.stringify(outcome)).not.toContain(WRONG_PASSWORD);
      expect(lines.join('\n')).not.toContain(WRONG_PASSWORD);
    } finally {
      await consumers.stop();
      await publisher.close();
    }
  });

  it('refuses TLS to a broker whose CA is unknown, unless ca is given', async () => {
    // Prepare
    const topic = await kit.topic('secure-tls', 1);
    const systemCas = configWith(topic, kit.group('secure-unused'), SSL, { ssl: true });
    const ownCa = configWith(topic, kit.group('secure-unused'), SSL, { ssl: { ca } });
    const refused = kafkaPublisherFactory('secured', systemCas.destinations.secured ?? { type: 'kafka' });
    const trusted = kafkaPublisherFactory('secured', ownCa.destinations.secured ?? { type: 'kafka' });
    try {
      // Act
      const refusedOutcome = await refused.publish(aMessage({ payload: { tls: 'refused' } }));
      const trustedOutcome = await trusted.publish(aMessage({ payload: { tls: 'trusted' } }));

      // Assess
      expect(refusedOutcome.kind).toBe('retry');
      expect(refusedOutcome.kind === 'retry' ? refusedOutcome.error : '').toMatch(/self-signed certificate/);
      expect(trustedOutcome).toEqual({ kind: 'sent' });
      expect((await kit.read(topic, 1)).map((r) => r.value)).toEqual([JSON.stringify({ tls: 'trusted' })]);
    } finally {
      await refused.close();
      await trusted.close();
    }
  });
});
