/**
 * A TCP proxy in front of a real broker, so a test can take "the broker" away and bring it back without touching
 * the machine's shared broker: `stop()` closes the listening port and cuts every open connection; `start()` listens
 * on the same port again.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export interface TcpProxy {
  /** The port clients connect to (fixed for the proxy's life). */
  readonly port: number;
  /** Listens again on `port` (after `stop`). */
  start(): Promise<void>;
  /** Stops listening and destroys every proxied connection, as a broker crash would. */
  stop(): Promise<void>;
  /** Connections accepted so far. */
  readonly accepted: number;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  let server: Server | undefined;
  let port = 0;

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const s = createServer((client) => {
        accepted += 1;
        const upstream = connect(target);
        sockets.add(client);
        sockets.add(upstream);
        const cut = () => {
          client.destroy();
          upstream.destroy();
          sockets.delete(client);
          sockets.delete(upstream);
        };
        client.on('error', cut).on('close', cut);
        upstream.on('error', cut).on('close', cut);
        client.pipe(upstream);
        upstream.pipe(client);
      });
      s.once('error', reject);
      s.listen(port, '127.0.0.1', () => {
        const address = s.address();
        if (address && typeof address === 'object') port = address.port;
        server = s;
        resolve();
      });
    });

  await listen();
  return {
    get port() {
      return port;
    },
    get accepted() {
      return accepted;
    },
    start: listen,
    async stop() {
      const s = server;
      server = undefined;
      for (const socket of sockets) socket.destroy();
      sockets.clear();
      if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
    },
  };
}

/** host and port of a `scheme://user:pass@host:port/...` URL (default port when absent). */
export function hostPort(url: string, defaultPort: number): { host: string; port: number } {
  const parsed = new URL(url);
  return { host: parsed.hostname, port: parsed.port ? Number(parsed.port) : defaultPort };
}

/** The URL with its host and port replaced by 127.0.0.1:`port`. */
export function viaPort(url: string, port: number): string {
  const parsed = new URL(url);
  parsed.hostname = '127.0.0.1';
  parsed.port = String(port);
  return parsed.toString();
}
