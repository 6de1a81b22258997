/**
 * The Kafka consumer-group member working through a backlog, on the broker of scripts/kafka.sh and a real
 * PostgreSQL inbox (slowed a little per record, as a busy database is): offsets are committed within a batch of
 * thousands of records, never ahead of the stored rows; and a second member joining meanwhile gets its partition
 * within seconds (a heartbeat that says the group is rebalancing ends the first member's batch), not once the first
 * member's batch ends or the rebalance timeout evicts it.
 */
import { type BrokerIngestionPort, type Store, StoreUnavailableError } from '@queuebox/core';
import { createBrokerIngestion, type Sources } from '@queuebox/inbox';
import { openPostgresStore } from '@queuebox/store-postgres';
import { requireServices } from '@queuebox/testing';
import { AssignerProtocol, Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafkaTestKit, type KafkaTestKit } from '../../../test/brokers/support/kafka.ts';
import { deadStoreUrl, eventually, useBrokerTestStore } from '../../../test/brokers/support/store.ts';
import { createKafkaConsumer, type KafkaConsumer } from '../src/index.ts';

const needs = await requireServices('kafka consumer group', ['postgres', 'kafka']);
const brokers = needs.available ? needs.url.kafka.split(',') : [];
const db = useBrokerTestStore('kafka_group', needs.available ? needs.url.postgres : undefined);

let kit: KafkaTestKit;
let kafka: Kafka;
let pool: pg.Pool;
let deadStore: Store;

beforeAll(async () => {
  if (!needs.available) return;
  kit = await createKafkaTestKit(brokers);
  kafka = new Kafka({ clientId: 'queuebox-tests', brokers, logLevel: logLevel.NOTHING });
  pool = new pg.Pool({ connectionString: db.url, max: 2 });
  deadStore = await openPostgresStore({ url: deadStoreUrl(), schema: db.schema });
});

