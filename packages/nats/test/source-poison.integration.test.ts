/**
 * One poison message in a JetStream source, on the real NATS server and a real PostgreSQL store: a message whose
 * ingestion fails for a reason of its own (here a transform function registered in code that throws on it: a bug,
 * which the inbox turns into a dead row only after many failures) must not hold up the messages after it. Before, the pull gave back
 * the whole rest of the batch with it and stopped, and the next pull met the poison first again: nothing after it
 * was ever stored, and on a consumer with `max_deliver` every message behind it was dropped by the server after a
 * few pulls, unstored.
 */
import { randomBytes } from 'node:crypto';
import { connect as tcpConnect } from 'node:net';
import { AckPolicy, DeliverPolicy, jetstream } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import type { BrokerIngestionPort } from '@queuebox/core';
import { createBrokerIngestion } from '@queuebox/inbox';
import { assertSchemaName, requireServices, usePostgresSchema } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { createNatsSource } from '../src/index.ts';
import { useNatsAndStore } from './support/services.ts';

const needs = await requireServices('nats source poison', ['postgres', 'nats']);
const run = randomBytes(4).toString('hex');
const db = needs.available ? usePostgresSchema(needs.url.postgres, 'nats_src_poison', 2) : undefined;

const services = useNatsAndStore(needs, db);

/**
 * The real broker ingestion with a transform function that throws (a bug) on `{ "poison": true }` while `buggy.on`
 * is set, and passes every other payload through.
 */
function buggyIngestion(source: string): {
  readonly port: BrokerIngestionPort;
  readonly buggy: { on: boolean };
} {
  const buggy = { on: true };
  const port = createBrokerIngestion({
    store: services.store.inbox,
    sources: { [source]: { type: 'nats', transform: { function: 'buggy' } } },
    transforms: {
      buggy: ({ payload }) => {
        if (buggy.on && (payload as { poison?: boolean }).poison === true) {
          throw new TypeError("Cannot read properties of undefined (reading 'id')");
        }
        return { payload };
      },
    },
  });
  return { port, buggy };
}

/** A stream and an operator's durable consumer with `max_deliver`, holding `bodies` in this order. */
async function streamWith(name: string, maxDeliver: number, bodies: readonly object[]) {
  const stream = `QB_TEST_POISON_${run}_${name.toUpperCase()}`;
  const subject = `qb.test.poison.${run}.${name}`;
  const durable = `qb-test-poison-${run}-${name}`;
  services.streams.push(stream);
  await services.jsm.streams.add({ name: stream, subjects: [`${subject}.>`] });
  await services.jsm.consumers.add(stream, {
    durable_name: durable,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    max_deliver: maxDeliver,
    ack_wait: nanos(30_000),
    filter_subject: `${subject}.>`,
  });
  for (const body of bodies) await jetstream(services.nc).publish(`${subject}.x`, JSON.stringify(body));
  return { stream, subject: `${subject}.>`, durable };
}

/** The source under test on a stream and consumer of `streamWith` (never creating them), with `options`. */
function sourceOn(
  source: string,
  on: { readonly stream: string; readonly subject: string; readonly durable: string },
  options: Pick<Parameters<typeof createNatsSource>[0], 'ingestion' | 'retryDelayMs' | 'onError'>,
) {
  return createNatsSource({ source, servers: [needs.url.nats], ...on, createMissing: false, ...options });
}

async function payloadsOf(source: string): Promise<unknown[]> {
  if (!db) throw new Error('no PostgreSQL');
  const { rows } = await db.pool.query<{ payload: unknown }>(
    `SELECT payload FROM "${assertSchemaName(db.schema.name)}".inbox WHERE source = $1 ORDER BY id`,
    [source],
  );
  return rows.map((r) => r.payload);
}

