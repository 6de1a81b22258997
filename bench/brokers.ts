/**
 * Outbox → broker benchmark: rows per second from the first claim to the last row sent, through the real outbox
 * poller (`createOutboxPoller` with the publishers of packages/rabbitmq, packages/kafka, packages/nats and
 * packages/aws, wired as packages/use-cases does it), for RabbitMQ with publisher confirms, Kafka, NATS JetStream,
 * core NATS and SQS (standard and FIFO queues on ElasticMQ, `SendMessageBatch` of 10). Each count is checked
 * afterwards with a real consumer or the broker's own counters. Per broker it also prints the CPU per 1,000 rows of
 * this process, of its PostgreSQL backends (found by application_name) and of a local nats-server, and the poller's
 * statements per 1,000 rows. See bench/README.md.
 *
 *   npx tsx bench/brokers.ts
 *
 * Environment: QUEUEBOX_BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test),
 * QUEUEBOX_BENCH_ROWS (rows per broker, default 20000), QUEUEBOX_BENCH_BATCH (rows per claim, default QueueBox's
 * `outbox.batchSize`), QUEUEBOX_BENCH_SECONDS (cap on one drain, default 120),
 * QUEUEBOX_BENCH_BROKERS (default `rabbitmq,kafka,nats-jetstream,nats-core,sqs,sqs-fifo`), QUEUEBOX_BENCH_AMQP_URL
 * (default amqp://guest:guest@127.0.0.1:5672), QUEUEBOX_BENCH_KAFKA (default 127.0.0.1:9092), QUEUEBOX_BENCH_NATS_URL
 * (default nats://127.0.0.1:4222), QUEUEBOX_BENCH_SQS_ENDPOINT (default http://127.0.0.1:9324, ElasticMQ).
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as natsConnect } from '@nats-io/transport-node';
import { awsPublisherFactories } from '@queuebox/aws';
import { parseConfig } from '@queuebox/config';
import { CONFIG_DEFAULTS, type NewOutboxMessage, type OutboxStore } from '@queuebox/core';
import { kafkaPublisherFactory } from '@queuebox/kafka';
import { natsPublisherFactory } from '@queuebox/nats';
import { createOutboxPoller, createPublishers, defaultPublisherFactories } from '@queuebox/outbox';
import { rabbitmqPublisherFactory } from '@queuebox/rabbitmq';
import { openPostgresStore } from '@queuebox/store-postgres';
import amqp from 'amqplib';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { childInput, forkBenchChild, toParent } from './support/child.ts';
import { format, loadAverage, machineLine } from './support/machine.ts';

const POSTGRES_URL = process.env.QUEUEBOX_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const ROWS = Number(process.env.QUEUEBOX_BENCH_ROWS ?? 20_000);
const CAP_SECONDS = Number(process.env.QUEUEBOX_BENCH_SECONDS ?? 120);
const AMQP_URL = process.env.QUEUEBOX_BENCH_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const KAFKA_BROKERS = (process.env.QUEUEBOX_BENCH_KAFKA ?? '127.0.0.1:9092').split(',');
const NATS_URL = process.env.QUEUEBOX_BENCH_NATS_URL ?? 'nats://127.0.0.1:4222';
const SQS_ENDPOINT = process.env.QUEUEBOX_BENCH_SQS_ENDPOINT ?? 'http://127.0.0.1:9324';
/** Rows per claim; unset, QueueBox's default (`outbox.batchSize`). */
const BATCH =
  process.env.QUEUEBOX_BENCH_BATCH === undefined ? undefined : Number(process.env.QUEUEBOX_BENCH_BATCH);
const KEYS = 1000;
const INSERT_CHUNK = 500;
const KAFKA_PARTITIONS = 3;
const TOPIC = 'orders.created';

