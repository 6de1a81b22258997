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
  /**
   * How often the client PINGs the server to find a connection that went silent (a half-open one: the peer gone
   * without a FIN or RST, as after a NAT or security-group timeout or a failover). Default 10000 ms (nats.js's own
   * default is 2 minutes, which left such a connection in use for 6 to 8 minutes).
   */
  readonly pingIntervalMs?: number;
  /** PINGs left unanswered before the connection is taken for dead and replaced. Default 2. */
  readonly maxPingOut?: number;
}

/** Default {@link NatsConnectionOptions.pingIntervalMs}. */
export const DEFAULT_NATS_PING_INTERVAL_MS = 10_000;
/** Default {@link NatsConnectionOptions.maxPingOut}. */
export const DEFAULT_NATS_MAX_PING_OUT = 2;
/** How long {@link NatsConnectionHandle.check} waits for the server's PONG. */
export const NATS_CHECK_TIMEOUT_MS = 2000;

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
  /** How long `nc` has been down (between a disconnect and its reconnect), in ms; 0 while it is up. */
  downForMs(nc: NatsConnection): number;
  /**
   * Whether `nc` answers a PING within `timeoutMs` (default {@link NATS_CHECK_TIMEOUT_MS}). When it does not (a
   * half-open connection: a JetStream ack or a flush timed out on it), the connection is dropped at once and nats.js
   * opens a new one (its reconnect path: subscriptions are made again); `isUp` is false meanwhile. Concurrent checks
   * of one connection share one PING. Resolves false too for a connection already down or closed.
   */
  check(nc: NatsConnection, timeoutMs?: number): Promise<boolean>;
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
  const checks = new WeakMap<NatsConnection, Promise<boolean>>();
  /** When each connection that is down now went down. */
  const downAt = new WeakMap<NatsConnection, number>();
  const markDown = (nc: NatsConnection) => {
    down.add(nc);
    if (!downAt.has(nc)) downAt.set(nc, Date.now());
  };
  /**
   * Drops `nc`'s socket so nats.js reconnects. Its `reconnect()` first writes out what it still holds, and on a
   * dead link whose send buffer is full that write never ends: the socket is destroyed then, which ends it.
   */
  const forceReconnect = (nc: NatsConnection) => {
    markDown(nc);
    const before = drops.get(nc) ?? 0;
    void nc.reconnect().catch(() => undefined);
    setTimeout(() => {
      if (nc.isClosed() || (drops.get(nc) ?? 0) !== before) return;
      const transport = (nc as unknown as { protocol?: { transport?: { socket?: { destroy(): void } } } })
        .protocol?.transport;
      transport?.socket?.destroy();
    }, NATS_CHECK_TIMEOUT_MS).unref();
  };
  const watch = async (nc: NatsConnection) => {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect') {
        markDown(nc);
        drops.set(nc, (drops.get(nc) ?? 0) + 1);
      } else if (status.type === 'staleConnection' || status.type === 'forceReconnect') {
        // Unanswered pings (or our own check): the socket is being dropped, and what is written now is lost with it.
        markDown(nc);
      } else if (status.type === 'reconnect') {
        down.delete(nc);
        downAt.delete(nc);
      }
    }
  };
  return {
    isUp: (nc) => !down.has(nc) && !nc.isClosed(),
    disconnects: (nc) => drops.get(nc) ?? 0,
    downForMs: (nc) => {
      const since = downAt.get(nc);
      return since === undefined || !down.has(nc) ? 0 : Date.now() - since;
    },
    check(nc, timeoutMs = NATS_CHECK_TIMEOUT_MS) {
      if (nc.isClosed() || down.has(nc)) return Promise.resolve(false);
      const running = checks.get(nc);
      if (running) return running;
      let timer: NodeJS.Timeout | undefined;
      const silent = new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      });
      const answered = nc.flush().then(
        () => true,
        () => false,
      );
      const checking = Promise.race([answered, silent]).then((alive) => {
        clearTimeout(timer);
        checks.delete(nc);
        if (!alive && !nc.isClosed() && !closed) forceReconnect(nc);
        return alive;
      });
      checks.set(nc, checking);
      return checking;
    },
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
        // A connection that went silent is found within pingInterval × (maxPingOut + 1) and replaced.
        pingInterval: options.pingIntervalMs ?? DEFAULT_NATS_PING_INTERVAL_MS,
        maxPingOut: options.maxPingOut ?? DEFAULT_NATS_MAX_PING_OUT,
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
