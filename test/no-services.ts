/**
 * Setup file of the `unit` test lane (vitest.config.ts): a unit test talks to no service. Every TCP connection of
 * the test process is checked; only connections to a loopback port that a server of this same process listens on
 * (or listened on, so a test can reach a port it closed on purpose), or to port 1 where nothing listens, go
 * through. Anything else — the local PostgreSQL, a broker, SQL Server, a host on the network, a Unix socket —
 * fails the connection at once and fails the file, naming the target, so a test that needs a service cannot sit
 * in the fast lane unnoticed: it belongs in a `*.integration.test.ts` file.
 */
import net from 'node:net';
import { afterAll, afterEach } from 'vitest';

interface Guard {
  /** Ports servers of this process were bound to. */
  readonly ownPorts: Set<number>;
  /** Connections refused since the last check. */
  readonly refused: string[];
}

const GUARD = Symbol.for('queuebox.test.no-services');
const registry = globalThis as typeof globalThis & { [GUARD]?: Guard };

/** Where a `socket.connect(...)` call goes, from any of its argument forms. */
function targetOf(args: unknown[]): { host: string; port: number } | { path: string } {
  // net.connect() hands the socket its already normalized arguments: [options, callback].
  const first = Array.isArray(args[0]) ? args[0][0] : args[0];
  if (typeof first === 'object' && first !== null) {
    const options = first as { host?: unknown; port?: unknown; path?: unknown };
    if (typeof options.path === 'string') return { path: options.path };
    return {
      host: typeof options.host === 'string' ? options.host : 'localhost',
      port: Number(options.port),
    };
  }
  if (typeof first === 'string' && !/^\d+$/.test(first)) return { path: first };
  return { host: typeof args[1] === 'string' ? args[1] : 'localhost', port: Number(first) };
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^(::ffff:)?127\./.test(host);
}

/**
 * Port 1 of the loopback interface is where the unit tests of refused connections point ("nothing listens on
 * port 1"): no service runs there, and the driver's own refusal is what those tests check.
 */
const NOTHING_LISTENS = 1;

function install(): Guard {
  const guard: Guard = { ownPorts: new Set(), refused: [] };

  const listen = net.Server.prototype.listen;
  net.Server.prototype.listen = function (this: net.Server, ...args: unknown[]) {
    this.once('listening', () => {
      const address = this.address();
      if (typeof address === 'object' && address !== null) guard.ownPorts.add(address.port);
    });
    return Reflect.apply(listen, this, args) as net.Server;
  } as typeof listen;

  const connect = net.Socket.prototype.connect;
  net.Socket.prototype.connect = function (this: net.Socket, ...args: unknown[]) {
    const target = targetOf(args);
    if (
      'port' in target &&
      isLoopback(target.host) &&
      (guard.ownPorts.has(target.port) || target.port === NOTHING_LISTENS)
    ) {
      return Reflect.apply(connect, this, args) as net.Socket;
    }
    const where = 'path' in target ? target.path : `${target.host}:${target.port}`;
    const error = new Error(
      `unit lane: a connection to ${where} was refused — unit tests talk to no service (PostgreSQL, SQL Server, ` +
        'brokers, the network) and reach only servers they start themselves; a test that needs one belongs in a ' +
        '*.integration.test.ts file',
    );
    guard.refused.push(error.message);
    process.nextTick(() => this.destroy(error));
    return this;
  } as typeof connect;

  return guard;
}

// With `isolate: false` this file runs again before every test file in the same worker: patch once, but start
// each file with a clean record.
registry[GUARD] ??= install();
const guard = registry[GUARD];
guard.refused.length = 0;

function failOnRefused(): void {
  if (guard.refused.length === 0) return;
  const messages = guard.refused.splice(0);
  throw new Error(messages.join('\n'));
}

afterEach(failOnRefused);
afterAll(failOnRefused);