const BROKERS = ['rabbitmq', 'kafka', 'nats-jetstream', 'nats-core', 'sqs', 'sqs-fifo'] as const;
type Broker = (typeof BROKERS)[number];
const TARGETS: Record<Broker, number> = {
  rabbitmq: 2000,
  kafka: 5000,
  'nats-jetstream': 5000,
  'nats-core': 5000,
  // No target was set for SQS; RabbitMQ's is the yardstick (a request per 10 rows, like a confirm per batch).
  sqs: 2000,
  'sqs-fifo': 2000,
};

/** What the core-NATS subscriber process (this file, forked) is told and answers. */
interface SubscriberInput {
  readonly role: 'nats-core-subscriber';
  readonly url: string;
  readonly subject: string;
}
type SubscriberMessage =
  | { readonly type: 'ready' }
  | { readonly type: 'count'; readonly messages: number; readonly distinctIds: number };

/** One broker's destination, and how to check what reached it. */
interface Target {
  readonly destination: Record<string, unknown>;
  /** Messages the broker holds (or a subscriber got), and distinct outbox ids among them where known. */
  count(): Promise<{ messages: number; distinctIds?: number; via: string }>;
  cleanup(): Promise<void>;
}

const run = randomBytes(4).toString('hex');
const schema = `bench_${run}`;

async function rabbitmqTarget(): Promise<Target> {
  const exchange = `qb.bench.${run}`;
  const queue = `qb.bench.${run}`;
  const connection = await amqp.connect(AMQP_URL);
  const channel = await connection.createChannel();
  await channel.assertExchange(exchange, 'direct', { durable: true, autoDelete: false });
  await channel.assertQueue(queue, { durable: true, autoDelete: false });
  await channel.bindQueue(queue, exchange, TOPIC);
  return {
    destination: { type: 'rabbitmq', url: AMQP_URL, exchange },
    async count() {
      const { messageCount } = await channel.checkQueue(queue);
      // A real consumer too: every message read back, distinct outbox ids counted.
      const ids = new Set<string>();
      let read = 0;
      await channel.prefetch(1000);
      await new Promise<void>((resolve, reject) => {
        if (messageCount === 0) return resolve();
        const timer = setTimeout(() => reject(new Error('RabbitMQ read-back timed out')), 60_000);
        void channel.consume(queue, (message) => {
          if (!message) return;
          read++;
          ids.add(String(message.properties.messageId));
          channel.ack(message);
          if (read === messageCount) {
            clearTimeout(timer);
            resolve();
          }
        });
      });
      return {
        messages: messageCount,
        distinctIds: ids.size,
        via: `queue depth ${format(messageCount)}, consumer read ${format(read)}`,
      };
    },
    async cleanup() {
      await channel.deleteQueue(queue).catch(() => undefined);
      await channel.deleteExchange(exchange).catch(() => undefined);
      await connection.close().catch(() => undefined);
    },
  };
}

async function kafkaTarget(): Promise<Target> {
  const topic = `qb-bench-${run}`;
  const admin = new Kafka({
    brokers: KAFKA_BROKERS,
    clientId: 'queuebox-bench',
    logLevel: logLevel.NOTHING,
  }).admin();
  await admin.connect();
  await admin.createTopics({
    topics: [{ topic, numPartitions: KAFKA_PARTITIONS, replicationFactor: 1 }],
    waitForLeaders: true,
  });
  return {
    destination: { type: 'kafka', brokers: KAFKA_BROKERS, topic },
    async count() {
      // The broker's own counters: high watermarks of every partition (no transactions, so no control records).
      const offsets = await admin.fetchTopicOffsets(topic);
      const messages = offsets.reduce((sum, o) => sum + Number(o.high) - Number(o.low), 0);
      return { messages, via: `sum of ${offsets.length} partitions' high watermarks` };
    },
    async cleanup() {
      await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
      await admin.disconnect().catch(() => undefined);
    },
  };
}

