/**
 * A half-open connection (an outside audit: a black-hole, every packet dropped both ways without a FIN or RST, as
 * after a NAT or security-group timeout or a failover), through a TCP proxy in front of the machine's NATS server.
 * Before, the client noticed only with its default pings (2 min × 2): nothing was published for about 6 minutes
 * after the network came back, every publish waiting its ack timeout and counting an attempt.
 */
import { randomBytes } from 'node:crypto';
import { type JetStreamManager, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { BrokerIngestionPort, BrokerMessage, OutgoingMessage, PublishOutcome } from '@queuebox/core';
import { type FaultProxy, requireServices, startFaultProxy } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../../../test/brokers/support/store.ts';
import { hostPort } from '../../../test/brokers/support/tcp-proxy.ts';
import { createNatsConnection, createNatsPublisher, createNatsSource } from '../src/index.ts';

const needs = await requireServices('nats half-open', ['nats']);
const url = needs.url.nats;

const run = randomBytes(4).toString('hex');
const stream = `hofix_${run}`;
const prefix = `hofix.${run}`;

let nc: NatsConnection;
let jsm: JetStreamManager;
const proxies: FaultProxy[] = [];

beforeAll(async () => {
  if (!needs.available) return;
  nc = await connect({ servers: url });
  jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: stream, subjects: [`${prefix}.>`] });
});

afterAll(async () => {
  if (!needs.available) return;
  for (const proxy of proxies) await proxy.close();
  await jsm.streams.delete(stream).catch(() => undefined);
  await nc.close();
});

async function proxy(): Promise<{ proxy: FaultProxy; server: string }> {
  const started = await startFaultProxy(hostPort(url, 4222));
  proxies.push(started);
  return { proxy: started, server: `nats://127.0.0.1:${started.port}` };
}

let nextId = 1;
function aMessage(): OutgoingMessage {
  const id = `${run}-${nextId++}`;
  return { id, topic: 'orders', key: null, payload: { id }, headers: {}, attempt: 0 };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.runIf(needs.available)(
  `NATS on a half-open connection, through a proxy to ${needs.via.nats}`,
  () => {
    it('a JetStream ack timeout checks the connection and opens a new one when it is silent', async () => {
      // Prepare: pings far apart, so only the ack timeout can find the dead connection
      const { proxy: faults, server } = await proxy();
      const publisher = createNatsPublisher({
        servers: [server],
        subject: `${prefix}.{{ topic }}`,
        timeoutMs: 1000,
        pingIntervalMs: 120_000,
      });
      try {
        expect(await publisher.publish(aMessage())).toEqual({ kind: 'sent' });
        // Act: the network drops everything; the connection stays dead after it comes back
        faults.blackhole();
        const lost = await publisher.publish(aMessage());
        const meanwhile = await publisher.publish(aMessage());
        faults.pass();
        const started = Date.now();
        let outcome: PublishOutcome = lost;
        const sent = aMessage();
        while (outcome.kind !== 'sent' && Date.now() - started < 20_000) {
          outcome = await publisher.publish(sent);
          if (outcome.kind !== 'sent') await sleep(250);
        }
        // Assess: the publish whose ack timed out is a plain retry (it may have been stored); the next ones go out on
        // a new connection within seconds, not after the client's pings (minutes)
        expect(lost).toMatchObject({ kind: 'retry', error: expect.stringContaining('JetStream ack') });
        expect(lost).not.toHaveProperty('unstarted');
        expect(lost).toMatchObject({ error: expect.stringContaining('did not answer a PING') });
        // While the new connection is being opened nothing is written: given back untried, no attempt counted
        expect(meanwhile).toMatchObject({ kind: 'retry', unstarted: true, retryAfterMs: 1000 });
        expect(outcome).toEqual({ kind: 'sent' });
        expect(Date.now() - started).toBeLessThan(20_000);
        expect(faults.accepted).toBeGreaterThanOrEqual(2);
      } finally {
        await publisher.close();
      }
    });

    it('the connection pings the server every pingIntervalMs and reconnects when the answers stop', async () => {
      // Prepare
      const { proxy: faults, server } = await proxy();
      const connection = createNatsConnection({ servers: [server], pingIntervalMs: 300, maxPingOut: 2 });
      try {
        const first = await connection.get();
        // Act: a black-hole, then the network comes back (the open connection stays dead)
        faults.blackhole();
        await sleep(500);
        faults.pass();
        // Assess: the client itself found the connection stale and reconnected, without any publish
        await eventually(
          'a reconnect after the pings stopped being answered',
          () => (connection.disconnects(first) >= 1 && connection.isUp(first) ? true : undefined),
          20_000,
        );
        await first.flush();
        expect(faults.accepted).toBeGreaterThanOrEqual(2);
      } finally {
        await connection.close();
      }
    });

    it('a source finds its silent connection by its pings and stores again once the network is back', {
      timeout: 60_000,
    }, async () => {
      // Prepare: a source on a stream of its own, set up through the proxy while the network is fine
      const { proxy: faults, server } = await proxy();
      const sourceStream = `hofix_${run}_src`;
      const subject = `hofixsrc.${run}`;
      await jsm.streams.add({ name: sourceStream, subjects: [subject] });
      const got: BrokerMessage[] = [];
      const ingestion: BrokerIngestionPort = {
        ingest: async (_source, message) => {
          got.push(message);
          return { status: 'stored', id: String(got.length), wakeRelay: false };
        },
      };
      const source = createNatsSource({
        source: 'hofix',
        servers: [server],
        stream: sourceStream,
        subject,
        ingestion,
        pingIntervalMs: 300,
        maxPingOut: 2,
      });
      try {
        await source.pull({ deadline: Date.now() + 5000 });
        // Act: a black-hole, the network back, then a message arrives in the stream
        faults.blackhole();
        await sleep(500);
        faults.pass();
        await nc.publish(subject, 'after the black-hole');
        await nc.flush();
        const until = Date.now() + 20_000;
        while (got.length === 0 && Date.now() < until) {
          await source.pull({ deadline: Date.now() + 3000 }).catch(() => undefined);
          if (got.length === 0) await sleep(250);
        }
        // Assess: stored within seconds (before: the connection stayed in use until nats.js's 2-minute pings)
        expect(got.map((m) => Buffer.from(m.body).toString('utf8'))).toEqual(['after the black-hole']);
        expect(faults.accepted).toBeGreaterThanOrEqual(2);
      } finally {
        await source.close();
        await jsm.streams.delete(sourceStream).catch(() => undefined);
      }
    });

    it('closes a publisher whose connection is half-open within seconds', async () => {
      // Prepare
      const { proxy: faults, server } = await proxy();
      const publisher = createNatsPublisher({
        servers: [server],
        subject: `${prefix}.{{ topic }}`,
        timeoutMs: 1000,
      });
      expect(await publisher.publish(aMessage())).toEqual({ kind: 'sent' });
      faults.blackhole();
      // Act
      const started = Date.now();
      await publisher.close();
      // Assess
      expect(Date.now() - started).toBeLessThan(10_000);
    });
  },
);
