/**
 * The local runtime as a real process consuming a NATS JetStream source (durable pull consumer, `run(signal)`),
 * on the machine's NATS server and a real PostgreSQL: a message published to the stream becomes an inbox row, is
 * relayed and delivered to a real HTTP receiver; a second message with the same idempotency key is consumed as a
 * duplicate; SIGTERM exits 0.
 */
import { randomBytes } from 'node:crypto';
import { type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  baseUrlOf,
  cleanup,
  type Delivery,
  eventually,
  type QueueBoxProcess,
  type Receiver,
  startQueueBox,
  startReceiver,
} from './support.ts';

const needs = await requireServices('local nats tests', ['postgres', 'nats']);
const natsUrl = needs.url.nats;

const run = randomBytes(4).toString('hex');
const stream = `QB_LOCAL_${run}`;
const subject = `qblocal.${run}`;

describe.skipIf(needs.skipReason)('local runtime with a NATS JetStream source (real process)', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'local_nats', 2);
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let receiver: Receiver;
  let queuebox: QueueBoxProcess;

  async function deliveryWithKey(key: string): Promise<Delivery> {
    let found: Delivery | undefined;
    await eventually(async () => {
      found = receiver.deliveries.find((d) => d.headers['x-idempotency-key'] === key);
      return found !== undefined;
    }, `the delivery of ${key}`);
    return found as Delivery;
  }

  beforeAll(async () => {
    nc = await connect({ servers: natsUrl });
    jsm = await jetstreamManager(nc);
    // The test publishes before the runtime may have set anything up, so the stream exists first.
    await jsm.streams.add({ name: stream, subjects: [`${subject}.>`] });
    receiver = await startReceiver();
    queuebox = await startQueueBox({
      yaml: `database:
  url: ${JSON.stringify(needs.url.postgres)}
  schema: ${schema.name}
http: { port: 0, host: 127.0.0.1 }
inbox:
  relay: { pollIntervalMs: 50 }
outbox:
  pollIntervalMs: 50
sources:
  jobs-in:
    type: nats
    servers: [${JSON.stringify(natsUrl)}]
    stream: ${stream}
    subject: ${subject}.>
    eventTypeFromHeader: Event-Type
    idempotencyKey: { header: Job-Id }
    topic: "jobs.{{ eventType }}"
destinations:
  receiver: { type: http, url: ${receiver.url}, timeoutMs: 15000 }
routes:
  - { match: "jobs.#", destination: receiver }
`,
    });
    await baseUrlOf(queuebox);
  });

  afterAll(async () => {
    await cleanup();
    await receiver?.close();
    await jsm?.streams.delete(stream).catch(() => undefined);
    await nc?.close();
  });

  it('stores a JetStream message, relays it and delivers it to the HTTP receiver; a repeat is a duplicate', async () => {
    const js = jetstream(nc);
    const publish = (msgID: string) => {
      const h = headers();
      h.set('Event-Type', 'resize');
      h.set('Job-Id', `job-${run}`);
      return js.publish(`${subject}.images`, JSON.stringify({ image: 'a.png' }), { msgID, headers: h });
    };

    await publish(`first-${run}`);
    const delivery = await deliveryWithKey(`job-${run}`);
    await publish(`second-${run}`);
    await eventually(async () => {
      const info = await jsm.consumers.info(stream, 'queuebox-jobs-in');
      return info.num_pending + info.num_ack_pending === 0 && info.delivered.stream_seq >= 2;
    }, 'the second message consumed and acked');

    expect(JSON.parse(delivery.body)).toEqual({ image: 'a.png' });
    expect(delivery.headers['x-source']).toBe('jobs-in');
    const { rows } = await pool.query<{ n: number; state: string }>(
      `SELECT count(*)::int AS n, min(state) AS state FROM "${schema.name}".inbox WHERE source = 'jobs-in'`,
    );
    expect(rows[0]).toEqual({ n: 1, state: 'processed' });
    expect(await queuebox.stop('SIGTERM')).toBe(0);
  });
});