async function jetStreamTarget(): Promise<Target> {
  const stream = `QB_BENCH_${run}`;
  const prefix = `qb.bench.${run}.js`;
  const nc = await natsConnect({ servers: NATS_URL });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: stream, subjects: [`${prefix}.>`] });
  return {
    destination: { type: 'nats', servers: [NATS_URL], subject: `${prefix}.{{ topic }}`, jetstream: true },
    async count() {
      // Stored once per msgID within the duplicate window, so the count is of distinct outbox ids.
      const info = await jsm.streams.info(stream);
      return { messages: info.state.messages, via: 'stream state' };
    },
    async cleanup() {
      await jsm.streams.delete(stream).catch(() => undefined);
      await nc.close().catch(() => undefined);
    },
  };
}

async function coreNatsTarget(): Promise<Target> {
  const prefix = `qb.bench.${run}.core`;
  // Core NATS keeps nothing: the subscriber must be listening throughout, in its own process so that it does not
  // share the publisher's event loop.
  const child = forkBenchChild<SubscriberMessage>('brokers.ts', {
    role: 'nats-core-subscriber',
    url: NATS_URL,
    subject: `${prefix}.>`,
  } satisfies SubscriberInput);
  await child.next((m): m is Extract<SubscriberMessage, { type: 'ready' }> => m.type === 'ready', 30_000);
  return {
    destination: { type: 'nats', servers: [NATS_URL], subject: `${prefix}.{{ topic }}`, jetstream: false },
    async count() {
      // Whatever is still on the wire after the last flush gets a moment to arrive.
      await new Promise((resolve) => setTimeout(resolve, 500));
      child.send({ type: 'count' });
      const answer = await child.next(
        (m): m is Extract<SubscriberMessage, { type: 'count' }> => m.type === 'count',
        10_000,
      );
      return {
        messages: answer.messages,
        distinctIds: answer.distinctIds,
        via: 'subscriber process',
      };
    },
    async cleanup() {
      child.send({ type: 'close' });
      await child.stop(5000);
    },
  };
}

async function sqsTarget(fifo: boolean): Promise<Target> {
  // ElasticMQ checks no signature, but the SDK signs every request: the default chain needs some credentials.
  process.env.AWS_ACCESS_KEY_ID ??= 'queuebox-bench';
  process.env.AWS_SECRET_ACCESS_KEY ??= 'queuebox-bench';
  const client = new SQSClient({ region: 'us-east-1', endpoint: SQS_ENDPOINT });
  const name = `qb-bench-${run}${fifo ? '.fifo' : ''}`;
  const created = await client.send(
    new CreateQueueCommand({ QueueName: name, Attributes: fifo ? { FifoQueue: 'true' } : {} }),
  );
  const queueUrl = created.QueueUrl ?? '';
  return {
    destination: { type: 'sqs', queueUrl, endpoint: SQS_ENDPOINT, region: 'us-east-1' },
    async count() {
      const answer = await client.send(
        new GetQueueAttributesCommand({
          QueueUrl: queueUrl,
          AttributeNames: ['ApproximateNumberOfMessages'],
        }),
      );
      // FIFO: one message per MessageDeduplicationId (the outbox id) within 5 minutes, so the count is distinct ids.
      return {
        messages: Number(answer.Attributes?.ApproximateNumberOfMessages ?? 0),
        via: `queue attribute ApproximateNumberOfMessages${fifo ? ' (deduplicated by outbox id)' : ''}`,
      };
    },
    async cleanup() {
      await client.send(new DeleteQueueCommand({ QueueUrl: queueUrl })).catch(() => undefined);
      client.destroy();
    },
  };
}

const TARGET_FACTORIES: Record<Broker, () => Promise<Target>> = {
  rabbitmq: rabbitmqTarget,
  kafka: kafkaTarget,
  'nats-jetstream': jetStreamTarget,
  'nats-core': coreNatsTarget,
  sqs: () => sqsTarget(false),
  'sqs-fifo': () => sqsTarget(true),
};

