import { QueueBoxError } from '@queuebox/core';
import type { Channel, ChannelModel, ConfirmChannel } from 'amqplib';
import amqp from 'amqplib';
import { installLosslessDecoding } from './amqp-lossless.ts';

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
  /**
   * Heartbeat interval the client asks for, in seconds. Default {@link DEFAULT_HEARTBEAT_SEC} (10: a dead peer is
   * noticed within about 20 s; the broker sends a heartbeat every 5 s of silence, so a live connection is never
   * quiet for a whole confirm timeout).
   */
  readonly heartbeatSec?: number;
  /**
   * How long closing waits for the broker's answer to `connection.close` before the socket is destroyed (a
   * half-open connection never answers). Default {@link CLOSE_HANDSHAKE_MS}.
   */
  readonly closeTimeoutMs?: number;
  /**
   * Decode content headers (message properties) losslessly on this connection (`amqp-lossless.ts`): a string whose
   * bytes are not UTF-8 becomes `base64:` + their base64 instead of U+FFFD text, an int64 header value past 2^53 a
   * BigInt. When amqplib's internals are not the shape that relies on, amqplib's own decoding stays and
   * `onProblem` is told (a `LosslessDecodingUnavailableError`) on every new connection. Default false.
   */
  readonly losslessDecoding?: boolean;
}

/** Default {@link AmqpConnectionOptions.heartbeatSec}. */
export const DEFAULT_HEARTBEAT_SEC = 10;
/** Default {@link AmqpConnectionOptions.closeTimeoutMs}. */
export const CLOSE_HANDSHAKE_MS = 2000;

/**
 * `work`, but waiting at most `ms`: then `onLate` runs and the wait ends (the work goes on, its answer ignored).
 * True when `work` settled in time.
 */
export async function boundedClose(work: Promise<unknown>, ms: number, onLate: () => void): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), ms);
  });
  const settled = work.then(
    () => 'done' as const,
    () => 'done' as const,
  );
  const first = await Promise.race([settled, late]);
  clearTimeout(timer);
  if (first === 'late') onLate();
  return first === 'done';
}

/** What the connection needs of amqplib's socket (a `net.Socket` or a `tls.TLSSocket`). */
interface AmqpSocket {
  readonly writableLength: number;
  readonly bytesRead: number;
  readonly destroyed: boolean;
  resetAndDestroy?: () => unknown;
  destroy(error?: Error): unknown;
  emit(event: 'error', error: Error): boolean;
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
  confirmChannel(
    setup?: (channel: ConfirmChannel) => void,
    bound?: ChannelOpenBound,
  ): Promise<ConfirmChannel>;
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
  /**
   * The reason the broker gave in `connection.blocked` (a memory or disk alarm: it reads nothing more that the
   * connection publishes) while the connection of `channel` is blocked; undefined when it is not (after
   * `connection.unblocked`, or on a new connection).
   */
  blockedReason(channel: Channel): string | undefined;
  /** Bytes written on the connection of `channel` that its socket has not handed to the network yet. */
  unsentBytes(channel: Channel): number;
  /**
   * Bytes received so far on the connection of `channel` (its socket's `bytesRead`): unchanged between two reads,
   * nothing at all came from the broker in between, not even a heartbeat.
   */
  receivedBytes(channel: Channel): number;
  /**
   * Cuts the connection of `channel` at once (a TCP reset where the platform has one), so what was written on it and
   * not sent yet is dropped rather than sent when the broker reads again: every channel of it closes, and every
   * publish in flight on it fails. The next caller opens a new connection.
   */
  abort(channel: Channel, reason: string): void;
  /** Called with every connection-level error or unexpected close (for logs). */
  onProblem?: (error: unknown) => void;
}

