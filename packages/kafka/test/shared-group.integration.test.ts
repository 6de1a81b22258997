/**
 * Two QueueBox installs (other schemas or databases) whose Kafka sources have the same name default to one
 * consumer group, `queuebox-{source}`, and would split the topic's records, each inbox storing only part of them.
 * With `installId` a member's client id names its install (`queuebox-<installId>-<source>`): a second install is
 * refused at start, a member of another install that joins later is an ERROR at the rebalance (the running member
 * keeps consuming), and replicas of one install share the group.
 */
import { randomBytes } from 'node:crypto';
import { countingIngestion, recordingLogger, requireServices } from '@queuebox/testing';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafkaTestKit, type KafkaTestKit } from '../../../test/brokers/support/kafka.ts';
import {
  createKafkaConsumer,
  type KafkaConsumer,
  KafkaGroupInUseError,
  kafkaMemberClientId,
} from '../src/index.ts';

const needs = await requireServices('kafka shared group', ['kafka']);
const brokers = needs.available ? needs.url.kafka.split(',') : [];
const installA = randomBytes(16).toString('hex');
const installB = randomBytes(16).toString('hex');

let kit: KafkaTestKit;

beforeAll(async () => {
  if (!needs.available) return;
  kit = await createKafkaTestKit(brokers);
});

afterAll(async () => {
  await kit?.cleanup();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out');
    await sleep(200);
  }
}

/** The lines above DEBUG (a DEBUG line says each join). */
const loud = (logger: { readonly lines: readonly { level: string }[] }) =>
  logger.lines.filter((l) => l.level !== 'debug');

/** The group's members' client ids, once the group is stable. */
async function members(groupId: string): Promise<string[]> {
  const { groups } = await kit.admin.describeGroups([groupId]);
  const group = groups[0];
  return group?.state === 'Stable' ? group.members.map((m) => m.clientId).sort() : [];
}

