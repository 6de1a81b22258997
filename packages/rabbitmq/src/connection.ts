import { QueueBoxError } from '@queuebox/core';
import type { Channel, ChannelModel, ConfirmChannel } from 'amqplib';
import amqp from 'amqplib';

/** The broker cannot be reached, refused the connection, or closed it. */
export class RabbitMqUnavailableError extends QueueBoxError {}

/** Options of a connection. */
export interface AmqpConnectionOptions {
  /** `amqp://` or `amqps://` URL, credentials and vhost included. */
  readonly url: string;
  /** Shown in the broker's management UI and `rabbitmqctl list_connections`. Default `queuebox`. */
  readonly connectionName?: string;
  /** Socket connect timeout, in milliseconds. Default 10000. */
  readonly connectTimeoutMs?: number;
  /** Heartbeat interval the client asks for, in seconds. Default 30 (a dead peer is noticed within ~60 s). */
  readonly heartbeatSec?: number;
}

/** Reasons the broker gives for refusing or closing, as text without credentials. */
export function describeAmqpError(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) {
    return error.errors.map(describeAmqpError).join('; ');
  }
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return code !== undefined && !error.message.includes(String(code))
      ? `${error.message} (${String(code)})`
      : error.message || error.name;
  }
  return String(error);
}

/** The URL with `?heartbeat=` added unless it sets one (amqplib reads the heartbeat from the URL only). */
export function withHeartbeat(url: string, heartbeatSec: number): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url; // amqplib reports the bad URL itself
  }
  if (parsed.searchParams.has('heartbeat')) return url;
  parsed.searchParams.set('heartbeat', String(heartbeatSec));
  return parsed.toString();
}

/** One AMQP connection, opened on first use and replaced when broken; channels are opened on it on demand. */
export interface AmqpConnection {
  /** The open connection, connecting first when there is none (concurrent callers share one attempt). */
  connection(): Promise<ChannelModel>;
  /**
   * The confirm channel of this connection, opened on first use; `setup` runs once on every new channel (to add
   * listeners such as `return`). Replaced when the channel or the connection closes.
   */
  confirmChannel(setup?: (channel: ConfirmChannel) => void): Promise<ConfirmChannel>;
  /** A new plain channel (the caller owns and closes it). */
  openChannel(): Promise<Channel>;
  /** Closes the connection; later calls reconnect. */
  reset(): Promise<void>;
  /** Closes the connection for good. */
  close(): Promise<void>;
  /**
   * Why `channel` (one of this connection's) closed, when the broker or the network closed it: the broker's close
   * of the channel (`406 PRECONDITION_FAILED - …`, `404 NOT_FOUND - no exchange …`) or of its connection, a socket
   * error, a missed heartbeat. Undefined while it is open or after a quiet close. amqplib fails the confirms in
   * flight with a bare `channel closed` before the connection's own `close` event, so ask after the current
   * synchronous turn (a microtask later) to see a connection-level reason.
   */
  closeReason(channel: Channel): Error | undefined;
  /** Called with every connection-level error or unexpected close (for logs). */
  onProblem?: (error: unknown) => void;
}

/**
 * A lazily opened AMQP connection that is reused until it breaks. It listens to the connection's and channel's
 * `error` and `close` events (an unhandled `error` event would crash the process) and forgets a broken connection,
 * so the next caller opens a new one. A failed connection attempt is not cached.
 */
export function createAmqpConnection(options: AmqpConnectionOptions): AmqpConnection {
  let current: Promise<ChannelModel> | undefined;
  let confirm: Promise<ConfirmChannel> | undefined;
  let closed = false;
  /** The first error a channel or a connection closed with. */
  const reasons = new WeakMap<Channel | ChannelModel, Error>();
  /** The connection each channel was opened on. */
  const modelOf = new WeakMap<Channel, ChannelModel>();
  const remember = (what: Channel | ChannelModel, error: unknown) => {
    if (error instanceof Error && !reasons.has(what)) reasons.set(what, error);
  };
  /** A channel of `model`, with its close reason kept. */
  function track<C extends Channel>(model: ChannelModel, channel: C): C {
    modelOf.set(channel, model);
    channel.on('error', (error: Error) => remember(channel, error));
    return channel;
  }
  const self: AmqpConnection = {
    connection,
    confirmChannel,
    async openChannel() {
      const model = await connection();
      return track(model, await model.createChannel());
    },
    closeReason(channel) {
      const model = modelOf.get(channel);
      return reasons.get(channel) ?? (model ? reasons.get(model) : undefined);
    },
    async reset() {
      const open = current;
      current = undefined;
      confirm = undefined;
      if (open) await open.then((m) => m.close()).catch(() => undefined);
    },
    async close() {
      closed = true;
      await self.reset();
    },
  };

  function problem(error: unknown) {
    try {
      self.onProblem?.(error);
    } catch {
      // A logging hook must not break the connection's bookkeeping.
    }
  }

  function connection(): Promise<ChannelModel> {
    if (closed) return Promise.reject(new RabbitMqUnavailableError('The connection was closed by its owner'));
    if (current) return current;
    const opening = amqp
      .connect(withHeartbeat(options.url, options.heartbeatSec ?? 30), {
        timeout: options.connectTimeoutMs ?? 10_000,
        clientProperties: { connection_name: options.connectionName ?? 'queuebox' },
      })
      .catch((error: unknown) => {
        throw new RabbitMqUnavailableError(`Cannot connect to RabbitMQ: ${describeAmqpError(error)}`, {
          cause: error,
        });
      });
    current = opening;
    opening.then(
      (model) => {
        const forget = () => {
          if (current === opening) {
            current = undefined;
            confirm = undefined;
          }
        };
        model.on('error', (error: Error) => {
          forget();
          remember(model, error);
          problem(error);
        });
        model.on('close', (error?: Error) => {
          forget();
          remember(model, error);
          if (error) problem(error);
        });
        if (closed) void model.close().catch(() => undefined);
      },
      () => {
        if (current === opening) current = undefined;
      },
    );
    return opening;
  }

  function confirmChannel(setup?: (channel: ConfirmChannel) => void): Promise<ConfirmChannel> {
    if (confirm) return confirm;
    const opening = connection().then(async (model) => track(model, await model.createConfirmChannel()));
    confirm = opening;
    opening.then(
      (channel) => {
        const forget = () => {
          if (confirm === opening) confirm = undefined;
        };
        channel.on('error', (error: Error) => {
          forget();
          problem(error);
        });
        channel.on('close', forget);
        setup?.(channel);
      },
      () => {
        if (confirm === opening) confirm = undefined;
      },
    );
    return opening;
  }

  return self;
}
