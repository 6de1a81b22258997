import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of the test PostgreSQL, to take the database away from a store and give it back as an
 * outage or a failover does: `down()` closes the listener and drops every open connection (new ones are refused),
 * `up()` listens again on the same port.
 */
export interface PgProxy {
  /** The proxied URL: `target` with the proxy's host and port. */
  readonly url: string;
  down(): void;
  up(): Promise<void>;
  close(): void;
}

export async function startPgProxy(target: string): Promise<PgProxy> {
  const to = new URL(target);
  const targetPort = Number(to.port || 5432);
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
  };
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const listener = createServer((client) => {
        track(client);
        const upstream = connect(targetPort, to.hostname);
        track(upstream);
        client.pipe(upstream);
        upstream.pipe(client);
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
      });
      listener.once('error', reject);
      listener.listen(port, '127.0.0.1', () => {
        const address = listener.address();
        if (address !== null && typeof address === 'object') port = address.port;
        server = listener;
        resolve();
      });
    });
  await listen();
  const url = new URL(target);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  const drop = () => {
    server?.close();
    server = undefined;
    for (const socket of sockets) socket.destroy();
  };
  return {
    url: url.toString(),
    down: drop,
    up: () => (server ? Promise.resolve() : listen()),
    close: drop,
  };
}
