/**
 * Messages larger than RabbitMQ takes: over the destination's `maxMessageBytes` the publisher answers them dead
 * unsent; over the broker's own `max_message_size` (which closes the channel shared by every publish in flight) the
 * too large one is answered dead and only the publishes beside it are retried, and the next too large one is not
 * sent at all. (The outbox retries a row answered dead until no attempt remains, as for any failure.)
 */
import type { OutgoingMessage, PublishOutcome } from '@queuebox/core';
import { requireServices } from '@queuebox/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import { useAmqpAdmin } from '../../../test/brokers/support/amqp-admin.ts';
import { createRabbitMqPublisher, MAX_MESSAGE_BYTES_LIMIT } from '../src/index.ts';

const needs = await requireServices('rabbitmq publisher message size', ['rabbitmq']);
const url = needs.url.rabbitmq;

const rabbit = useAmqpAdmin(needs.available ? url : undefined, 'qb.test.pubsize');
const exchange = rabbit.exchange('x');
const queue = rabbit.queue('all');

beforeAll(async () => {
  if (!needs.available) return;
  await rabbit.channel.assertExchange(exchange, 'topic', { durable: false, autoDelete: false });
  await rabbit.channel.assertQueue(queue, { durable: false });
  await rabbit.channel.bindQueue(queue, exchange, 'orders.#');
});

let counter = 0;
function aMessage(overrides: Partial<OutgoingMessage> = {}): OutgoingMessage {
  counter += 1;
  return {
    id: `${rabbit.run}-${counter}`,
    topic: 'orders.created',
    key: null,
    payload: { n: counter },
    headers: {},
    attempt: 0,
    ...overrides,
  };
}

/** The message ids in the queue once it stays empty for a while (taken off it). */
async function drainIds(): Promise<string[]> {
  const ids: string[] = [];
  let quiet = 0;
  while (quiet < 20) {
    const message = await rabbit.channel.get(queue, { noAck: true });
    if (message) {
      ids.push(String(message.properties.messageId));
      quiet = 0;
    } else {
      quiet += 1;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
  return ids;
}

const kinds = (outcomes: readonly PublishOutcome[]) => outcomes.map((o) => o.kind);

describe.runIf(needs.available)(`RabbitMQ publisher, messages too large, on ${needs.via.rabbitmq}`, () => {
  it('answers dead for a body over maxMessageBytes without sending it, while the publishes beside it are sent', async () => {
    // Prepare: a body of 2 KiB + 2 (the JSON quotes), on a destination taking 1 KiB; one exactly at the limit
    const publisher = createRabbitMqPublisher({ url, exchange, name: 'orders', maxMessageBytes: 1024 });
    const big = aMessage({ payload: 'x'.repeat(2048) });
    const atLimit = aMessage({ payload: 'y'.repeat(1022) });
    const small = Array.from({ length: 10 }, () => aMessage());
    try {
      // Act: all at once on the one confirm channel, the big one in the middle
      const outcomes = await Promise.all([
        ...small.slice(0, 5).map((m) => publisher.publish(m)),
        publisher.publish(big),
        publisher.publish(atLimit),
        ...small.slice(5).map((m) => publisher.publish(m)),
      ]);
      // Assess
      expect(outcomes[5]).toEqual({
        kind: 'dead',
        error: 'message of 2050 bytes is over maxMessageBytes 1024 of destination "orders"',
      });
      expect(kinds([...outcomes.slice(0, 5), ...outcomes.slice(6)])).toEqual(Array(12 - 1).fill('sent'));
      const ids = await drainIds();
      expect(ids).not.toContain(big.id);
      expect(new Set(ids)).toEqual(new Set([...small, atLimit].map((m) => m.id)));
      expect(ids).toHaveLength(11);
    } finally {
      await publisher.close();
    }
  });

  it("answers dead for a body the broker refuses for its max_message_size, retries only the others on the channel, and sends no other body over the broker's limit", async () => {
    // Prepare: the destination allows what the broker does not. 128 MiB + 1 is over the max_message_size default
    // of RabbitMQ 3.x (128 MiB) and 4.x (16 MiB).
    const publisher = createRabbitMqPublisher({
      url,
      exchange,
      name: 'orders',
      maxMessageBytes: MAX_MESSAGE_BYTES_LIMIT,
      confirmTimeoutMs: 60_000,
    });
    const payload = 'x'.repeat(128 * 1024 * 1024 - 1);
    const bodyBytes = 128 * 1024 * 1024 + 1;
    const big = aMessage({ payload });
    const before = Array.from({ length: 5 }, () => aMessage());
    const after = Array.from({ length: 5 }, () => aMessage());
    try {
      // Act 1: the big one between small ones on the one confirm channel, which the broker closes over it
      const first = await Promise.all([
        ...before.map((m) => publisher.publish(m)),
        publisher.publish(big),
        ...after.map((m) => publisher.publish(m)),
      ]);
      // Assess 1: the big one is answered dead, naming the broker's limit; the others are sent or retried
      const bigOutcome = first[5];
      expect(bigOutcome).toMatchObject({
        kind: 'dead',
        error: expect.stringMatching(
          new RegExp(
            `^message of ${bodyBytes} bytes is over the max_message_size (\\d+) of the RabbitMQ broker of destination "orders" .*406 PRECONDITION_FAILED.*set maxMessageBytes \\(${MAX_MESSAGE_BYTES_LIMIT}\\) to at most \\d+$`,
          ),
        ),
      });
      const others = [...first.slice(0, 5), ...first.slice(6)];
      for (const outcome of others) expect(['sent', 'retry']).toContain(outcome.kind);
      const retried = [...before, ...after].filter((_, i) => others[i]?.kind === 'retry');
      for (const outcome of others.filter((o) => o.kind === 'retry')) {
        expect(outcome).toMatchObject({ error: expect.stringMatching(/channel closed.*406.*message size/) });
      }
      // Act 2: the retries of the others, and another body over the broker's limit with small ones beside it
      const again = Array.from({ length: 6 }, () => aMessage());
      const big2 = aMessage({ payload });
      const second = await Promise.all([
        ...retried.map((m) => publisher.publish({ ...m, attempt: 1 })),
        ...again.slice(0, 3).map((m) => publisher.publish(m)),
        publisher.publish(big2),
        ...again.slice(3).map((m) => publisher.publish(m)),
      ]);
      // Assess 2: the broker's limit is known on this connection, so the big one is answered dead before it is sent and
      // the channel stays open: every other publish is sent
      const big2Outcome = second[retried.length + 3];
      expect(big2Outcome).toEqual(bigOutcome);
      expect(kinds(second.filter((o) => o !== big2Outcome))).toEqual(Array(retried.length + 6).fill('sent'));
      const ids = await drainIds();
      expect(ids).not.toContain(big.id);
      expect(ids).not.toContain(big2.id);
      expect(new Set(ids)).toEqual(new Set([...before, ...after, ...again].map((m) => m.id)));
    } finally {
      await publisher.close();
    }
  }, 120_000);
});
