/**
 * nats-source-tick while the database is away (a TCP proxy in front of the real PostgreSQL refuses every
 * connection), against the machine's NATS JetStream: the tick stops at its first store outage instead of holding
 * the fetched messages until the end of its budget (billed Lambda time while nothing can be stored), gives them
 * back unacknowledged, and, while the database stays away, the next tick fetches nothing at all (every fetch is a
 * delivery that counts against a consumer's `max_deliver`). When the database is back, every message is stored,
 * pending, once.
 */
import { randomBytes } from 'node:crypto';
import { type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import { isStoreUnavailable } from '@queuebox/core';
import { openStore } from '@queuebox/store';
import { findNats, requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler as createNatsSourceTick } from '../../functions/nats-source-tick.ts';
import { cleanup, startTcpProxy, type TcpProxy } from '../local/support.ts';
import { aLambdaContext, aTickEvent, type TestShell, testShell, writeConfigFile } from './support.ts';

const needs = await requireServices('function tests: nats-source-tick outage', ['postgres']);
const nats = await findNats();

const run = randomBytes(4).toString('hex');

/**
 * A NATS source `name` on its own stream, behind a TCP proxy in front of the real PostgreSQL (a migrated schema of
 * its own), for the tests of one `describe`; `database` adds keys to the configuration's `database` section.
 */
function natsBehindProxy(name: string, database = '') {
  const stream = `QB_${name.toUpperCase()}_${run}`;
  const subjects = `qb.${name}.${run}`;
  const durable = `queuebox-${name}-${run}`;
  const { pool, schema } = usePostgresSchema(needs.url.postgres, `nats_${name}`, 1);
  const shells: TestShell[] = [];
  const at = {} as {
    proxy: TcpProxy;
    configFile: string;
    nc: NatsConnection;
    jsm: JetStreamManager;
  };

  beforeAll(async () => {
    const migrated = await openStore({ provider: 'postgres', url: needs.url.postgres, schema: schema.name });
    await migrated.migrate();
    await migrated.close();
    const target = new URL(needs.url.postgres);
    at.proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    target.host = `127.0.0.1:${at.proxy.port}`;
    at.configFile = await writeConfigFile(`database:
  url: ${JSON.stringify(target.href)}
  schema: ${schema.name}
  poolSize: 2
${database}sources:
  ${name}:
    type: nats
    servers: [${JSON.stringify(nats.available ? nats.url : '')}]
    stream: ${stream}
    subject: ${subjects}.>
    durable: ${durable}
    mode: pull
`);
    at.nc = await connect({ servers: nats.available ? nats.url : '' });
    at.jsm = await jetstreamManager(at.nc);
    await at.jsm.streams.add({ name: stream, subjects: [`${subjects}.>`] });
  });

  afterAll(async () => {
    // The proxy first: its cut ends the statements that still wait on silenced connections.
    await at.proxy?.close();
    for (const options of shells) for (const cache of options.caches) await cache.close();
    await at.jsm?.streams.delete(stream).catch(() => undefined);
    await at.nc?.close();
    await cleanup();
  });

  return {
    pool,
    schema,
    stream,
    durable,
    at,
    /** The nats-source-tick of a new container (its shell closed after the tests). */
    tick() {
      const options = testShell(at.configFile);
      shells.push(options);
      return createNatsSourceTick(options);
    },
    /** Publishes `{ n }` with the message id `${name}-${n}`. */
    async publish(n: number) {
      const h = headers();
      h.set('Nats-Msg-Id', `${name}-${n}`);
      await jetstream(at.nc).publish(`${subjects}.login`, JSON.stringify({ n }), { headers: h });
    },
  };
}

describe.skipIf(needs.skipReason || !nats.available)('nats-source-tick across a database outage', () => {
  const { pool, schema, stream, durable, at, tick, publish } = natsBehindProxy('audit');

  /** The durable's pending (unacknowledged or not yet delivered) and delivered counts, or undefined before it exists. */
  async function consumerState(): Promise<
    { pending: number; delivered: number; ackFloor: number } | undefined
  > {
    try {
      const info = await at.jsm.consumers.info(stream, durable);
      return {
        pending: info.num_pending + info.num_ack_pending,
        delivered: info.delivered.consumer_seq,
        ackFloor: info.ack_floor.stream_seq,
      };
    } catch (error) {
      if (error instanceof Error && /consumer not found/i.test(error.message)) return undefined;
      throw error;
    }
  }

  it('stops at the outage, fetches nothing while it lasts, and stores every message once afterwards', async () => {
    // Prepare: three messages, the database away
    for (const n of [1, 2, 3]) await publish(n);
    const natsSourceTick = tick();
    at.proxy.cut();

    // Act 1: a tick with 10 minutes left (a Lambda may run 15): the old tick held the messages for all of them
    const failure = await natsSourceTick(
      aTickEvent('schedule'),
      aLambdaContext({ remainingMs: 600_000 }),
    ).then(
      () => undefined,
      (error: unknown) => error,
    );

    // Assess 1: the outage failed the invocation; the messages are neither acknowledged nor stored (the durable is not
    // even created yet: its set-up reads the install id from the database first, to record it in the durable)
    expect(isStoreUnavailable(failure)).toBe(true);
    const afterFirst = await consumerState();
    if (afterFirst !== undefined) {
      expect(afterFirst.pending).toBe(3);
      expect(afterFirst.ackFloor).toBe(0);
    }

    // Act 2: the next tick while the database is still away
    const second = await natsSourceTick(
      aTickEvent('schedule'),
      aLambdaContext({ remainingMs: 600_000 }),
    ).then(
      () => undefined,
      (error: unknown) => error,
    );

    // Assess 2: it failed without a delivery (a fetch would have delivered the messages again)
    expect(isStoreUnavailable(second)).toBe(true);
    const afterSecond = await consumerState();
    expect(afterSecond?.delivered).toBe(afterFirst?.delivered);
    if (afterSecond !== undefined) expect(afterSecond.pending).toBe(3);

    // Act 3: the database is back
    at.proxy.restore();
    const recovered = await natsSourceTick(aTickEvent('schedule'), aLambdaContext({ remainingMs: 600_000 }));

    // Assess 3: every message stored once, pending (nothing dead), and acknowledged
    expect(recovered.audit).toMatchObject({ stored: 3, dead: 0, stoppedFor: 'empty' });
    const rows = await pool.query(
      `SELECT idempotency_key, state FROM "${schema.name}".inbox WHERE source = 'audit' ORDER BY idempotency_key`,
    );
    expect(rows.rows).toEqual([
      { idempotency_key: 'audit-1', state: 'pending' },
      { idempotency_key: 'audit-2', state: 'pending' },
      { idempotency_key: 'audit-3', state: 'pending' },
    ]);
    const drained = await at.jsm.consumers.info(stream, durable);
    expect(drained.num_pending + drained.num_ack_pending).toBe(0);
  });
});

describe.skipIf(needs.skipReason || !nats.available)('nats-source-tick with a silent database', () => {
  // queryTimeoutMs 0: a statement waits as long as the database takes, here for ever.
  const { stream, durable, at, tick, publish } = natsBehindProxy('silent', '  queryTimeoutMs: 0\n');

  it('gives a store try up before the function times out and hands the messages back', async () => {
    // Prepare: a warm container (its connections open), then the database goes silent and two messages come
    const natsSourceTick = tick();
    await publish(0);
    const warm = await natsSourceTick(aTickEvent('schedule'), aLambdaContext({ remainingMs: 60_000 }));
    expect(warm.silent).toMatchObject({ stored: 1 });
    at.proxy.silence();
    await publish(1);
    await publish(2);

    // Act: a tick with 8 s left (the try is given up 4 s before its end)
    const failure = await natsSourceTick(aTickEvent('schedule'), aLambdaContext({ remainingMs: 8000 })).then(
      () => undefined,
      (error: unknown) => error,
    );

    // Assess: answered as an outage, within the invocation; the two messages neither acknowledged nor lost
    expect(isStoreUnavailable(failure)).toBe(true);
    const info = await at.jsm.consumers.info(stream, durable);
    expect(info.num_pending + info.num_ack_pending).toBe(2);
    expect(info.ack_floor.stream_seq).toBe(1);
  });
});