/** How long a caller waits for the confirm channel (connecting first when needed). */
export interface ChannelOpenBound {
  /**
   * At most this long; then the wait fails with `RabbitMqUnavailableError`, and when the connection was open and
   * nothing came from the broker meanwhile (a half-open connection), it is cut so the next caller opens a new one.
   */
  readonly timeoutMs: number;
  /** Aborted: the wait fails at once (the channel still opens for later callers). */
  readonly signal?: AbortSignal;
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
  /** The `connection.blocked` reason of each connection blocked right now. */
  const blocked = new WeakMap<ChannelModel, string>();
  /** The connection open now (not one still connecting), for a bound on opening a channel. */
  let openModel: ChannelModel | undefined;
  const closeTimeoutMs = options.closeTimeoutMs ?? CLOSE_HANDSHAKE_MS;
  /** The socket under a connection (amqplib's `connection.stream`, not in its types). */
  const streamOf = (model: ChannelModel | undefined): AmqpSocket | undefined =>
    (model as { connection?: { stream?: AmqpSocket } } | undefined)?.connection?.stream;
  const socketOf = (channel: Channel): AmqpSocket | undefined => streamOf(modelOf.get(channel));
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
    blockedReason(channel) {
      const model = modelOf.get(channel);
      return model === undefined ? undefined : blocked.get(model);
    },
    unsentBytes(channel) {
      return socketOf(channel)?.writableLength ?? 0;
    },
    receivedBytes(channel) {
      return socketOf(channel)?.bytesRead ?? 0;
    },
    abort(channel, reason) {
      const model = modelOf.get(channel);
      if (model !== undefined) cut(model, reason);
    },
    async reset() {
      const open = current;
      current = undefined;
      confirm = undefined;
      openModel = undefined;
      if (!open) return;
      // amqplib waits for the broker's close-ok, which a half-open connection never sends (before, closing waited
      // for two missed heartbeats): after `closeTimeoutMs` the socket is destroyed instead.
      const shut = open.then(
        (model) =>
          boundedClose(model.close(), closeTimeoutMs, () =>
            cut(model, `no answer to closing the connection within ${closeTimeoutMs} ms`),
          ),
        () => undefined,
      );
      // A connection still opening (a connect nobody answers waits for `connectTimeoutMs`) is not waited for past
      // the bound either: it is closed, as above, once it opens.
      await boundedClose(shut, closeTimeoutMs * 2, () => undefined);
    },
    async close() {
      closed = true;
      await self.reset();
    },
  };

  /**
   * Cuts `model`'s connection at once (a TCP reset where the platform has one), so what was written on it and not
   * sent yet is dropped: every channel of it closes, and every publish in flight on it fails.
   */
  function cut(model: ChannelModel, reason: string) {
    const socket = streamOf(model);
    if (socket === undefined || socket.destroyed) return;
    if (openModel === model) openModel = undefined;
    void current?.then((open) => {
      if (open === model) {
        current = undefined;
        confirm = undefined;
      }
    });
    const error = new RabbitMqUnavailableError(`The connection was cut: ${reason}`);
    remember(model, error);
    // A reset drops what the kernel still holds to send, too; amqplib hears of neither, so it is told with the
    // socket's 'error', which closes its channels and fails the publishes in flight.
    // (A TLS socket has no reset: Node throws; it is destroyed, which drops what Node itself still holds.)
    try {
      if (typeof socket.resetAndDestroy !== 'function') throw new TypeError('no reset');
      socket.resetAndDestroy();
    } catch {
      socket.destroy(error);
      return;
    }
    socket.emit('error', error);
  }

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
      .connect(withHeartbeat(options.url, options.heartbeatSec ?? DEFAULT_HEARTBEAT_SEC), {
        timeout: options.connectTimeoutMs ?? 10_000,
        clientProperties: { connection_name: options.connectionName ?? 'queuebox' },
      })
      .then(
        (model) => {
          // Before any channel is opened on it, so every delivery's properties are decoded losslessly.
          if (options.losslessDecoding === true) {
            try {
              installLosslessDecoding(model.connection);
            } catch (error) {
              problem(error);
            }
          }
          return model;
        },
        (error: unknown) => {
          throw new RabbitMqUnavailableError(`Cannot connect to RabbitMQ: ${describeAmqpError(error)}`, {
            cause: error,
          });
        },
      );
    current = opening;
    opening.then(
      (model) => {
        if (current === opening) openModel = model;
        const forget = () => {
          if (openModel === model) openModel = undefined;
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
        model.on('blocked', (reason?: unknown) => {
          const text = typeof reason === 'string' && reason !== '' ? reason : 'no reason given';
          blocked.set(model, text);
          problem(new RabbitMqUnavailableError(`RabbitMQ blocked publishing on the connection: ${text}`));
        });
        model.on('unblocked', () => blocked.delete(model));
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

  function confirmChannel(
    setup?: (channel: ConfirmChannel) => void,
    bound?: ChannelOpenBound,
  ): Promise<ConfirmChannel> {
    const opening = sharedConfirmChannel(setup);
    return bound === undefined ? opening : boundedOpen(opening, bound);
  }

  /**
   * `opening`, or a rejection once `bound.timeoutMs` passed or `bound.signal` aborted. A connection that was open
   * when the wait began and from which nothing came until the timeout is half-open (amqplib would wait for two
   * missed heartbeats): it is cut, so the next caller opens a new connection instead of waiting on it too.
   */
  function boundedOpen(opening: Promise<ConfirmChannel>, bound: ChannelOpenBound): Promise<ConfirmChannel> {
    const { timeoutMs, signal } = bound;
    if (signal?.aborted)
      return Promise.reject(new RabbitMqUnavailableError('aborted before opening a channel'));
    const model = openModel;
    const readBefore = streamOf(model)?.bytesRead;
    return new Promise<ConfirmChannel>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const end = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      const onAbort = () => {
        end();
        reject(new RabbitMqUnavailableError('aborted while opening a channel'));
      };
      timer = setTimeout(() => {
        end();
        let error = `no channel from RabbitMQ within ${timeoutMs} ms`;
        const socket = streamOf(model);
        if (
          model !== undefined &&
          socket !== undefined &&
          !socket.destroyed &&
          socket.bytesRead === readBefore
        ) {
          error +=
            ' (nothing came from the broker meanwhile; the connection was cut so the next publish opens a new one)';
          cut(model, error);
        }
        reject(new RabbitMqUnavailableError(error));
      }, timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      opening.then(
        (channel) => {
          end();
          resolve(channel);
        },
        (error: unknown) => {
          end();
          reject(error);
        },
      );
    });
  }

  function sharedConfirmChannel(setup?: (channel: ConfirmChannel) => void): Promise<ConfirmChannel> {
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