afterAll(async () => {
  await kit?.cleanup();
  await pool?.end();
  await deadStore?.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `count` small records spread over `partitions` partitions of `topic` (the same number on each). */
async function produceBacklog(topic: string, partitions: number, count: number): Promise<void> {
  const producer = kafka.producer();
  await producer.connect();
  try {
    for (let from = 0; from < count; from += 1000) {
      await producer.send({
        topic,
        messages: Array.from({ length: Math.min(1000, count - from) }, (_, j) => ({
          partition: (from + j) % partitions,
          value: JSON.stringify({ i: from + j }),
        })),
      });
    }
  } finally {
    await producer.disconnect();
  }
}

/**
 * The real inbox with a delay before each record (`control.ms`, changeable); while `control.down`, the inbox of a
 * store whose database does not answer (every attempt fails with StoreUnavailableError). Counts the calls of each
 * member and when each partition's records were taken (the partition read from the default key
 * `topic:partition:offset@ts`).
 */
function slowedIngestion(source: string, topic: string, control: { ms: number; down?: boolean }) {
  const sources: Sources = { [source]: { type: 'kafka', ...({ brokers, topics: [topic] } as object) } };
  const real = createBrokerIngestion({ store: db.store.inbox, sources });
  const dead = createBrokerIngestion({ store: deadStore.inbox, sources });
  const calls: { member: string; partition: number; at: number; failed: boolean }[] = [];
  const of = (member: string): BrokerIngestionPort => ({
    async ingest(s, message) {
      const partition = Number(/:(\d+):\d+@/.exec(message.defaultIdempotencyKey ?? '')?.[1]);
      const call = { member, partition, at: Date.now(), failed: control.down === true };
      calls.push(call);
      if (call.failed) return dead.ingest(s, message);
      if (control.ms > 0) await sleep(control.ms);
      return real.ingest(s, message);
    },
  });
  return { of, calls };
}

/** How many rows `source` has, and per partition how many are below `below[partition]` (an offset). */
async function storedRows(
  source: string,
  below: Record<number, string>,
): Promise<{ total: number; under: Record<number, number> }> {
  const partition = `split_part(idempotency_key, ':', 2)::int`;
  const offset = `split_part(split_part(idempotency_key, ':', 3), '@', 1)::bigint`;
  const count = async (where: string, values: unknown[]) =>
    (
      await pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${db.schema}".inbox WHERE source = $1${where}`,
        [source, ...values],
      )
    ).rows[0]?.n ?? 0;
  const under: Record<number, number> = {};
  for (const [p, upTo] of Object.entries(below)) {
    under[Number(p)] = await count(` AND ${partition} = $2 AND ${offset} < $3`, [Number(p), upTo]);
  }
  return { total: await count('', []), under };
}

/**
 * Reads the committed offsets, then the rows: every committed offset must have all the records before it stored
 * (the rows only grow, so reading them second cannot hide a commit ahead of them). Returns both.
 */
async function committedNotAhead(groupId: string, topic: string, source: string) {
  const committed = await kit.committed(groupId, topic);
  const rows = await storedRows(source, committed);
  for (const [p, offset] of Object.entries(committed)) {
    const expected = Math.max(0, Number(offset));
    expect(rows.under[Number(p)], `partition ${p} committed at ${offset}`).toBe(expected);
  }
  return { committed, rows: rows.total };
}

/**
 * Waits until the coordinator describes the group as Stable with two members holding one partition of `topic`
 * each; also checks, at every look, that no committed offset is ahead of the stored rows.
 */
async function stableWithTwo(groupId: string, topic: string, source: string, timeoutMs: number) {
  return eventually(
    'the group stable with both members',
    async () => {
      await committedNotAhead(groupId, topic, source);
      const [group] = (await kit.admin.describeGroups([groupId])).groups;
      if (group?.state !== 'Stable' || group.members.length !== 2) return undefined;
      const owners = group.members.map((m) => ({
        clientId: m.clientId,
        partitions: AssignerProtocol.MemberAssignment.decode(m.memberAssignment)?.assignment[topic] ?? [],
      }));
      return owners.every((o) => o.partitions.length === 1) ? { at: Date.now(), owners } : undefined;
    },
    timeoutMs,
  );
}

describe.skipIf(needs.skipReason)('Kafka consumer group with a backlog', () => {
  it('commits offsets within a long batch, never ahead of the stored rows', async () => {
    // Prepare: 2,500 records on one partition, one fetch: one batch of about 15 s at ~6 ms a record
    const total = 2500;
    const topic = await kit.topic('long-batch', 1);
    const groupId = kit.group('long-batch');
    const source = 'long-batch';
    await produceBacklog(topic, 1, total);
    const delay = { ms: 4 };
    const ingestion = slowedIngestion(source, topic, delay);
    const consumer = createKafkaConsumer({
      source,
      brokers,
      topics: [topic],
      groupId,
      ingestion: ingestion.of('A'),
    });
    try {
      // Act
      await consumer.start();
      const firstCommit = await eventually(
        'a first commit',
        async () => {
          const seen = await committedNotAhead(groupId, topic, source);
          return Number(seen.committed[0]) > 0 ? seen : undefined;
        },
        40_000,
      );
      delay.ms = 0;
      await eventually(
        'the whole partition committed',
        async () => {
          const seen = await committedNotAhead(groupId, topic, source);
          return seen.committed[0] === String(total) ? seen : undefined;
        },
        40_000,
      );
      // Assess: the first commit came while the batch was far from done (it holds the whole partition)
      expect(Number(firstCommit.committed[0])).toBeLessThan(total - 500);
      expect(firstCommit.rows).toBeLessThan(total - 500);
      expect((await storedRows(source, {})).total).toBe(total);
      expect(ingestion.calls).toHaveLength(total);
      expect(ingestion.calls.every((c) => !c.failed)).toBe(true);
    } finally {
      await consumer.close();
    }
  }, 60_000);

  it('lets a second member join within seconds while the first works through a backlog, losing no record', async () => {
    // Prepare: 3,000 records on each of two partitions, all in the first member's first fetch (a batch of about
    // 20 s per partition at ~6 ms a record); kafkajs's rebalance timeout is 60 s.
    const perPartition = 3000;
    const total = 2 * perPartition;
    const topic = await kit.topic('join-backlog', 2);
    const groupId = kit.group('join-backlog');
    const source = 'join-backlog';
    await produceBacklog(topic, 2, total);
    const delay = { ms: 4 };
    const ingestion = slowedIngestion(source, topic, delay);
    const member = (name: string) =>
      createKafkaConsumer({
        source,
        brokers,
        topics: [topic],
        groupId,
        clientId: `queuebox-test-${name}`,
        ingestion: ingestion.of(name),
      });
    const members: KafkaConsumer[] = [];
    try {
      // Act: B joins once A stored 300 records of its first batch
      const a = member('A');
      members.push(a);
      await a.start();
      await eventually(
        'A in its first batch',
        () => (ingestion.calls.length >= 300 ? true : undefined),
        20_000,
      );
      const b = member('B');
      members.push(b);
      const joinedAt = Date.now();
      const bStarted = b.start();
      const stable = await stableWithTwo(groupId, topic, source, 50_000);
      await bStarted;
      const stalledMs = stable.at - joinedAt;
      delay.ms = 0;
      await eventually(
        'both partitions committed to their end',
        async () => {
          const seen = await committedNotAhead(groupId, topic, source);
          return seen.committed[0] === String(perPartition) && seen.committed[1] === String(perPartition)
            ? seen
            : undefined;
        },
        40_000,
      );
      // Assess
      expect(stalledMs).toBeLessThan(15_000);
      const stored = await storedRows(source, { 0: String(perPartition), 1: String(perPartition) });
      expect(stored).toEqual({ total, under: { 0: perPartition, 1: perPartition } });
      // A committed what it stored when it left its batch, so B took over about where A stopped.
      expect(ingestion.calls.length - total).toBeLessThan(500);
      // A took no record of B's partition once the group was stable (it had left its batch to rejoin).
      const ofB = stable.owners.find((o) => o.clientId === 'queuebox-test-B')?.partitions[0];
      const lateA = ingestion.calls.filter(
        (c) => c.member === 'A' && c.partition === ofB && c.at > stable.at,
      );
      expect(lateA).toHaveLength(0);
      expect(ingestion.calls.some((c) => c.member === 'B' && c.partition === ofB)).toBe(true);
    } finally {
      await Promise.all(members.map((m) => m.close()));
    }
  }, 90_000);

  it('lets a second member join within seconds while the first retries a record during a store outage', async () => {
    // Prepare: 10 records on each of two partitions; the database is down from the start
    const perPartition = 10;
    const topic = await kit.topic('join-outage', 2);
    const groupId = kit.group('join-outage');
    const source = 'join-outage';
    await produceBacklog(topic, 2, 2 * perPartition);
    const control = { ms: 0, down: true };
    const ingestion = slowedIngestion(source, topic, control);
    const errors: unknown[] = [];
    const member = (name: string) =>
      createKafkaConsumer({
        source,
        brokers,
        topics: [topic],
        groupId,
        clientId: `queuebox-test-${name}`,
        retryDelayMs: 200,
        ingestion: ingestion.of(name),
        onError: (error, { during }) => {
          if (during === 'ingest') errors.push(error);
        },
      });
    const members: KafkaConsumer[] = [];
    try {
      // Act: B joins while A retries its first record
      const a = member('A');
      members.push(a);
      await a.start();
      await eventually('A retrying', () => (errors.length >= 3 ? true : undefined), 20_000);
      const b = member('B');
      members.push(b);
      const joinedAt = Date.now();
      const bStarted = b.start();
      // Without the rebalance noticed, A holds the group in PreparingRebalance until kafkajs's 60 s rebalance
      // timeout evicts it, and then it keeps retrying a record it no longer owns.
      const stable = await stableWithTwo(groupId, topic, source, 30_000);
      await bStarted;
      const stalledMs = stable.at - joinedAt;
      const committedWhileDown = await kit.committed(groupId, topic);
      control.down = false;
      await eventually(
        'both partitions committed to their end',
        async () => {
          const seen = await committedNotAhead(groupId, topic, source);
          return seen.committed[0] === String(perPartition) && seen.committed[1] === String(perPartition)
            ? seen
            : undefined;
        },
        20_000,
      );
      // Assess
      expect(stalledMs).toBeLessThan(15_000);
      expect(errors[0]).toBeInstanceOf(StoreUnavailableError);
      expect(committedWhileDown).toEqual({ 0: '-1', 1: '-1' });
      const stored = await storedRows(source, { 0: String(perPartition), 1: String(perPartition) });
      expect(stored).toEqual({ total: 2 * perPartition, under: { 0: perPartition, 1: perPartition } });
      const ofB = stable.owners.find((o) => o.clientId === 'queuebox-test-B')?.partitions[0];
      const lateA = ingestion.calls.filter(
        (c) => c.member === 'A' && c.partition === ofB && c.at > stable.at,
      );
      expect(lateA).toHaveLength(0);
    } finally {
      await Promise.all(members.map((m) => m.close()));
    }
  }, 60_000);
});