describe.skipIf(needs.skipReason)(`NATS source with a poison message on ${needs.via.nats}`, () => {
  it('stores the messages after a poison one in the same pull, and gives only the poison back, to be stored once it can be', async () => {
    // Prepare
    const source = 'poison';
    const { stream, subject, durable } = await streamWith(source, 10, [
      { n: 1 },
      { n: 2, poison: true },
      { n: 3 },
      { n: 4 },
    ]);
    const { port, buggy } = buggyIngestion(source);
    const errors: unknown[] = [];
    const nats = sourceOn(
      source,
      { stream, subject, durable },
      {
        retryDelayMs: 100,
        ingestion: port,
        onError: (error) => errors.push(error),
      },
    );
    try {
      // Act
      const first = await nats.pull({ deadline: Date.now() + 10_000 });
      const afterFirst = await payloadsOf(source);
      const info = await services.jsm.consumers.info(stream, durable);
      buggy.on = false;
      // The poison comes back after its delay; the next pulls store it.
      let later = await nats.pull({ deadline: Date.now() + 10_000 });
      for (let i = 0; i < 20 && later.stored === 0; i++)
        later = await nats.pull({ deadline: Date.now() + 10_000 });
      // Assess
      // The poison may come back (after 200 ms, 400 ms, …) and fail again within the pull: given back each time.
      expect(first).toMatchObject({ stored: 3, duplicate: 0, dead: 0 });
      expect(first.nacked).toBeGreaterThanOrEqual(1);
      expect(first.fetched - first.nacked).toBe(3);
      expect(afterFirst).toEqual([{ n: 1 }, { n: 3 }, { n: 4 }]);
      expect(errors[0]).toBeInstanceOf(TypeError);
      expect(info.num_ack_pending).toBe(1);
      expect(later).toMatchObject({ stored: 1 });
      expect(await payloadsOf(source)).toEqual([{ n: 1 }, { n: 3 }, { n: 4 }, { n: 2, poison: true }]);
    } finally {
      await nats.close();
    }
  }, 60_000);

  it("stores a poison message as a dead row at the consumer's last delivery (max_deliver), instead of letting the server drop it", async () => {
    // Prepare: an operator's consumer with max_deliver 3; the source's own limits (10 failures over 5 minutes) are
    // far away, and the bug is never fixed
    const source = 'last-delivery';
    const { stream, subject, durable } = await streamWith(source, 3, [
      { n: 1 },
      { n: 2, poison: true },
      { n: 3 },
    ]);
    const { port } = buggyIngestion(source);
    const nats = sourceOn(
      source,
      { stream, subject, durable },
      {
        retryDelayMs: 100,
        ingestion: port,
      },
    );
    try {
      // Act: pull until the poison is settled one way or the other
      let dead = 0;
      for (let i = 0; i < 30 && dead === 0; i++)
        dead += (await nats.pull({ deadline: Date.now() + 5_000 })).dead;
      const info = await services.jsm.consumers.info(stream, durable);
      // Assess
      expect(dead).toBe(1);
      expect(info.num_ack_pending).toBe(0);
      expect(info.num_pending).toBe(0);
      if (!db) throw new Error('no PostgreSQL');
      const { rows } = await db.pool.query<{ payload: unknown; state: string; last_error: string | null }>(
        `SELECT payload, state, last_error FROM "${assertSchemaName(db.schema.name)}".inbox WHERE source = $1 ORDER BY id`,
        [source],
      );
      expect(rows.map((r) => [r.payload, r.state])).toEqual([
        [{ n: 1 }, 'pending'],
        [{ n: 3 }, 'pending'],
        [{ n: 2, poison: true }, 'dead'],
      ]);
      expect(rows[2]?.last_error).toMatch(
        /^The ingestion failed 3 times since .* \(not a database outage, at the broker's last delivery of it\), last with: Cannot read properties/,
      );
    } finally {
      await nats.close();
    }
  }, 60_000);

  it('tries a message on its last delivery even after two failures in a row, where it was given back and dropped', async () => {
    // Prepare: max_deliver 2; a first pull fails on two poison messages and gives the good one back untried, so its
    // next delivery is its last; two new poison messages then come first in the next pull (the good one is due
    // only after its retry delay)
    const source = 'untried-last';
    const { stream, subject, durable } = await streamWith(source, 2, [
      { n: 1, poison: true },
      { n: 2, poison: true },
      { n: 3 },
    ]);
    const { port } = buggyIngestion(source);
    const nats = sourceOn(
      source,
      { stream, subject, durable },
      {
        retryDelayMs: 300,
        ingestion: port,
      },
    );
    try {
      // Act
      const first = await nats.pull({ deadline: Date.now() + 10_000 });
      for (const n of [4, 5])
        await jetstream(services.nc).publish(subject.replace('>', 'x'), JSON.stringify({ n, poison: true }));
      const second = await nats.pull({ deadline: Date.now() + 10_000 });
      // The four poison messages' last deliveries may fall in later pulls.
      let dead = second.dead;
      for (let i = 0; i < 10 && dead < 4; i++)
        dead += (await nats.pull({ deadline: Date.now() + 10_000 })).dead;

      // Assess: the good message is stored on its last delivery (before: given back untried, and the server dropped
      // it); the poison ones on their last delivery are dead rows
      expect(first).toMatchObject({ stored: 0, nacked: 3 });
      expect(second.stored).toBe(1);
      if (!db) throw new Error('no PostgreSQL');
      const { rows } = await db.pool.query<{ payload: { n: number }; state: string }>(
        `SELECT payload, state FROM "${assertSchemaName(db.schema.name)}".inbox WHERE source = $1 ORDER BY id`,
        [source],
      );
      const byN = new Map(rows.map((r) => [r.payload.n, r.state]));
      expect(byN.get(3)).toBe('pending');
      // Every poison message is a dead row at its last delivery, none dropped.
      expect([1, 2, 4, 5].map((n) => byN.get(n))).toEqual(['dead', 'dead', 'dead', 'dead']);
      const info = await services.jsm.consumers.info(stream, durable);
      expect(info.num_pending + info.num_ack_pending).toBe(0);
    } finally {
      await nats.close();
    }
  }, 60_000);

  it('stores a message whose header block names a header nats.js refuses to read, between two others, in one pull', async () => {
    // Prepare: the server stores whatever header block a client sends (another client library, a raw HPUB); nats.js
    // throws on a name with a space when the headers are first read. Before, that threw out of the pull, leaving the
    // message and the ones after it neither acked nor given back: back first after every ack wait, for ever.
    const source = 'odd-headers';
    const { stream, subject, durable } = await streamWith(source, 10, []);
    const at = subject.replace('>', 'x');
    const hpub = (block: string, body: string) => {
      const head = `NATS/1.0\r\n${block}\r\n`;
      const size = Buffer.byteLength(head);
      return `HPUB ${at} ${size} ${size + Buffer.byteLength(body)}\r\n${head}${body}\r\n`;
    };
    const url = new URL(needs.url.nats);
    await new Promise<void>((resolve, reject) => {
      const socket = tcpConnect(Number(url.port || 4222), url.hostname);
      socket.on('error', reject);
      socket.once('data', () => {
        socket.write('CONNECT {"verbose":false,"headers":true,"protocol":1}\r\n');
        socket.write(hpub('Nats-Msg-Id: odd-1\r\n', '{"n":1}'));
        socket.write(hpub('Nats-Msg-Id: odd-2\r\nX Trace: a b\r\nNaïve: yes\r\n', '{"n":2}'));
        socket.write(hpub('Nats-Msg-Id: odd-3\r\n', '{"n":3}'));
        socket.write('PING\r\n');
        socket.on('data', (chunk) => {
          if (String(chunk).includes('PONG')) socket.end(resolve);
        });
      });
    });
    const nats = sourceOn(
      source,
      { stream, subject, durable },
      {
        ingestion: createBrokerIngestion({
          store: services.store.inbox,
          sources: { [source]: { type: 'nats' } },
        }),
      },
    );
    try {
      // Act
      const report = await nats.pull({ deadline: Date.now() + 10_000 });
      const info = await services.jsm.consumers.info(stream, durable);
      // Assess
      expect(report).toMatchObject({ fetched: 3, stored: 3, nacked: 0, stoppedFor: 'empty' });
      expect(report.error).toBeUndefined();
      expect(info.num_ack_pending).toBe(0);
      if (!db) throw new Error('no PostgreSQL');
      const { rows } = await db.pool.query<{ idempotency_key: string; headers: Record<string, string> }>(
        `SELECT idempotency_key, headers FROM "${assertSchemaName(db.schema.name)}".inbox WHERE source = $1 ORDER BY id`,
        [source],
      );
      expect(rows.map((r) => r.idempotency_key)).toEqual(['odd-1', 'odd-2', 'odd-3']);
      expect(rows[1]?.headers).toMatchObject({ 'x trace': 'a b', naïve: 'yes' });
    } finally {
      await nats.close();
    }
  });

  it('stores a header value that is not UTF-8 as base64: of its bytes, as the Kafka and AMQP sources do', async () => {
    // Prepare: a raw HPUB (another client library) with the bytes FF FE in a value; nats.js decodes it to U+FFFD
    const source = 'binary-headers';
    const stream = `FIXNATS_BINARY_HEADERS_${run}`;
    const subject = `fixnats.binary-headers.${run}`;
    services.streams.push(stream);
    await services.jsm.streams.add({ name: stream, subjects: [`${subject}.>`] });
    const block = Buffer.concat([
      Buffer.from('NATS/1.0\r\nNats-Msg-Id: binary-1\r\nx-bin:  a'),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('b \r\nx-text: caf\u00e9\r\n\r\n'),
    ]);
    const body = Buffer.from('{"n":1}');
    const url = new URL(needs.url.nats);
    await new Promise<void>((resolve, reject) => {
      const socket = tcpConnect(Number(url.port || 4222), url.hostname);
      socket.on('error', reject);
      socket.once('data', () => {
        socket.write('CONNECT {"verbose":false,"headers":true,"protocol":1}\r\n');
        socket.write(`HPUB ${subject}.x ${block.length} ${block.length + body.length}\r\n`);
        socket.write(Buffer.concat([block, body, Buffer.from('\r\nPING\r\n')]));
        socket.on('data', (chunk) => {
          if (String(chunk).includes('PONG')) socket.end(resolve);
        });
      });
    });
    const nats = createNatsSource({
      source,
      servers: [needs.url.nats],
      stream,
      subject: `${subject}.>`,
      ingestion: createBrokerIngestion({
        store: services.store.inbox,
        sources: { [source]: { type: 'nats' } },
      }),
    });
    try {
      // Act
      const report = await nats.pull({ deadline: Date.now() + 10_000 });
      // Assess: the bytes as they came, trimmed as nats.js trims a value (before: 'a\uFFFD\uFFFDb')
      expect(report).toMatchObject({ fetched: 1, stored: 1, stoppedFor: 'empty' });
      if (!db) throw new Error('no PostgreSQL');
      const { rows } = await db.pool.query<{ idempotency_key: string; headers: Record<string, string> }>(
        `SELECT idempotency_key, headers FROM "${assertSchemaName(db.schema.name)}".inbox WHERE source = $1`,
        [source],
      );
      expect(rows).toHaveLength(1);
      expect(rows[0]?.idempotency_key).toBe('binary-1');
      expect(rows[0]?.headers).toMatchObject({
        'x-bin': `base64:${Buffer.from([0x61, 0xff, 0xfe, 0x62]).toString('base64')}`,
        'x-text': 'café',
      });
    } finally {
      await nats.close();
    }
  });
});