describe.skipIf(needs.skipReason)(`Kafka consumer group shared by installs on ${needs.via.kafka}`, () => {
  it('replicas of one install share the group without an error and together store every record', async () => {
    // Prepare
    const topic = await kit.topic('shared-same', 2);
    const groupId = kit.group('shared-same');
    const ingestion = countingIngestion();
    const logger = recordingLogger();
    const replica = () =>
      createKafkaConsumer({
        brokers,
        topics: [topic],
        groupId,
        source: 'orders',
        ingestion,
        installId: installA,
        logger,
      });
    const one = replica();
    const two = replica();
    try {
      // Act
      await one.start();
      await until(async () => (await members(groupId)).length === 1);
      await two.start();
      await until(async () => (await members(groupId)).length === 2);
      await kit.produce(
        topic,
        Array.from({ length: 10 }, (_, i) => ({ value: `{"i":${i}}`, key: String(i) })),
      );
      await until(() => ingestion.count() >= 10);
      // Assess: both members name install A; nothing logged (no member of another install, none unnamed)
      expect(await members(groupId)).toEqual([
        kafkaMemberClientId(installA, 'orders'),
        kafkaMemberClientId(installA, 'orders'),
      ]);
      expect(loud(logger)).toEqual([]);
    } finally {
      await one.close();
      await two.close();
    }
  });

  it('a second install is refused at start, naming the group, the other install and the fix', async () => {
    // Prepare: install A's member is in the group
    const topic = await kit.topic('shared-other', 1);
    const groupId = kit.group('shared-other');
    const a = createKafkaConsumer({
      brokers,
      topics: [topic],
      groupId,
      source: 'orders',
      ingestion: countingIngestion(),
      installId: installA,
    });
    const bIngestion = countingIngestion();
    const b = createKafkaConsumer({
      brokers,
      topics: [topic],
      groupId,
      source: 'orders',
      ingestion: bIngestion,
      installId: installB,
    });
    try {
      await a.start();
      await until(async () => (await members(groupId)).length === 1);
      // Act
      const refused = await b.start().then(
        () => undefined,
        (error: unknown) => error,
      );
      // Assess: refused, and B never joined
      expect(refused).toBeInstanceOf(KafkaGroupInUseError);
      const error = refused as KafkaGroupInUseError;
      expect(error.groupId).toBe(groupId);
      expect(error.otherInstallIds).toEqual([installA]);
      expect(error.message).toContain(groupId);
      expect(error.message).toContain(installA);
      expect(error.message).toContain('sources.orders.groupId');
      await sleep(1000);
      expect(await members(groupId)).toEqual([kafkaMemberClientId(installA, 'orders')]);
    } finally {
      await b.close().catch(() => undefined);
      await a.close();
    }
  });

  it('a member of another install joining later is an ERROR at the rebalance, not in a loop; the member keeps consuming', {
    timeout: 120_000,
  }, async () => {
    // Prepare: install A's member runs; then a member naming install B joins (a start race, or a QueueBox without
    // the check: a plain kafkajs member with B's client id)
    const topic = await kit.topic('shared-late', 2);
    const groupId = kit.group('shared-late');
    const ingestion = countingIngestion();
    const logger = recordingLogger();
    const a: KafkaConsumer = createKafkaConsumer({
      brokers,
      topics: [topic],
      groupId,
      source: 'orders',
      ingestion,
      installId: installA,
      logger,
    });
    const intruder = new Kafka({
      clientId: kafkaMemberClientId(installB, 'orders'),
      brokers,
      logLevel: logLevel.NOTHING,
    }).consumer({ groupId });
    try {
      await a.start();
      await until(async () => (await members(groupId)).length === 1);
      expect(loud(logger)).toEqual([]);
      // Act
      await intruder.connect();
      await intruder.subscribe({ topic, fromBeginning: true });
      await intruder.run({ eachMessage: async () => undefined });
      await until(() => logger.lines.some((l) => l.level === 'error'));
      await sleep(5000);
      const settled = logger.lines.length;
      await sleep(5000);
      // Assess: ERROR lines naming the group and install B, at most one per join of A (a DEBUG line each), and
      // none while the group stays as it is (no loop)
      const errors = logger.lines.filter((l) => l.level === 'error');
      const joins = logger.lines.filter((l) => l.level === 'debug');
      expect(errors.length).toBeGreaterThan(0);
      expect(errors.length).toBeLessThanOrEqual(joins.length);
      for (const error of errors) {
        expect(error.fields).toMatchObject({ groupId, installId: installA, otherInstallIds: [installB] });
      }
      expect(logger.lines.length).toBe(settled);
      // A is still a member and still stores the records of its partition (the topic was empty before)
      expect(await members(groupId)).toContain(kafkaMemberClientId(installA, 'orders'));
      expect(ingestion.count()).toBe(0);
      // To both partitions (the kit's produce writes to partition 0 only, which A may not hold after the rebalance)
      const producer = new Kafka({ clientId: 'qb-test', brokers, logLevel: logLevel.NOTHING }).producer();
      await producer.connect();
      try {
        await producer.send({
          topic,
          messages: Array.from({ length: 20 }, (_, i) => ({
            partition: i % 2,
            value: `{"i":${i}}`,
            key: `k${i}`,
          })),
        });
      } finally {
        await producer.disconnect();
      }
      await until(() => ingestion.count() > 0);
    } finally {
      await intruder.disconnect().catch(() => undefined);
      await a.close();
    }
  });

  it('a member that names no install (an older QueueBox) does not stop the start; it is a WARN', async () => {
    // Prepare: a member with the old default client id `queuebox`
    const topic = await kit.topic('shared-unnamed', 1);
    const groupId = kit.group('shared-unnamed');
    const older = new Kafka({ clientId: 'queuebox', brokers, logLevel: logLevel.NOTHING }).consumer({
      groupId,
    });
    const logger = recordingLogger();
    const a = createKafkaConsumer({
      brokers,
      topics: [topic],
      groupId,
      source: 'orders',
      ingestion: countingIngestion(),
      installId: installA,
      logger,
    });
    try {
      await older.connect();
      await older.subscribe({ topic, fromBeginning: true });
      await older.run({ eachMessage: async () => undefined });
      await until(async () => (await members(groupId)).length === 1);
      // Act
      await a.start();
      // Assess
      expect(logger.lines.filter((l) => l.level === 'error')).toEqual([]);
      expect(loud(logger)[0]).toMatchObject({
        level: 'warn',
        fields: { groupId, members: [expect.stringMatching(/^queuebox@/)] },
      });
    } finally {
      await a.close();
      await older.disconnect().catch(() => undefined);
    }
  });
});
