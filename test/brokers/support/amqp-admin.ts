/**
 * A RabbitMQ test file's own connection to the machine's broker, to declare, fill, read and delete its queues and
 * exchanges: opened before the file's tests, and closed after them once every name the file took through it is
 * deleted. Names are unique to the run (`<prefix>.<run>.<what>`), so parallel runs never share a queue.
 */
import { randomBytes } from 'node:crypto';
import type { Channel, ChannelModel } from 'amqplib';
import amqp from 'amqplib';
import { afterAll, beforeAll } from 'vitest';

export interface AmqpAdmin {
  /** The connection; throws outside the file's tests, and when RabbitMQ is not available. */
  readonly connection: ChannelModel;
  /** A channel on it, for the file's own declarations and messages. */
  readonly channel: Channel;
  /** This run's random part of every name. */
  readonly run: string;
  /** A queue name unique to this run, deleted after the file. */
  queue(what: string): string;
  /** An exchange name unique to this run, deleted after the file. */
  exchange(what: string): string;
}

/**
 * Call at the top level of a test file. With `url` undefined (RabbitMQ not available) it registers nothing and the
 * file's tests are expected to be skipped.
 */
export function useAmqpAdmin(url: string | undefined, prefix: string): AmqpAdmin {
  const run = randomBytes(4).toString('hex');
  const queues: string[] = [];
  const exchanges: string[] = [];
  let opened: { connection: ChannelModel; channel: Channel } | undefined;
  const open = () => {
    if (opened === undefined)
      throw new Error('no RabbitMQ connection here (outside the tests, or no broker)');
    return opened;
  };
  const named = (list: string[]) => (what: string) => {
    const name = `${prefix}.${run}.${what}`;
    if (!list.includes(name)) list.push(name);
    return name;
  };

  if (url !== undefined) {
    beforeAll(async () => {
      const connection = await amqp.connect(url);
      opened = { connection, channel: await connection.createChannel() };
    });
    afterAll(async () => {
      if (opened === undefined) return;
      // A test may have closed the channel (a 404 does): the deletions take a fresh one.
      const channel = await opened.connection.createChannel();
      for (const queue of queues) await channel.deleteQueue(queue).catch(() => undefined);
      for (const exchange of exchanges) await channel.deleteExchange(exchange).catch(() => undefined);
      await opened.connection.close();
      opened = undefined;
    });
  }

  return {
    get connection() {
      return open().connection;
    },
    get channel() {
      return open().channel;
    },
    run,
    queue: named(queues),
    exchange: named(exchanges),
  };
}