/** The same factories the outbox-tick function and the local runtime register. */
const publisherFactories = {
  ...defaultPublisherFactories,
  rabbitmq: rabbitmqPublisherFactory,
  kafka: kafkaPublisherFactory,
  nats: natsPublisherFactory,
  ...awsPublisherFactories,
};

interface Result {
  readonly broker: Broker;
  readonly rate: number;
  readonly elapsedS: number;
  readonly sent: number;
  readonly notSent: number;
  readonly capped: boolean;
  readonly loadBefore: string;
  readonly loadAfter: string;
  readonly arrived: { messages: number; distinctIds?: number; via: string };
  /** CPU seconds during the drain: this process, its PostgreSQL backends, the NATS server (when it runs here). */
  readonly cpu: { process: number; postgres: number; natsServer: number | undefined };
  /** Statements the poller sent: claims, settles (markSent, retry, markDead, release) and reclaims. */
  readonly statements: { claims: number; settles: number; reclaims: number };
}

/** user + system CPU ticks of `pid` (fields 14 and 15 of /proc/<pid>/stat), or undefined when it is gone. */
function cpuTicks(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(rest[11]) + Number(rest[12]);
  } catch {
    return undefined;
  }
}

/** The pid of the local nats-server, if one runs on this machine. */
function natsServerPid(): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'nats-server') return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

const TICKS_PER_SECOND = 100;

function rowsToInsert(from: number, count: number): NewOutboxMessage[] {
  return Array.from({ length: count }, (_, i) => {
    const n = from + i;
    return {
      topic: TOPIC,
      key: `key-${String(n % KEYS).padStart(4, '0')}`,
      payload: { order: n, note: 'benchmark payload of modest size' },
      headers: { 'content-type': 'application/json' },
      maxAttempts: 10,
    };
  });
}

