/**
 * The long-lived RabbitMQ consumer on the machine's broker and a real PostgreSQL: what it does when the broker
 * cancels it (the queue deleted, declared again or not), and during a database outage on a quorum queue with a
 * delivery limit (the outage is the real PostgreSQL store behind a wrapper that throws core's
 * StoreUnavailableError while it is "down").
 */
import { randomUUID } from 'node:crypto';
import type { InboxRow } from '@queuebox/core';
import { MessageState, StoreUnavailableError } from '@queuebox/core';
import { createBrokerIngestion, type Sources } from '@queuebox/inbox';
import { requireServices } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { useAmqpAdmin } from '../../../test/brokers/support/amqp-admin.ts';
import { eventually, outageableInbox, useBrokerTestStore } from '../../../test/brokers/support/store.ts';
import { hostPort, startTcpProxy, viaPort } from '../../../test/brokers/support/tcp-proxy.ts';
import { createRabbitMqConsumer } from '../src/index.ts';

const needs = await requireServices('rabbitmq consumer', ['postgres', 'rabbitmq']);
const url = needs.url.rabbitmq;
const db = useBrokerTestStore('rabbitmq_consumer', needs.available ? needs.url.postgres : undefined);

// Unique names per run; every queue is deleted after its test (and again after the file).
const rabbit = useAmqpAdmin(needs.available ? url : undefined, 'qb.test.consumer');
const queueName = rabbit.queue;

const sources: Sources = {
  cancelled: { type: 'amqp' },
  gone: { type: 'amqp' },
  outage: { type: 'amqp' },
  'outage-broken': { type: 'amqp' },
  'outage-close': { type: 'amqp' },
  bug: { type: 'amqp' },
  headers: { type: 'amqp' },
};

/** A quorum queue whose broker drops a message at its 4th delivery (RabbitMQ 4.x defaults to a limit of 20). */
async function quorumQueue(what: string): Promise<string> {
  const queue = queueName(what);
  await rabbit.channel.assertQueue(queue, {
    durable: true,
    arguments: { 'x-queue-type': 'quorum', 'x-delivery-limit': 3 },
  });
  return queue;
}

function send(queue: string, body: object, messageId: string) {
  rabbit.channel.sendToQueue(queue, Buffer.from(JSON.stringify(body)), { messageId, persistent: true });
}

/** The report of the broker's cancel (a RabbitMqConsumerCancelledError). */
const isCancel = (error: unknown) =>
  error instanceof Error && error.name === 'RabbitMqConsumerCancelledError';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The real broker ingestion of an AMQP source whose transform function throws (a bug) on `{ "poison": true }`. */
function poisonIngestion(source: string) {
  return createBrokerIngestion({
    store: db.store.inbox,
    sources: { [source]: { type: 'amqp', transform: { function: 'buggy' } } },
    transforms: {
      buggy: ({ payload }) => {
        if ((payload as { poison?: boolean }).poison === true) throw new TypeError('a bug');
        return { payload };
      },
    },
  });
}

async function rowsOf(source: string, count: number, timeoutMs = 8_000): Promise<InboxRow[]> {
  return eventually(
    `${count} inbox rows of ${source}`,
    async () => {
      const rows = await db.inboxRows(source);
      return rows.length >= count ? rows : undefined;
    },
    timeoutMs,
  );
}

