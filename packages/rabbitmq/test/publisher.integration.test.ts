import type { OutgoingMessage } from '@queuebox/core';
import { requireServices } from '@queuebox/testing';
import type { ConfirmChannel, GetMessage } from 'amqplib';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { useAmqpAdmin } from '../../../test/brokers/support/amqp-admin.ts';
import { hostPort, startTcpProxy, viaPort } from '../../../test/brokers/support/tcp-proxy.ts';
import { createRabbitMqPublisher } from '../src/index.ts';

const needs = await requireServices('rabbitmq publisher', ['rabbitmq']);
const url = needs.url.rabbitmq;

const rabbit = useAmqpAdmin(needs.available ? url : undefined, 'qb.test.pub');
const exchange = rabbit.exchange('x');
const queue = rabbit.queue('all');
const missingExchange = rabbit.exchange('missing');

beforeAll(async () => {
  if (!needs.available) return;
  await rabbit.channel.assertExchange(exchange, 'topic', { durable: false, autoDelete: false });
  await rabbit.channel.assertQueue(queue, { durable: false });
  await rabbit.channel.bindQueue(queue, exchange, 'orders.#');
});

function aMessage(overrides: Partial<OutgoingMessage> = {}): OutgoingMessage {
  return {
    id: String(Math.floor(Math.random() * 1e9)),
    topic: 'orders.created',
    key: 'order-1',
    payload: { order: 'order-1', lines: [1, 2], note: 'ü' },
    headers: { 'x-trace': 'abc', 'X-Correlation-Id': 'corr-7' },
    attempt: 0,
    ...overrides,
  };
}

async function take(): Promise<GetMessage> {
  for (let i = 0; i < 200; i++) {
    const message = await rabbit.channel.get(queue, { noAck: true });
    if (message) return message;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`no message arrived in ${queue}`);
}