async function measure(broker: Broker, admin: pg.Pool): Promise<Result> {
  const target = await TARGET_FACTORIES[broker]();
  // Tagged so that its backends can be found in pg_stat_activity and their CPU read from /proc.
  const applicationName = `qb-bench-${run}-${broker}`;
  const url = new URL(POSTGRES_URL);
  url.searchParams.set('application_name', applicationName);
  const store = await openPostgresStore({ url: url.toString(), schema, poolSize: 4 });
  try {
    await admin.query(`TRUNCATE "${schema}".outbox`);
    for (let at = 0; at < ROWS; at += INSERT_CHUNK) {
      await store.outbox.insert(rowsToInsert(at, Math.min(INSERT_CHUNK, ROWS - at)));
    }
    await admin.query(`VACUUM ANALYZE "${schema}".outbox`);

    const config = parseConfig({
      database: { provider: 'postgres', url: POSTGRES_URL, schema },
      outbox: BATCH === undefined ? {} : { batchSize: BATCH },
      destinations: { bench: target.destination },
      routes: [{ match: '#', destination: 'bench' }],
    });
    let firstClaim: number | undefined;
    let lastSent = 0;
    let sent = 0;
    const statements = { claims: 0, settles: 0, reclaims: 0 };
    const outbox: OutboxStore = {
      ...store.outbox,
      claim: (options) => {
        firstClaim ??= performance.now();
        statements.claims++;
        return store.outbox.claim(options);
      },
      markSent: (items) => {
        statements.settles++;
        return store.outbox.markSent(items);
      },
      retry: (items) => {
        statements.settles++;
        return store.outbox.retry(items);
      },
      markDead: (items) => {
        statements.settles++;
        return store.outbox.markDead(items);
      },
      release: (items) => {
        statements.settles++;
        return store.outbox.release(items);
      },
      reclaimExpired: (limit) => {
        statements.reclaims++;
        return store.outbox.reclaimExpired(limit);
      },
    };
    // The backends' CPU is read every 100 ms, so that one the pool closes meanwhile still counts up to then.
    const backendTicks = new Map<number, { first: number; last: number }>();
    const readBackends = async () => {
      const { rows } = await admin.query<{ pid: number }>(
        'SELECT pid FROM pg_stat_activity WHERE application_name = $1',
        [applicationName],
      );
      for (const { pid } of rows) {
        const ticks = cpuTicks(pid);
        if (ticks === undefined) continue;
        const seen = backendTicks.get(pid);
        if (seen) seen.last = ticks;
        else backendTicks.set(pid, { first: ticks, last: ticks });
      }
    };
    // The pool's connections are opened before the clock starts, so their first reading is from before the drain.
    await Promise.all(Array.from({ length: 4 }, () => store.outbox.get('0')));
    await readBackends();
    const sampler = setInterval(() => void readBackends().catch(() => undefined), 100);
    const natsPid = broker.startsWith('nats') ? natsServerPid() : undefined;
    const natsBefore = natsPid === undefined ? undefined : cpuTicks(natsPid);
    const processBefore = process.cpuUsage();
    const publishers = createPublishers(config.destinations, publisherFactories);
    const poller = createOutboxPoller({
      store: outbox,
      publishers,
      routes: config.routes,
      destinations: config.destinations,
      options: config.outbox,
      onSettled: (rows) => {
        const now = performance.now();
        for (const row of rows) {
          if (row.outcome !== 'sent') continue;
          sent++;
          lastSent = now;
        }
      },
    });
    // Connections are opened on first use; one warm-up publish outside the clock would need a row of its own,
    // so the connect is inside the measured time, as it is for a cold outbox-tick.
    const loadBefore = loadAverage();
    const capAt = Date.now() + CAP_SECONDS * 1000;
    let notSent = 0;
    let capped = false;
    try {
      while (sent < ROWS) {
        if (Date.now() >= capAt) {
          capped = true;
          break;
        }
        const report = await poller.drain({ deadline: Math.min(Date.now() + 10_000, capAt) });
        notSent += report.retried + report.dead + report.stale;
        if (report.stoppedFor === 'empty' && sent < ROWS) {
          // Rows retried after a failed publish wait for their backoff; keep polling until the cap.
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
    } finally {
      await poller.close();
      await publishers.close();
      clearInterval(sampler);
    }
    const processCpu = process.cpuUsage(processBefore);
    const natsAfter = natsPid === undefined ? undefined : cpuTicks(natsPid);
    await readBackends();
    let postgresTicks = 0;
    for (const { first, last } of backendTicks.values()) postgresTicks += last - first;
    const loadAfter = loadAverage();
    const elapsedS = ((lastSent || performance.now()) - (firstClaim ?? performance.now())) / 1000;
    const arrived = await target.count();
    return {
      broker,
      rate: sent / elapsedS,
      elapsedS,
      sent,
      notSent,
      capped,
      loadBefore,
      loadAfter,
      arrived,
      cpu: {
        process: (processCpu.user + processCpu.system) / 1e6,
        postgres: postgresTicks / TICKS_PER_SECOND,
        natsServer:
          natsBefore === undefined || natsAfter === undefined
            ? undefined
            : (natsAfter - natsBefore) / TICKS_PER_SECOND,
      },
      statements,
    };
  } finally {
    await store.close();
    await target.cleanup();
  }
}

async function main(): Promise<void> {
  const wanted = (process.env.QUEUEBOX_BENCH_BROKERS ?? BROKERS.join(','))
    .split(',')
    .map((b) => b.trim()) as Broker[];
  const unknown = wanted.filter((b) => !BROKERS.includes(b));
  if (unknown.length > 0)
    throw new Error(`Unknown broker(s): ${unknown.join(', ')}; known: ${BROKERS.join(', ')}`);

  const admin = new pg.Pool({ connectionString: POSTGRES_URL, max: 1 });
  try {
    const { rows: version } = await admin.query<{ v: string }>(
      "SELECT current_setting('server_version') AS v",
    );
    console.log(`PostgreSQL ${version[0]?.v}, schema ${schema}; ${machineLine()}`);
    console.log(
      `${format(ROWS)} rows per broker over ${format(KEYS)} keys, batch ${BATCH ?? `${CONFIG_DEFAULTS.outbox.batchSize} (the default)`}, one poller in this process, ` +
        `cap ${CAP_SECONDS} s per broker; run id ${run}.\n`,
    );
    const store = await openPostgresStore({ url: POSTGRES_URL, schema, poolSize: 1 });
    await store.migrate();
    await store.close();

    const results: Result[] = [];
    let failed = false;
    for (const broker of wanted) {
      const r = await measure(broker, admin);
      results.push(r);
      const honest = r.arrived.messages === r.sent && (r.arrived.distinctIds ?? r.sent) === r.sent;
      if (!honest || r.sent !== ROWS) failed = true;
      const verdict = r.rate >= TARGETS[broker] ? 'meets' : 'BELOW';
      console.log(
        `${broker.padEnd(15)} ${format(r.rate).padStart(6)} rows/s  (${format(r.sent)} sent in ` +
          `${r.elapsedS.toFixed(2)} s, first claim → last sent; load ${r.loadBefore} → ${r.loadAfter})  ` +
          `${verdict} the ${format(TARGETS[broker])}/s target`,
      );
      const ids =
        r.arrived.distinctIds === undefined ? '' : `, ${format(r.arrived.distinctIds)} distinct ids`;
      console.log(
        `${' '.repeat(15)} arrived: ${format(r.arrived.messages)} messages${ids} (${r.arrived.via}); ` +
          `not sent on a try: ${r.notSent}${r.capped ? '; CAP HIT' : ''}${honest ? '' : '; COUNT MISMATCH'}`,
      );
      const perThousand = (seconds: number) => `${format((seconds * 1e6) / r.sent)} ms`;
      const nats = r.cpu.natsServer === undefined ? '' : `, nats-server ${perThousand(r.cpu.natsServer)}`;
      const perK = (n: number) => ((n * 1000) / r.sent).toFixed(1);
      console.log(
        `${' '.repeat(15)} CPU per 1,000 rows: this process ${perThousand(r.cpu.process)}, its PostgreSQL ` +
          `backends ${perThousand(r.cpu.postgres)}${nats}; statements per 1,000 rows: ${perK(r.statements.claims)} ` +
          `claims, ${perK(r.statements.settles)} settles, ${perK(r.statements.reclaims)} reclaims`,
      );
    }
    console.log('\nSummary:');
    for (const r of results) {
      console.log(
        `  ${r.broker}: ${format(r.rate)} rows/s (target ${format(TARGETS[r.broker])}), load ${r.loadBefore}`,
      );
    }
    if (failed) {
      console.error('A count did not match: see above.');
      process.exitCode = 1;
    }
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await admin.end();
  }
}

/** The core-NATS subscriber, when this file runs as the child `coreNatsTarget` forks. */
async function subscriber(input: SubscriberInput): Promise<void> {
  const nc = await natsConnect({ servers: input.url });
  const ids = new Set<string>();
  let messages = 0;
  const subscription = nc.subscribe(input.subject, {
    callback: (_error, message) => {
      messages++;
      const id = message.headers?.get('message-id');
      if (id) ids.add(id);
    },
  });
  await nc.flush();
  process.on('message', (message: { type: string }) => {
    if (message.type === 'count') {
      toParent({ type: 'count', messages, distinctIds: ids.size } satisfies SubscriberMessage);
    }
    if (message.type === 'close') {
      subscription.unsubscribe();
      void nc.close().then(() => process.disconnect());
    }
  });
  toParent({ type: 'ready' } satisfies SubscriberMessage);
}

if (process.send && process.argv[2]?.startsWith('{')) {
  await subscriber(childInput<SubscriberInput>());
} else {
  await main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
