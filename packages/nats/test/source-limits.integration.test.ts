/**
 * What a JetStream source must bound or refuse, on a real NATS server: the bytes of one fetch (a private server with a
 * small `max_pending`, which closes a client it cannot write a batch to as a slow consumer), the pull's deadline
 * within a slow batch, and an operator's consumer whose acks would lose a message whose ingestion failed.
 */
import { randomBytes } from 'node:crypto';
import {
  AckPolicy,
  DeliverPolicy,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream';
import { connect, type NatsConnection, nanos } from '@nats-io/transport-node';
import type { BrokerIngestionPort, BrokerMessage, Logger } from '@queuebox/core';
import { silentLogger } from '@queuebox/core';
import { requireServices } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { natsServerBinary, startPrivateNatsServer } from '../../../test/brokers/support/nats-server.ts';
import { createNatsSource, NatsConsumerRefusedError, NatsUnavailableError } from '../src/index.ts';

const needs = await requireServices('nats source limits', ['nats']);
const run = randomBytes(4).toString('hex').toUpperCase();
const binary = natsServerBinary();

let nc: NatsConnection;
let jsm: JetStreamManager;
const streams: string[] = [];

beforeAll(async () => {
  if (!needs.available) return;
  nc = await connect({ servers: needs.url.nats });
  jsm = await jetstreamManager(nc);
});

afterAll(async () => {
  if (!needs.available) return;
  for (const stream of streams) await jsm.streams.delete(stream).catch(() => undefined);
  await nc.close();
});

/**
 * An inbox that stores every message it is given (taking `ms` for each), keeping the time each ingestion started
 * and the default key of each message, so a message given twice shows.
 */
function recordingIngestion(ms = 0): BrokerIngestionPort & {
  readonly keys: string[];
  readonly startedAt: number[];
} {
  const keys: string[] = [];
  const startedAt: number[] = [];
  return {
    keys,
    startedAt,
    async ingest(_source: string, message: BrokerMessage) {
      startedAt.push(Date.now());
      if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
      keys.push(message.defaultIdempotencyKey ?? '');
      return { status: 'stored', id: String(keys.length), wakeRelay: false };
    },
  };
}

/** A logger that keeps its WARN lines. */
function warnings(): Logger & { readonly lines: { message: string; fields?: unknown }[] } {
  const lines: { message: string; fields?: unknown }[] = [];
  const logger: Logger & { lines: typeof lines } = {
    ...silentLogger,
    lines,
    warn: (message, fields) => lines.push({ message, fields }),
    child: () => logger,
  };
  return logger;
}

/**
 * A stream `FIXNATS_<name>_<run>` on the server of `connection` (default the machine's), holding `count` messages
 * with `padding` bytes each beside their number; `maxMsgSize`: the stream's `max_msg_size` (default none).
 */
async function streamOf(name: string, count: number, { padding = 0, connection = nc, maxMsgSize = -1 } = {}) {
  const stream = `FIXNATS_${name}_${run}`;
  const subject = `fixnats.${name.toLowerCase()}.${run}`;
  await (await jetstreamManager(connection)).streams.add({
    name: stream,
    subjects: [`${subject}.>`],
    max_msg_size: maxMsgSize,
  });
  const js = jetstream(connection);
  for (let n = 0; n < count; n++)
    await js.publish(`${subject}.x`, JSON.stringify({ n, pad: 'x'.repeat(padding) }));
  return { stream, subject: `${subject}.>` };
}

describe.skipIf(needs.skipReason)(`NATS source limits on ${needs.via.nats}`, () => {
  it.runIf('path' in binary)(
    'fetches at most maxBatchBytes at once, and reports a connection the server closed during a fetch as an error',
    async () => {
      // Prepare: a server that closes a client once 256 KiB wait to be written to it (max_payload must fit), and
      // streams of 40 messages of 60 KB: one fetch of them all is 2.4 MB
      const server = await startPrivateNatsServer('path' in binary ? binary.path : '', {
        config: 'max_pending: 262144\nmax_payload: 131072',
      });
      const admin = await connect({ servers: server.url });
      try {
        const bounded = await streamOf('BYTES', 40, {
          padding: 60_000,
          connection: admin,
          maxMsgSize: 65_536,
        });
        const unbounded = await streamOf('NOBYTES', 40, { padding: 60_000, connection: admin });
        const stored = recordingIngestion();
        const fetchErrors: unknown[] = [];
        // 192 KiB per fetch: 3 messages of at most 64 KiB (the stream's max_msg_size)
        const small = createNatsSource({
          source: 'bytes',
          servers: [server.url],
          ...bounded,
          ingestion: stored,
          fetchExpiresMs: 1000,
          maxBatchBytes: 192 * 1024,
        });
        // 64 MiB per fetch, the most the configuration allows: the whole batch of 40 at once
        const large = createNatsSource({
          source: 'nobytes',
          servers: [server.url],
          ...unbounded,
          ingestion: recordingIngestion(),
          fetchExpiresMs: 1000,
          maxBatchBytes: 64 * 1024 * 1024,
          onError: (error, { during }) => {
            if (during === 'fetch') fetchErrors.push(error);
          },
        });
        try {
          // Act
          const report = await small.pull({ deadline: Date.now() + 60_000 });
          const lost = await large.pull({ deadline: Date.now() + 60_000 });
          // Assess: every message in one pull of several fetches, each stored once (before: the server closed the
          // connection, the pull said `empty` after a few, and their acks were lost)
          expect(report).toMatchObject({ fetched: 40, stored: 40, stoppedFor: 'empty' });
          expect(report.error).toBeUndefined();
          expect(new Set(stored.keys).size).toBe(40);
          const info = await (await jetstreamManager(admin)).consumers.info(bounded.stream, 'queuebox-bytes');
          expect(info.num_pending + info.num_ack_pending).toBe(0);
          // A fetch larger than max_pending loses its connection: an error, not `empty` (before: no error at all)
          expect(lost.stoppedFor).toBe('error');
          expect(lost.error).toBeInstanceOf(NatsUnavailableError);
          expect(String(lost.error)).toMatch(/connection to NATS was lost during a fetch/);
          expect(fetchErrors).toEqual([]);
        } finally {
          await small.close();
          await large.close();
        }
      } finally {
        await admin.close();
        await server.dispose();
      }
    },
    90_000,
  );

  it('stops a slow batch at its deadline and gives the rest back at once, for the next pull', async () => {
    // Prepare: 20 messages at 200 ms each (4 s) against a deadline 2.5 s away (a fetch waits at most 1 s)
    // (small messages: one fetch of 32 MiB takes them all)
    const { stream, subject } = await streamOf('DEADLINE', 20, { maxMsgSize: 1024 });
    streams.push(stream);
    const slow = recordingIngestion(200);
    const source = createNatsSource({
      source: 'deadline',
      servers: [needs.url.nats],
      stream,
      subject,
      ingestion: slow,
      fetchExpiresMs: 1000,
    });
    try {
      // Act
      const deadline = Date.now() + 2500;
      const first = await source.pull({ deadline });
      const fast = recordingIngestion();
      const next = createNatsSource({
        source: 'deadline',
        servers: [needs.url.nats],
        stream,
        subject,
        ingestion: fast,
        fetchExpiresMs: 1000,
      });
      const second = await next.pull({ deadline: Date.now() + 10_000 }).finally(() => next.close());
      // Assess: no message was started after the deadline (before: all 20, 1.5 s past it)
      expect(first.stoppedFor).toBe('time');
      expect(first.fetched).toBe(20);
      expect(first.stored).toBeLessThan(20);
      expect(first.nacked).toBe(20 - first.stored);
      expect(slow.startedAt.filter((at) => at >= deadline)).toEqual([]);
      // The rest was given back without a delay: the next pull gets all of it (the ack wait is 30 s), and none twice
      expect(second).toMatchObject({ stored: 20 - first.stored, stoppedFor: 'empty' });
      expect(new Set([...slow.keys, ...fast.keys]).size).toBe(20);
      expect(slow.keys.length + fast.keys.length).toBe(20);
    } finally {
      await source.close();
    }
  }, 30_000);

  it.each([AckPolicy.All, AckPolicy.None])(
    'refuses an existing consumer with ack_policy %s, naming it, and stores nothing from it',
    async (policy) => {
      // Prepare: an operator's consumer whose acks would lose a message whose ingestion failed
      const { stream, subject } = await streamOf(`ACK${policy.toUpperCase()}`, 3);
      streams.push(stream);
      const durable = `fixnats-ack-${policy}-${run}`;
      await jsm.consumers.add(stream, {
        durable_name: durable,
        ack_policy: policy,
        deliver_policy: DeliverPolicy.All,
        filter_subject: subject,
      });
      const ingestion = recordingIngestion();
      const setupErrors: unknown[] = [];
      const source = createNatsSource({
        source: 'acks',
        servers: [needs.url.nats],
        stream,
        subject,
        durable,
        createMissing: false,
        ingestion,
        onError: (error, { during }) => {
          if (during === 'setup') setupErrors.push(error);
        },
      });
      try {
        // Act
        const report = await source.pull({ deadline: Date.now() + 5000 });
        // Assess: before, its messages were fetched and stored (and, with a failure among them, one was lost)
        expect(report).toMatchObject({ fetched: 0, stoppedFor: 'error' });
        expect(report.error).toBeInstanceOf(NatsConsumerRefusedError);
        expect(String(report.error)).toContain(
          `consumer ${durable} of stream ${stream} has ack_policy ${policy}`,
        );
        expect(setupErrors).toHaveLength(1);
        expect(ingestion.keys).toEqual([]);
      } finally {
        await source.close();
      }
    },
  );

  it('warns when an existing consumer filters other subjects than the source configures, and uses it', async () => {
    // Prepare: the consumer takes one subject of the stream; the source names all of them
    const { stream, subject } = await streamOf('FILTER', 2);
    streams.push(stream);
    const durable = `fixnats-filter-${run}`;
    const filter = subject.replace('>', 'x');
    await jsm.consumers.add(stream, {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(30_000),
      filter_subject: filter,
    });
    const logger = warnings();
    const ingestion = recordingIngestion();
    const source = createNatsSource({
      source: 'filter',
      servers: [needs.url.nats],
      stream,
      subject,
      durable,
      createMissing: false,
      ingestion,
      logger,
    });
    try {
      // Act
      const report = await source.pull({ deadline: Date.now() + 5000 });
      // Assess
      expect(report).toMatchObject({ stored: 2, stoppedFor: 'empty' });
      expect(logger.lines).toEqual([
        {
          message: expect.stringMatching(/filters other subjects than the source configures/),
          fields: { source: 'filter', stream, consumer: durable, filterSubjects: [filter], subject },
        },
      ]);
    } finally {
      await source.close();
    }
  });
});
