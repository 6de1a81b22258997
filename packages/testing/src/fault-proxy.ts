/**
 * A TCP proxy in front of a real broker that can black-hole its connections (after the audit's
 * bench/_netfault/faultproxy.ts): `blackhole()` drops every byte both ways on the connections open now, without a
 * FIN or RST (a half-open connection, as after a NAT or security-group timeout), and those stay dead for good; new
 * connections are accepted but get no answer while black-holed. `pass()` forwards again for new connections only.
 */
import { connect, createServer, type Socket } from 'node:net';

export interface FaultProxy {
  /** The port clients connect to. */
  readonly port: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Drops everything on the open connections for good; new connections are accepted and never answered. */
  blackhole(): void;
  /** Forwards again (for connections opened from now on). */
  pass(): void;
  close(): Promise<void>;
}

interface Pair {
  readonly client: Socket;
  upstream?: Socket;
  dead: boolean;
}

export async function startFaultProxy(target: { host: string; port: number }): Promise<FaultProxy> {
  const pairs = new Set<Pair>();
  let accepted = 0;
  let holed = false;
  const server = createServer((client) => {
    accepted += 1;
    const pair: Pair = { client, dead: holed };
    pairs.add(pair);
    const cut = () => {
      client.destroy();
      pair.upstream?.destroy();
      pairs.delete(pair);
    };
    client.on('error', cut).on('close', () => {
      if (!pair.dead) cut();
    });
    client.on('data', (chunk: Buffer) => {
      if (!pair.dead) pair.upstream?.write(chunk);
    });
    if (pair.dead) return;
    const upstream = connect(target);
    pair.upstream = upstream;
    upstream.on('error', cut).on('close', () => {
      if (!pair.dead) cut();
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!pair.dead) client.write(chunk);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const port = address !== null && typeof address === 'object' ? address.port : 0;
  return {
    port,
    get accepted() {
      return accepted;
    },
    blackhole() {
      holed = true;
      for (const pair of pairs) pair.dead = true;
    },
    pass() {
      holed = false;
    },
    async close() {
      for (const pair of pairs) {
        pair.client.destroy();
        pair.upstream?.destroy();
      }
      pairs.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
