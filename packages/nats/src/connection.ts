import { connect, type NatsConnection } from '@nats-io/transport-node';
import { ConfigError, QueueBoxError } from '@queuebox/core';

/** The NATS servers cannot be reached. */
export class NatsUnavailableError extends QueueBoxError {}

/** Options of a connection. */
export interface NatsConnectionOptions {
  /**
   * Server URLs, e.g. `nats://127.0.0.1:4222`; credentials may be given in them: `nats://user:password@host:4222`
   * or `nats://token@host:4222` (percent-encoded where needed, see {@link natsServerCredentials}).
   */
  readonly servers: readonly string[];
  /** Client name shown by the server (`/connz`). Default `queuebox`. */
  readonly name?: string;
  /** Time to establish the first connection. Default 5000 ms. */
  readonly connectTimeoutMs?: number;
  /** Wait between reconnect attempts of an established connection (it retries forever). Default 1000 ms. */
  readonly reconnectTimeWaitMs?: number;
  /** Where `servers` is configured, for a `ConfigError` about them (e.g. `destinations.orders.servers`). */
  readonly serversPath?: string;
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

/** The servers without their credentials, and the credentials they carried, as nats.js options. */
export interface NatsServerCredentials {
  readonly servers: string[];
  readonly user?: string;
  readonly pass?: string;
  readonly token?: string;
}

/** A URL's scheme with its `//`, as in `nats://` (none for a bare `host:port`). */
const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//;

function decoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * Takes the credentials out of server URLs, as the Go client and the `nats` CLI read them: `user:password@` is a
 * user and password, `token@` (no colon) a token, each percent-decoded (`%40` for an `@`, `%3A` for a `:`). nats.js
 * reads no credentials from a URL (it connected without them, and a server requiring them refused it), so they
 * are passed as its `user`/`pass`/`token` options and the URLs go without them; the credentials are therefore
 * never part of a server address nats.js reports. One connection has one set of credentials: URLs that carry
 * different ones are a `ConfigError` (naming the URLs by position, never their credentials); URLs without any use
 * those of the others.
 */
export function natsServerCredentials(servers: readonly string[], path = 'servers'): NatsServerCredentials {
  const plain: string[] = [];
  let found:
    | { readonly credentials: Omit<NatsServerCredentials, 'servers'>; readonly at: number }
    | undefined;
  const issues: { path: string; message: string }[] = [];
  servers.forEach((server, i) => {
    const scheme = SCHEME.exec(server)?.[0] ?? '';
    const rest = server.slice(scheme.length);
    // A host never holds an `@`: the last one ends the userinfo, whatever its (unencoded) password holds.
    const at = rest.lastIndexOf('@');
    if (at < 0) {
      plain.push(server);
      return;
    }
    plain.push(`${scheme}${rest.slice(at + 1)}`);
    const userinfo = rest.slice(0, at);
    const colon = userinfo.indexOf(':');
    const credentials =
      colon < 0
        ? { token: decoded(userinfo) }
        : { user: decoded(userinfo.slice(0, colon)), pass: decoded(userinfo.slice(colon + 1)) };
    if (found === undefined) found = { credentials, at: i };
    else if (!sameCredentials(found.credentials, credentials)) {
      issues.push({
        path: `${path}[${i}]`,
        message: `carries other credentials than ${path}[${found.at}]; one NATS connection has one set of credentials`,
      });
    }
  });
  if (issues.length > 0) throw new ConfigError(issues);
  return { servers: plain, ...found?.credentials };
}

function sameCredentials(
  a: Omit<NatsServerCredentials, 'servers'>,
  b: Omit<NatsServerCredentials, 'servers'>,
) {
  return a.user === b.user && a.pass === b.pass && a.token === b.token;
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
  /**
   * How many times `nc` lost its server so far (0 for one that never did): a caller compares the counts before and
   * after a piece of work to learn that the connection dropped in between, even when nats.js reconnected meanwhile
   * (a server closes a slow consumer's connection, and the client is back before the work ends).
   */
  disconnects(nc: NatsConnection): number;
  /** Closes the connection for good. */
  close(): Promise<void>;
}

/**
 * A lazily opened NATS connection. An established connection reconnects by itself without limit (nats.js keeps
 * trying every `reconnectTimeWaitMs` and resubscribes); only when it closes for good (`closed()` resolves: an
 * authorization error, or our own `close`) is it forgotten, so the next `get` opens a new one. A failed first
 * attempt is not cached either. Credentials in the server URLs are passed to nats.js as options (see
 * {@link natsServerCredentials}); URLs carrying different ones throw `ConfigError` here.
 */
export function createNatsConnection(options: NatsConnectionOptions): NatsConnectionHandle {
  const { servers, user, pass, token } = natsServerCredentials(options.servers, options.serversPath);
  let current: Promise<NatsConnection> | undefined;
  let closed = false;
  const down = new WeakSet<NatsConnection>();
  const drops = new WeakMap<NatsConnection, number>();
  const watch = async (nc: NatsConnection) => {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect') {
        down.add(nc);
        drops.set(nc, (drops.get(nc) ?? 0) + 1);
      } else if (status.type === 'reconnect') down.delete(nc);
    }
  };
  return {
    isUp: (nc) => !down.has(nc) && !nc.isClosed(),
    disconnects: (nc) => drops.get(nc) ?? 0,
    get() {
      if (closed) return Promise.reject(new NatsUnavailableError('The connection was closed by its owner'));
      if (current) return current;
      const opening = connect({
        servers,
        ...(user !== undefined ? { user, pass } : {}),
        ...(token !== undefined ? { token } : {}),
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
