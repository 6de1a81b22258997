/**
 * A slow ingestion in a JetStream source, on the real NATS server and a real PostgreSQL store: a batch whose
 * messages take longer to store than the consumer's ack wait (a slow transform, a slow database). The messages
 * waiting behind the one being stored must keep their delivery (in-progress acks), so no other replica gets them
 * again meanwhile, and the pull must end as a success: before, nats.js ended such a fetch with `heartbeats missed`
 * (the pull reported an error and functions/nats-source-tick.ts failed its invocation although every message was
 * stored), and the waiting messages ran out of their ack wait and were delivered to the other replica as well.
 */
import { randomBytes } from 'node:crypto';
import { AckPolicy, DeliverPolicy, jetstream } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { createBrokerIngestion } from '@queuebox/inbox';
import { assertSchemaName, requireServices, usePostgresSchema } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { createNatsSource, type NatsPullReport } from '../src/index.ts';
import { useNatsAndStore } from './support/services.ts';

const needs = await requireServices('nats source slow ingestion', ['postgres', 'nats']);
const run = randomBytes(4).toString('hex');
const db = needs.available ? usePostgresSchema(needs.url.postgres, 'nats_src_slow', 2) : undefined;

const services = useNatsAndStore(needs, db);
const stream = `QB_TEST_SLOW_${run}`;
const subject = `qb.test.slow.${run}`;
const durable = `qb-test-slow-${run}`;
services.streams.push(stream);

/** A replica of the source: the real ingestion with a transform function that takes `ms` per message. */
function replica(ms: number, onTransform?: () => void) {
  const ingestion = createBrokerIngestion({
    store: services.store.inbox,
    sources: { slow: { type: 'nats', transform: { function: 'slow' } } },
    transforms: {
      slow: async ({ payload }) => {
        onTransform?.();
        await new Promise((resolve) => setTimeout(resolve, ms));
        return { payload };
      },
    },
  });
  return createNatsSource({
    source: 'slow',
    servers: [needs.url.nats],
    stream,
    subject: `${subject}.>`,
    durable,
    createMissing: false,
    ingestion,
  });
}

describe.skipIf(needs.skipReason)(`NATS source with a slow ingestion on ${needs.via.nats}`, () => {
  it('keeps a batch slower than the ack wait delivered to its pull alone, and ends the pull as a success', async () => {
    // Prepare: an operator's consumer with a 2 s ack wait; 6 messages at 700 ms each take 4.2 s.
    await services.jsm.streams.add({ name: stream, subjects: [`${subject}.>`] });
    await services.jsm.consumers.add(stream, {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(2_000),
      filter_subject: `${subject}.>`,
    });
    for (let n = 1; n <= 6; n++) await jetstream(services.nc).publish(`${subject}.x`, JSON.stringify({ n }));
    let started: () => void = () => {};
    const storing = new Promise<void>((resolve) => {
      started = resolve;
    });
    const first = replica(700, () => started());
    const second = replica(0);
    try {
      // Act: once the first replica's fetch took the batch (it stores the first message), the second keeps asking
      // for messages until the first is done.
      let done = false;
      const pulled = first.pull({ deadline: Date.now() + 30_000 }).finally(() => {
        done = true;
      });
      await storing;
      const others: NatsPullReport[] = [];
      while (!done) others.push(await second.pull({ deadline: Date.now() + 30_000 }));
      const report = await pulled;
      // Assess
      expect(report).toMatchObject({ fetched: 6, stored: 6, duplicate: 0, stoppedFor: 'empty' });
      expect(report.error).toBeUndefined();
      expect(others.reduce((sum, r) => sum + r.fetched, 0)).toBe(0);
      if (!db) throw new Error('no PostgreSQL');
      const { rows } = await db.pool.query<{ payload: { n: number } }>(
        `SELECT payload FROM "${assertSchemaName(db.schema.name)}".inbox WHERE source = 'slow' ORDER BY id`,
      );
      expect(rows.map((r) => r.payload.n)).toEqual([1, 2, 3, 4, 5, 6]);
    } finally {
      await first.close();
      await second.close();
    }
  }, 60_000);
});
