/**
 * The publisher against findings of an outside RabbitMQ audit, on the machine's broker: `connection.blocked` (a
 * memory or disk alarm, here injected by an AMQP-aware proxy in front of the broker, which also stops forwarding what
 * the client writes, as a blocked broker stops reading it) and a nack of a fanout exchange with one full queue.
 */
import net from 'node:net';
import type { JsonValue, OutgoingMessage } from '@queuebox/core';
import { requireServices } from '@queuebox/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import { useAmqpAdmin } from '../../../test/brokers/support/amqp-admin.ts';
import { hostPort } from '../../../test/brokers/support/tcp-proxy.ts';
import { BLOCKED_RECHECK_MS, createRabbitMqPublisher, NACKED_ERROR } from '../src/index.ts';

const needs = await requireServices('rabbitmq publisher (audit)', ['rabbitmq']);
const url = needs.url.rabbitmq;

const rabbit = useAmqpAdmin(needs.available ? url : undefined, 'rfix');
const queue = rabbit.queue('blocked');
const fanout = rabbit.exchange('fan');
const okQueue = rabbit.queue('fan.ok');
const fullQueue = rabbit.queue('fan.full');

beforeAll(async () => {
  if (!needs.available) return;
  await rabbit.channel.assertQueue(queue, { durable: false });
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function aMessage(id: string, payload: JsonValue = { id }): OutgoingMessage {
  return { id, topic: 't', key: null, payload, headers: {}, attempt: 0 };
}

/** A method frame on channel 0 (rabbit.connection.blocked is class 10 method 60, rabbit.connection.unblocked 10/61). */
function methodFrame(method: number, args: Buffer): Buffer {
  const payload = Buffer.concat([Buffer.from([0, 10, 0, method]), args]);
  const head = Buffer.alloc(7);
  head.writeUInt8(1, 0);
  head.writeUInt16BE(0, 1);
  head.writeUInt32BE(payload.length, 3);
  return Buffer.concat([head, payload, Buffer.from([0xce])]);
}

interface Proxied {
  readonly client: net.Socket;
  readonly server: net.Socket;
  holding: boolean;
  held: Buffer[];
  inject(frame: Buffer): void;
}

/**
 * A proxy in front of the broker: `hold()` stops forwarding what clients write (kept, as a blocked broker's socket
 * keeps it), `block(reason)` also tells the clients `rabbit.connection.blocked`; `release()` forwards what was held and says
 * `rabbit.connection.unblocked`. A client connection that closes meanwhile takes what was held of it with it.
 */
async function amqpProxy(target: { host: string; port: number }) {
  const connections: Proxied[] = [];
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    let pending = Buffer.alloc(0);
    let injections: Buffer[] = [];
    let header = true;
    const toClient = (data: Buffer) => {
      pending = Buffer.concat([pending, data]);
      while (pending.length >= 7) {
        const size = pending.readUInt32BE(3);
        if (pending.length < size + 8) break;
        client.write(pending.subarray(0, size + 8));
        pending = pending.subarray(size + 8);
      }
      if (pending.length === 0) {
        for (const frame of injections) client.write(frame);
        injections = [];
      }
    };
    const proxied: Proxied = {
      client,
      server: upstream,
      holding: false,
      held: [],
      inject(frame) {
        injections.push(frame);
        toClient(Buffer.alloc(0));
      },
    };
    connections.push(proxied);
    upstream.on('data', toClient);
    client.on('data', (data: Buffer) => {
      if (header || !proxied.holding) upstream.write(data);
      else proxied.held.push(data);
      header = false;
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    port,
    hold() {
      for (const c of connections) c.holding = true;
    },
    block(reason: string) {
      const text = Buffer.from(reason);
      for (const c of connections) {
        c.holding = true;
        c.inject(methodFrame(60, Buffer.concat([Buffer.from([text.length]), text])));
      }
    },
    release() {
      for (const c of connections) {
        c.holding = false;
        if (!c.server.destroyed) for (const data of c.held) c.server.write(data);
        c.held = [];
        if (!c.client.destroyed) c.inject(methodFrame(61, Buffer.alloc(0)));
      }
    },
    heldBytes: () => connections.reduce((n, c) => n + c.held.reduce((m, b) => m + b.length, 0), 0),
    async close() {
      for (const c of connections) {
        c.client.destroy();
        c.server.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function drain(from: string): Promise<string[]> {
  const ids: string[] = [];
  for (;;) {
    const message = await rabbit.channel.get(from, { noAck: true });
    if (!message) return ids;
    ids.push(String(message.properties.messageId));
  }
}

function viaProxy(port: number): string {
  const parsed = new URL(url);
  parsed.hostname = '127.0.0.1';
  parsed.port = String(port);
  return parsed.toString();
}

describe.runIf(needs.available)(`RabbitMQ publisher (audit findings) on ${needs.via.rabbitmq}`, () => {
  it('writes nothing while the broker blocks publishing: each message is given back untried, and sent once after', async () => {
    // Prepare
    const proxy = await amqpProxy(hostPort(url, 5672));
    const publisher = createRabbitMqPublisher({
      url: viaProxy(proxy.port),
      exchange: '',
      routingKey: queue,
      name: 'rfix-blocked',
      confirmTimeoutMs: 1_000,
      onProblem: () => undefined,
    });
    const big = aMessage('row-1', { big: 'z'.repeat(256 * 1024) });
    try {
      expect(await publisher.publish(aMessage('row-0'))).toEqual({ kind: 'sent' });
      proxy.block('low on memory');
      await sleep(200);
      // Act
      const started = Date.now();
      const during = [];
      for (let attempt = 0; attempt < 3; attempt++) during.push(await publisher.publish(big));
      const took = Date.now() - started;
      const held = proxy.heldBytes();
      proxy.release();
      await sleep(300);
      const after = await publisher.publish(big);
      await sleep(300);
      // Assess
      for (const outcome of during) {
        expect(outcome).toEqual({
          kind: 'retry',
          error: 'the broker blocked publishing: low on memory',
          unstarted: true,
          retryAfterMs: BLOCKED_RECHECK_MS,
        });
      }
      expect(took).toBeLessThan(1_000);
      expect(held).toBe(0);
      expect(after).toEqual({ kind: 'sent' });
      expect(await drain(queue)).toEqual(['row-0', 'row-1']);
    } finally {
      await publisher.close();
      await proxy.close();
      await drain(queue);
    }
  });

  it('cuts the connection when a confirm times out on a blocked connection, so the message is not sent later', async () => {
    // Prepare
    const proxy = await amqpProxy(hostPort(url, 5672));
    const publisher = createRabbitMqPublisher({
      url: viaProxy(proxy.port),
      exchange: '',
      routingKey: queue,
      name: 'rfix-blocked-late',
      confirmTimeoutMs: 800,
      onProblem: () => undefined,
    });
    try {
      expect(await publisher.publish(aMessage('row-0'))).toEqual({ kind: 'sent' });
      // Act: the publish is written, the broker reads nothing more and then says it is blocked.
      proxy.hold();
      const inFlight = publisher.publish(aMessage('row-2'));
      await sleep(200);
      proxy.block('disk alarm');
      const outcome = await inFlight;
      // The alarm clears a little later: the reset has reached the broker's side by then (a kernel drops the unread
      // data of a connection reset at once; the proxy, at its next turn).
      await sleep(100);
      proxy.release();
      await sleep(300);
      const again = await publisher.publish(aMessage('row-2'));
      await sleep(300);
      // Assess
      expect(outcome).toMatchObject({ kind: 'retry' });
      expect((outcome as { error: string }).error).toBe(
        'no publisher confirm from RabbitMQ within 800 ms (the broker blocked publishing: disk alarm); the connection was cut so the message is not sent later',
      );
      expect(again).toEqual({ kind: 'sent' });
      expect(await drain(queue)).toEqual(['row-0', 'row-2']);
    } finally {
      await publisher.close();
      await proxy.close();
      await drain(queue);
    }
  });

  it('says that other queues bound to the exchange may have the message when the broker nacks it', async () => {
    // Prepare: a fanout exchange bound to a healthy queue and to one full with overflow reject-publish.
    await rabbit.channel.assertExchange(fanout, 'fanout', { durable: false });
    await rabbit.channel.assertQueue(okQueue, { durable: false });
    await rabbit.channel.assertQueue(fullQueue, {
      durable: false,
      arguments: { 'x-max-length': 0, 'x-overflow': 'reject-publish' },
    });
    await rabbit.channel.bindQueue(okQueue, fanout, '');
    await rabbit.channel.bindQueue(fullQueue, fanout, '');
    const publisher = createRabbitMqPublisher({ url, exchange: fanout, name: 'rfix-fan' });
    try {
      // Act
      const outcome = await publisher.publish(aMessage('row-7'));
      // Assess
      expect(outcome).toEqual({ kind: 'retry', error: NACKED_ERROR });
      expect(NACKED_ERROR).toBe(
        'the broker refused the message (a bound queue at its length limit with overflow reject-publish?); other queues bound to the exchange may have received it',
      );
      expect((await rabbit.channel.checkQueue(okQueue)).messageCount).toBe(1);
    } finally {
      await publisher.close();
    }
  });
});