describe.runIf(needs.available)(`RabbitMQ publisher on ${needs.via.rabbitmq}`, () => {
  it('publishes a persistent JSON message with the outbox id, the routing key and the headers', async () => {
    // Prepare
    const publisher = createRabbitMqPublisher({ url, exchange, routingKey: '{{ topic }}.{{ key }}' });
    const message = aMessage({ headers: { 'x-trace': 'abc', 'Message-Id': 'forged' } });
    try {
      // Act
      const outcome = await publisher.publish(message);
      // Assess
      expect(outcome).toEqual({ kind: 'sent' });
      const received = await take();
      expect(JSON.parse(received.content.toString('utf8'))).toEqual(message.payload);
      expect(received.fields.routingKey).toBe('orders.created.order-1');
      expect(received.properties).toMatchObject({
        messageId: message.id,
        contentType: 'application/json',
        deliveryMode: 2,
        appId: 'queuebox',
        headers: { 'x-trace': 'abc', 'message-id': message.id },
      });
      expect(received.properties.headers).not.toHaveProperty('Message-Id');
    } finally {
      await publisher.close();
    }
  });

  it('counts an unroutable message as a failed attempt and keeps publishing on the same channel', async () => {
    // Prepare
    const publisher = createRabbitMqPublisher({ url, exchange });
    try {
      // Act
      const unroutable = await publisher.publish(aMessage({ topic: 'nobody.listens' }));
      const routable = await publisher.publish(aMessage({ topic: 'orders.paid' }));
      // Assess
      expect(unroutable).toMatchObject({ kind: 'retry' });
      expect(unroutable.kind === 'retry' && unroutable.error).toMatch(
        /unroutable.*routing key "nobody\.listens"/,
      );
      expect(routable).toEqual({ kind: 'sent' });
      expect((await take()).fields.routingKey).toBe('orders.paid');
    } finally {
      await publisher.close();
    }
  });

  it('a return that comes after its publish gave up does not mark a later publish of the same message', async () => {
    // Prepare: a channel in use, and a message nobody can route yet
    const publisher = createRabbitMqPublisher({ url, exchange });
    const message = aMessage({ topic: 'later.bound' });
    try {
      expect(await publisher.publish(aMessage())).toEqual({ kind: 'sent' });
      await take();
      // Act: the first publish is given up (the drain's deadline) before the broker's return and confirm arrive
      const gaveUp = new AbortController();
      const first = publisher.publish(message, gaveUp.signal);
      await new Promise((resolve) => setImmediate(resolve));
      gaveUp.abort();
      const firstOutcome = await first;
      await new Promise((resolve) => setTimeout(resolve, 200));
      await rabbit.channel.bindQueue(queue, exchange, 'later.#');
      const again = await publisher.publish(message);
      // Assess: the retry, routable now, is sent (not counted unroutable by the old return)
      expect(firstOutcome).toEqual({ kind: 'retry', error: 'aborted while waiting for the broker confirm' });
      expect(again).toEqual({ kind: 'sent' });
      expect((await take()).properties.messageId).toBe(message.id);
    } finally {
      await rabbit.channel.unbindQueue(queue, exchange, 'later.#').catch(() => undefined);
      await publisher.close();
    }
  });

  it('dead-letters a row RabbitMQ would refuse (CC/BCC header, long routing key) without failing the publishes beside it', async () => {
    // Prepare: RabbitMQ closes the channel over a CC or BCC header that is not an array (row headers are text)
    const publisher = createRabbitMqPublisher({ url, exchange, routingKey: '{{ topic }}{{ key }}' });
    const good = Array.from({ length: 20 }, (_, i) => aMessage({ key: `-good-${i}` }));
    try {
      // Act: all on one confirm channel at once
      const [cc, bcc, longKey, ...outcomes] = await Promise.all([
        publisher.publish(aMessage({ key: '-cc', headers: { CC: 'audit@example.com' } })),
        publisher.publish(aMessage({ key: '-bcc', headers: { BCC: 'audit@example.com' } })),
        publisher.publish(aMessage({ key: `.${'k'.repeat(300)}` })),
        ...good.map((m) => publisher.publish(m)),
      ]);
      // Assess
      expect(outcomes.map((o) => o.kind)).toEqual(good.map(() => 'sent'));
      expect(cc).toMatchObject({
        kind: 'dead',
        error: expect.stringMatching(/header "CC" must be an array/),
      });
      expect(bcc).toMatchObject({
        kind: 'dead',
        error: expect.stringMatching(/header "BCC" must be an array/),
      });
      expect(longKey).toMatchObject({
        kind: 'dead',
        error: expect.stringMatching(/routing key is 315 bytes; AMQP allows at most 255/),
      });
      const received = new Set<string>();
      for (let i = 0; i < good.length; i++) received.add(String((await take()).properties.messageId));
      expect(received).toEqual(new Set(good.map((m) => m.id)));
      // A lower-case "cc" is an ordinary header to RabbitMQ
      expect(await publisher.publish(aMessage({ headers: { cc: 'x' } }))).toEqual({ kind: 'sent' });
      expect((await take()).properties.headers).toMatchObject({ cc: 'x' });
    } finally {
      await publisher.close();
    }
  });

  it('dead-letters only what amqplib cannot encode; any other error the publish throws is a retry', async () => {
    // Prepare: amqplib's confirm channel class, to make one publish throw as amqplib could from its own state
    const probe = await rabbit.connection.createConfirmChannel();
    const confirmChannel = Object.getPrototypeOf(probe) as ConfirmChannel;
    await probe.close();
    const publisher = createRabbitMqPublisher({ url, exchange });
    const message = aMessage();
    const publishSpy = vi.spyOn(confirmChannel, 'publish');
    try {
      // Act
      const longId = await publisher.publish(aMessage({ id: 'm'.repeat(300) }));
      const hugeHeaders = await publisher.publish(aMessage({ headers: { 'x-big': 'b'.repeat(70_000) } }));
      publishSpy.mockImplementationOnce(() => {
        throw new TypeError("Cannot read properties of null (reading 'write')");
      });
      const internalTypeError = await publisher.publish(message);
      publishSpy.mockImplementationOnce(() => {
        throw new RangeError('Maximum call stack size exceeded');
      });
      const internalRangeError = await publisher.publish(message);
      const again = await publisher.publish(message);
      // Assess: amqplib's encoding errors are dead; its other errors leave the row to a retry, which is sent
      expect(longId).toMatchObject({
        kind: 'dead',
        error: expect.stringMatching(/Cannot encode the message: Field 'messageId' is the wrong type/),
      });
      expect(hugeHeaders).toMatchObject({
        kind: 'dead',
        error: expect.stringMatching(
          /Cannot encode the message: Encoded field table .* exceeds the 65536 byte/,
        ),
      });
      expect(internalTypeError).toMatchObject({
        kind: 'retry',
        error: expect.stringMatching(/Cannot publish: .*Cannot read properties of null/),
      });
      expect(internalRangeError).toMatchObject({
        kind: 'retry',
        error: expect.stringMatching(/Cannot publish: .*Maximum call stack size exceeded/),
      });
      expect(again).toEqual({ kind: 'sent' });
      expect((await take()).properties.messageId).toBe(message.id);
    } finally {
      publishSpy.mockRestore();
      await publisher.close();
    }
  });

  it('retries while the exchange does not exist and delivers once it does', async () => {
    // Prepare
    const publisher = createRabbitMqPublisher({ url, exchange: missingExchange });
    try {
      // Act
      const before = await publisher.publish(aMessage());
      await rabbit.channel.assertExchange(missingExchange, 'topic', { durable: false });
      await rabbit.channel.bindQueue(queue, missingExchange, '#');
      const after = await publisher.publish(aMessage());
      // Assess
      expect(before).toMatchObject({ kind: 'retry' });
      // The broker's reason, not amqplib's bare "channel closed"
      expect(before.kind === 'retry' && before.error).toMatch(
        /channel closed before RabbitMQ confirmed .*404 .*NOT_FOUND - no exchange/,
      );
      expect(after).toEqual({ kind: 'sent' });
      await take();
    } finally {
      await publisher.close();
    }
  });

  it('reuses one connection, retries while the broker is away, and reconnects when it returns', async () => {
    // Prepare
    const proxy = await startTcpProxy(hostPort(url, 5672));
    const publisher = createRabbitMqPublisher({
      url: viaPort(url, proxy.port),
      exchange,
      connectTimeoutMs: 2000,
    });
    try {
      const first = await Promise.all(Array.from({ length: 10 }, () => publisher.publish(aMessage())));
      // Act
      await proxy.stop();
      const during = await publisher.publish(aMessage());
      await proxy.start();
      const after = await publisher.publish(aMessage({ payload: { after: true } }));
      // Assess
      expect(first.every((o) => o.kind === 'sent')).toBe(true);
      expect(during).toMatchObject({ kind: 'retry' });
      expect(after).toEqual({ kind: 'sent' });
      expect(proxy.accepted).toBe(2); // one connection for the ten, one after the outage
      const received = [];
      for (let i = 0; i < 11; i++) received.push(JSON.parse((await take()).content.toString()));
      expect(received.at(-1)).toEqual({ after: true });
    } finally {
      await publisher.close();
      await proxy.stop();
    }
  });

  it('answers retry when no broker listens at all', async () => {
    // Prepare
    const publisher = createRabbitMqPublisher({ url: 'amqp://guest:guest@127.0.0.1:1', exchange });
    try {
      // Act
      const outcome = await publisher.publish(aMessage());
      // Assess
      expect(outcome).toMatchObject({ kind: 'retry' });
      expect(outcome.kind === 'retry' && outcome.error).toMatch(/Cannot connect to RabbitMQ.*ECONNREFUSED/);
    } finally {
      await publisher.close();
    }
  });

  it('gives a row whose publish was aborted before it began back unstarted, and sends nothing', async () => {
    // Prepare: a stop or a tick's deadline came before the publish (review of 364a82d: only the abort while the
    // confirm channel opens was tested)
    const publisher = createRabbitMqPublisher({ url, exchange });
    const aborted = AbortSignal.abort();
    try {
      // Act
      const outcome = await publisher.publish(aMessage(), aborted);
      const sent = await publisher.publish(aMessage({ payload: { second: true } }));
      // Assess: no attempt spent, nothing on the queue but the second message
      expect(outcome).toEqual({ kind: 'retry', error: 'aborted before publishing', unstarted: true });
      expect(sent).toEqual({ kind: 'sent' });
      expect(JSON.parse((await take()).content.toString())).toEqual({ second: true });
    } finally {
      await publisher.close();
    }
  });
});