describe.skipIf(needs.skipReason)('RabbitMQ consumer', () => {
  it('says so and consumes again when the broker cancels it (queue deleted and declared again)', async () => {
    // Prepare
    const queue = queueName('cancel');
    await rabbit.channel.assertQueue(queue, { durable: false });
    const errors: { error: unknown; during: string }[] = [];
    const consumer = createRabbitMqConsumer({
      source: 'cancelled',
      url,
      queue,
      reconnectDelayMs: 50,
      ingestion: createBrokerIngestion({ store: db.store.inbox, sources }),
      onError: (error, { during }) => errors.push({ error, during }),
    });
    try {
      await consumer.start();
      send(queue, { n: 0 }, randomUUID());
      await rowsOf('cancelled', 1);
      // Act
      await rabbit.channel.deleteQueue(queue); // the broker sends basic.cancel
      const cancel = await eventually('the cancel to be reported', () =>
        errors.find((e) => isCancel(e.error)),
      );
      await rabbit.channel.assertQueue(queue, { durable: false });
      for (let n = 1; n <= 3; n++) send(queue, { n }, randomUUID());
      const rows = await rowsOf('cancelled', 4);
      // Assess
      expect(cancel.during).toBe('consume');
      expect((cancel.error as Error).message).toContain(`queue "${queue}"`);
      // Deliveries in hand are ingested side by side, so rows of one prefetch window commit in any order.
      expect(rows.map((r) => (r.payload as { n: number }).n).sort()).toEqual([0, 1, 2, 3]);
      expect(consumer.consuming).toBe(true);
      await eventually('the queue to drain', async () =>
        (await rabbit.channel.checkQueue(queue)).messageCount === 0 ? true : undefined,
      );
    } finally {
      await consumer.close();
      await rabbit.channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('keeps trying with a growing delay while the cancelled queue is gone, not consuming meanwhile', async () => {
    // Prepare
    const queue = queueName('gone');
    await rabbit.channel.assertQueue(queue, { durable: false });
    const errors: { error: unknown; during: string; at: number }[] = [];
    const consumer = createRabbitMqConsumer({
      source: 'gone',
      url,
      queue,
      reconnectDelayMs: 50,
      ingestion: createBrokerIngestion({ store: db.store.inbox, sources }),
      onError: (error, { during }) => errors.push({ error, during, at: Date.now() }),
    });
    try {
      await consumer.start();
      // Act
      await rabbit.channel.deleteQueue(queue);
      const tries = await eventually('three failed tries to consume again', () => {
        const found = errors.filter((e) => e.during === 'connect');
        return found.length >= 3 ? found : undefined;
      });
      const consumingMeanwhile = consumer.consuming;
      await rabbit.channel.assertQueue(queue, { durable: false });
      const id = randomUUID();
      send(queue, { back: true }, id);
      const rows = await rowsOf('gone', 1);
      // Assess
      expect(errors.some((e) => isCancel(e.error))).toBe(true);
      expect(consumingMeanwhile).toBe(false);
      for (const t of tries) expect(String((t.error as Error).message)).toMatch(/NOT_FOUND/);
      // The delay doubles (50, 100, 200 ms, …): the third try came at least 100 ms after the second.
      expect((tries[2]?.at ?? 0) - (tries[1]?.at ?? 0)).toBeGreaterThanOrEqual(90);
      expect(rows[0]).toMatchObject({ idempotencyKey: id, payload: { back: true } });
      expect(consumer.consuming).toBe(true);
    } finally {
      await consumer.close();
      await rabbit.channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('uses up no delivery of a quorum queue with a delivery limit during a database outage: nothing lost, in order', async () => {
    // Prepare
    const queue = await quorumQueue('outage');
    const { store, state } = outageableInbox(db.store.inbox);
    const failures: unknown[] = [];
    const consumer = createRabbitMqConsumer({
      source: 'outage',
      url,
      queue,
      retryDelayMs: 50,
      maxRetryDelayMs: 200,
      ingestion: createBrokerIngestion({ store, sources }),
      onError: (error) => failures.push(error),
    });
    const ids = Array.from({ length: 5 }, () => randomUUID());
    try {
      state.down = true;
      await consumer.start();
      // Act: a requeue per failed try would have used up the 3 deliveries within a few hundred milliseconds.
      ids.forEach((id, n) => {
        send(queue, { n }, id);
      });
      await eventually('five deliveries in hand', async () =>
        (await rabbit.channel.checkQueue(queue)).messageCount === 0 && state.refused >= 5 ? true : undefined,
      );
      await sleep(1_500);
      const refusedDuringOutage = state.refused;
      state.down = false;
      const rows = await rowsOf('outage', 5);
      // Assess
      expect(refusedDuringOutage).toBeGreaterThan(6);
      expect(failures.length).toBeGreaterThanOrEqual(refusedDuringOutage);
      expect(failures.every((f) => f instanceof StoreUnavailableError)).toBe(true);
      expect(rows.map((r) => r.idempotencyKey)).toEqual(ids);
      // No delivery was returned to the queue: with a requeue per try the broker had dropped them past 3. (The
      // broker's x-delivery-count is read by the consumer, never stored.)
      for (const row of rows) expect(row.headers).not.toHaveProperty('x-delivery-count');
      await eventually('the queue to be empty and acknowledged', async () => {
        const { messageCount } = await rabbit.channel.checkQueue(queue);
        return messageCount === 0 ? true : undefined;
      });
    } finally {
      state.down = false;
      await consumer.close();
      await rabbit.channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('loses nothing when the broker closes the channel during an outage (as its consumer timeout does)', async () => {
    // Prepare
    const queue = await quorumQueue('outage-broken');
    const proxy = await startTcpProxy(hostPort(url, 5672));
    const { store, state } = outageableInbox(db.store.inbox);
    const consumer = createRabbitMqConsumer({
      source: 'outage-broken',
      url: viaPort(url, proxy.port),
      queue,
      retryDelayMs: 50,
      maxRetryDelayMs: 200,
      reconnectDelayMs: 50,
      ingestion: createBrokerIngestion({ store, sources }),
    });
    const ids = Array.from({ length: 5 }, () => randomUUID());
    try {
      state.down = true;
      await consumer.start();
      ids.forEach((id, n) => {
        send(queue, { n }, id);
      });
      await eventually('five deliveries held', () => (state.refused >= 5 ? true : undefined));
      // Act: the unacknowledged deliveries go back to the queue, as when consumer_timeout closes the channel.
      await proxy.stop();
      await eventually('the consumer to notice', () => (consumer.consuming ? undefined : true));
      await proxy.start();
      await eventually('the consumer to be back', () => (consumer.consuming ? true : undefined));
      const refusedBefore = state.refused;
      await eventually('the redeliveries to be tried', () =>
        state.refused > refusedBefore ? true : undefined,
      );
      await sleep(1_000); // the outage goes on after the reconnect
      state.down = false;
      const rows = await rowsOf('outage-broken', 5);
      // Assess
      expect(rows.map((r) => r.idempotencyKey).sort()).toEqual([...ids].sort());
      // The closed channel returned each delivery once (RabbitMQ before 4.3 counts that), the outage none: all
      // five are stored although the queue drops a message past 3 deliveries. x-delivery-count is never stored.
      for (const row of rows) expect(row.headers).not.toHaveProperty('x-delivery-count');
      await eventually('the queue to be empty', async () =>
        (await rabbit.channel.checkQueue(queue)).messageCount === 0 ? true : undefined,
      );
      expect(proxy.accepted).toBe(2);
    } finally {
      state.down = false;
      await consumer.close();
      await proxy.stop();
      await rabbit.channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('leaves the deliveries waiting for the database to the broker when it closes', async () => {
    // Prepare
    const queue = await quorumQueue('outage-close');
    const { store, state } = outageableInbox(db.store.inbox);
    const consumer = createRabbitMqConsumer({
      source: 'outage-close',
      url,
      queue,
      retryDelayMs: 60_000,
      ingestion: createBrokerIngestion({ store, sources }),
    });
    try {
      state.down = true;
      await consumer.start();
      for (let n = 0; n < 3; n++) send(queue, { n }, randomUUID());
      // The first try fails; the two after it wait behind it without a try of their own.
      await eventually('three deliveries held', async () =>
        state.refused >= 1 && (await rabbit.channel.checkQueue(queue)).messageCount === 0 ? true : undefined,
      );
      // Act
      const started = Date.now();
      await consumer.close();
      const took = Date.now() - started;
      // Assess: back in the queue at once, not after the minute's pause, and nothing stored.
      expect(took).toBeLessThan(5_000);
      const { messageCount } = await eventually('the messages back in the queue', async () => {
        const checked = await rabbit.channel.checkQueue(queue);
        return checked.messageCount === 3 ? checked : undefined;
      });
      expect(messageCount).toBe(3);
      expect(await db.inboxRows('outage-close')).toEqual([]);
    } finally {
      state.down = false;
      await consumer.close();
      await rabbit.channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('tries a poison message again on its own, unacknowledged, while the others are stored: no delivery used up, nothing lost', async () => {
    // Prepare: a transform function registered in code that throws on one payload (a bug, no rejection), on a
    // quorum queue whose broker drops a message at its 4th delivery.
    const queue = await quorumQueue('bug');
    const buggy = { on: true, tries: 0 };
    const ingestion = createBrokerIngestion({
      store: db.store.inbox,
      sources: { bug: { type: 'amqp', transform: { function: 'buggy' } } },
      transforms: {
        buggy: ({ payload }) => {
          if ((payload as { poison?: boolean }).poison === true) {
            buggy.tries += 1;
            if (buggy.on) throw new TypeError("Cannot read properties of undefined (reading 'id')");
          }
          return { payload };
        },
      },
    });
    const failures: unknown[] = [];
    const consumer = createRabbitMqConsumer({
      source: 'bug',
      url,
      queue,
      prefetch: 2,
      retryDelayMs: 20,
      maxRetryDelayMs: 100,
      ingestion,
      onError: (error) => failures.push(error),
    });
    const poison = randomUUID();
    const good = Array.from({ length: 4 }, () => randomUUID());
    try {
      await consumer.start();
      // Act
      send(queue, { n: 0, poison: true }, poison);
      good.forEach((id, n) => {
        send(queue, { n: n + 1 }, id);
      });
      const stored = await rowsOf('bug', 4);
      // A requeue per failed try would have used up the 3 deliveries by the 4th try, and the broker dropped it.
      await eventually('six tries of the poison message', () => (buggy.tries >= 6 ? true : undefined));
      buggy.on = false;
      const rows = await rowsOf('bug', 5);
      // Assess
      expect(stored.map((r) => r.idempotencyKey)).toEqual(good);
      expect(failures.length).toBeGreaterThanOrEqual(5);
      expect(failures.every((f) => f instanceof TypeError)).toBe(true);
      expect(rows[4]).toMatchObject({ idempotencyKey: poison, payload: { n: 0, poison: true } });
      // Never returned to the queue: six requeues had used up its 3 deliveries. x-delivery-count is never stored.
      expect(rows[4]?.headers).not.toHaveProperty('x-delivery-count');
      await eventually('the queue to be empty and acknowledged', async () =>
        (await rabbit.channel.checkQueue(queue)).messageCount === 0 ? true : undefined,
      );
    } finally {
      await consumer.close();
      await rabbit.channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('keeps at most prefetch − 1 poison messages: past that one is requeued as before, and the queue never stalls behind them', async () => {
    // Prepare: prefetch 2 and two poison messages ahead of three good ones, on a quorum queue whose broker drops a
    // message at its 4th delivery. Both kept, they held both slots and the broker sent nothing more, for good.
    const queue = await quorumQueue('stall');
    const ingestion = poisonIngestion('stall');
    const consumer = createRabbitMqConsumer({
      source: 'stall',
      url,
      queue,
      prefetch: 2,
      retryDelayMs: 20,
      maxRetryDelayMs: 100,
      ingestion,
      onError: () => undefined,
    });
    const good = Array.from({ length: 3 }, () => randomUUID());
    try {
      await consumer.start();
      // Act
      send(queue, { n: 0, poison: true }, randomUUID());
      send(queue, { n: 1, poison: true }, randomUUID());
      good.forEach((id, n) => {
        send(queue, { n: n + 2 }, id);
      });
      const stored = await rowsOf('stall', 3);
      // Assess: the good messages are stored although two poison messages came first
      expect(stored.map((r) => r.idempotencyKey).sort()).toEqual([...good].sort());
    } finally {
      await consumer.close();
      await rabbit.channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it("stores a requeued poison message as a dead row at the queue's delivery limit, where the broker dropped it", async () => {
    // Prepare: prefetch 1, so no poison message is kept (each failure requeues it), on a quorum queue that drops a
    // message past 3 failed deliveries; the source's deadAfterFailures (10 over 5 minutes) is far away.
    const queue = await quorumQueue('limit');
    const ingestion = poisonIngestion('limit');
    const consumer = createRabbitMqConsumer({
      source: 'limit',
      url,
      queue,
      prefetch: 1,
      deliveryLimit: 3,
      retryDelayMs: 20,
      maxRetryDelayMs: 100,
      ingestion,
      onError: () => undefined,
    });
    const poison = randomUUID();
    const good = [randomUUID(), randomUUID()];
    try {
      await consumer.start();
      // Act
      send(queue, { n: 0, poison: true }, poison);
      good.forEach((id, n) => {
        send(queue, { n: n + 1 }, id);
      });
      const rows = await rowsOf('limit', 3);
      await eventually('the queue to be empty and acknowledged', async () =>
        (await rabbit.channel.checkQueue(queue)).messageCount === 0 ? true : undefined,
      );
      // Assess
      const byKey = new Map(rows.map((r) => [r.idempotencyKey, r]));
      expect(byKey.get(poison)).toMatchObject({ state: MessageState.Dead, payload: { n: 0, poison: true } });
      expect(byKey.get(poison)?.lastError).toMatch(
        /^The ingestion failed \d+ times since .* \(not a database outage, at the broker's last delivery of it\), last with: a bug$/,
      );
      // x-delivery-count is the broker's state of the message in this queue: read, not stored (nor relayed).
      expect(byKey.get(poison)?.headers).not.toHaveProperty('x-delivery-count');
      for (const id of good) expect(byKey.get(id)?.state).toBe(MessageState.Pending);
    } finally {
      await consumer.close();
      await rabbit.channel.deleteQueue(queue).catch(() => undefined);
    }
  });

  it('stores messages whose header tables are nested thousands of levels deep or hold a "__proto__" key, never crashing', async () => {
    // Prepare: tables amqplib encodes and decodes as they are (any client may publish them). A recursive walk of
    // the first overflowed the stack, and the second (amqplib decodes a table by assignment, so its prototype
    // became a Buffer) threw a TypeError: both in the delivery callback, an unhandled rejection that ended the
    // process, and again at every restart.
    const queue = queueName('headers');
    await rabbit.channel.assertQueue(queue, { durable: false });
    let deep: Record<string, unknown> = { leaf: 'x' };
    for (let i = 0; i < 2_000; i++) deep = { a: deep };
    // An own key "__proto__" (as JSON.parse makes one), holding a byte array.
    const proto = Object.defineProperty({ kept: 'yes' }, '__proto__', {
      value: Buffer.from('bytes'),
      enumerable: true,
    });
    const failures: unknown[] = [];
    const consumer = createRabbitMqConsumer({
      source: 'headers',
      url,
      queue,
      ingestion: createBrokerIngestion({ store: db.store.inbox, sources }),
      onError: (error) => failures.push(error),
    });
    const ids = Array.from({ length: 4 }, () => randomUUID());
    try {
      await consumer.start();
      // Act
      const headers = [{}, { deep }, { odd: proto }, { 'x-trace': 't' }];
      ids.forEach((id, n) => {
        rabbit.channel.sendToQueue(queue, Buffer.from(JSON.stringify({ n })), {
          messageId: id,
          headers: headers[n],
        });
      });
      const rows = await rowsOf('headers', 4);
      // Assess
      expect(new Set(rows.map((r) => r.idempotencyKey))).toEqual(new Set(ids));
      const byKey = new Map(rows.map((r) => [r.idempotencyKey, r]));
      const deepText = byKey.get(ids[1] ?? '')?.headers.deep ?? '';
      expect(deepText.startsWith('{"a":{"a":')).toBe(true);
      expect(deepText).toHaveLength(2_000 * '{"a":}'.length + '{"leaf":"x"}'.length);
      // The consumer's own decoding (amqp-lossless.ts) keeps a "__proto__" key as an own entry of its table (amqplib
      // made it the table's prototype, and the entry was lost).
      expect(byKey.get(ids[2] ?? '')?.headers.odd).toBe('{"kept":"yes","__proto__":"bytes"}');
      expect(byKey.get(ids[3] ?? '')?.headers).toEqual({ 'x-trace': 't' });
      expect(failures).toEqual([]);
      expect(consumer.consuming).toBe(true);
    } finally {
      await consumer.close();
      await rabbit.channel.deleteQueue(queue).catch(() => undefined);
    }
  });
});
