import { connect, type NatsConnection } from '@nats-io/transport-node';
import { QueueBoxError } from '@queuebox/core';

/** The NATS servers cannot be reached. */
export class NatsUnavailableError extends QueueBoxError {}

/** Options of a connection. */
export interface NatsConnectionOptions {
  /** Server URLs, e.g. `nats://127.0.0.1:4222`. */
  readonly servers: readonly string[];
  /** Client name shown by the server (`/connz`). Default `queuebox`. */
  readonly name?: string;
  /** Time to establish the first connection. Default 5000 ms. */
  readonly connectTimeoutMs?: number;
  /** Wait between reconnect attempts of an established connection (it retries forever). Default 1000 ms. */
  readonly reconnectTimeWaitMs?: number;
}

/** An error as text. */
export function describeNatsError(error: unknown): string {
  if (error instanceof Error) {
    const cause = (error as { cause?: unknown }).cause;
    const text = error.message || error.name;
    return cause instanceof Error && !text.includes(cause.message) ? `${text}: ${cause.message}` : text;
  }
  return String(error);
}

/** One NATS connection, opened on first use and reused; replaced when it closed for good. */
export interface NatsConnectionHandle {
  /** The open connection, connecting first when there is none (concurrent callers share one attempt). */
  get(): Promise<NatsConnection>;
  /**
   * False while an established connection is between a disconnect and its reconnect. Work sent meanwhile would
   * sit in nats.js's reconnect buffer until a timeout, so callers fail fast instead.
   */
  isUp(nc: NatsConnection): boolean;
  /** Closes the connection for good. */
  close(): Promise<void>;
}

/**
 * A lazily opened NATS connection. An established connection reconnects by itself without limit (nats.js keeps
 * trying every `reconnectTimeWaitMs` and resubscribes); only when it closes for good (`closed()` resolves: an
 * authorization error, or our own `close`) is it forgotten, so the next `get` opens a new one. A failed first
 * attempt is not cached either.
 */
export function createNatsConnection(options: NatsConnectionOptions): NatsConnectionHandle {
  let current: Promise<NatsConnection> | undefined;
  let closed = false;
  const down = new WeakSet<NatsConnection>();
  const watch = async (nc: NatsConnection) => {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect') down.add(nc);
      else if (status.type === 'reconnect') down.delete(nc);
    }
  };
  return {
    isUp: (nc) => !down.has(nc) && !nc.isClosed(),
    get() {
      if (closed) return Promise.reject(new NatsUnavailableError('The connection was closed by its owner'));
      if (current) return current;
      const opening = connect({
        servers: [...options.servers],
        name: options.name ?? 'queuebox',
        timeout: options.connectTimeoutMs ?? 5000,
        reconnect: true,
        maxReconnectAttempts: -1,
        reconnectTimeWait: options.reconnectTimeWaitMs ?? 1000,
        // Otherwise every request and flush builds two Error objects up front for their stack traces (17% of the
        // publisher's CPU in bench/brokers); QueueBox never logs stacks, and the messages stay as they are.
        noAsyncTraces: true,
      }).catch((error: unknown) => {
        throw new NatsUnavailableError(`Cannot connect to NATS: ${describeNatsError(error)}`, {
          cause: error,
        });
      });
      current = opening;
      opening.then(
        (nc) => {
          void watch(nc).catch(() => undefined);
          void nc.closed().then(() => {
            if (current === opening) current = undefined;
          });
          if (closed) void nc.close();
        },
        () => {
          if (current === opening) current = undefined;
        },
      );
      return opening;
    },
    async close() {
      closed = true;
      const open = current;
      current = undefined;
      if (open) await open.then((nc) => nc.close()).catch(() => undefined);
    },
  };
}
