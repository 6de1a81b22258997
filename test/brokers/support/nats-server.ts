/**
 * A private nats-server (JetStream on, its own store directory) that a test can stop and start again on the same
 * port, so outages are real without touching the machine's shared server. Needs the `nats-server` binary
 * (`QUEUEBOX_TEST_NATS_SERVER`, else `nats-server` on the PATH, else /usr/sbin/nats-server).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';

export interface PrivateNatsServer {
  readonly url: string;
  readonly port: number;
  start(): Promise<void>;
  stop(): Promise<void>;
  /**
   * Replaces the server's configuration file (`config` as given to `startPrivateNatsServer`) and has the running
   * server reload it (SIGHUP), e.g. to change a user's permissions; resolves once the server has had time to apply it.
   */
  reload(config: string): Promise<void>;
  /** Stops the server and removes its store directory. */
  dispose(): Promise<void>;
}

/** The nats-server binary, or the reason there is none. */
export function natsServerBinary(): { path: string } | { reason: string } {
  const candidates = [process.env.QUEUEBOX_TEST_NATS_SERVER, 'nats-server', '/usr/sbin/nats-server'].filter(
    (c): c is string => c !== undefined && c !== '',
  );
  for (const candidate of candidates) {
    if (candidate.includes('/') ? existsSync(candidate) : spawnSync('which', [candidate]).status === 0) {
      return { path: candidate };
    }
  }
  return { reason: `no nats-server binary (tried ${candidates.join(', ')})` };
}

/**
 * A nats-server binary that keeps consumer metadata (2.10+), for the tests that need one: `QUEUEBOX_TEST_NATS_SERVER`,
 * else the one `scripts/nats-server-2.10.sh` fetched (Debian trixie's package, which `scripts/services.sh` fetches),
 * else {@link natsServerBinary}. The caller checks its version.
 */
export function newerNatsServerBinary(): { path: string } | { reason: string } {
  const fetched = join(
    process.env.QUEUEBOX_TEST_NATS_SERVER_DIR ?? join(homedir(), '.cache', 'queuebox', 'nats-server-2.10'),
    'x',
    'usr',
    'sbin',
    'nats-server',
  );
  if (!process.env.QUEUEBOX_TEST_NATS_SERVER && existsSync(fetched)) return { path: fetched };
  return natsServerBinary();
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = address && typeof address === 'object' ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const finish = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => finish(false));
    socket.once('error', () => finish(false));
    socket.once('data', (data: Buffer) => finish(data.toString('latin1').startsWith('INFO ')));
  });
}

/** Options of a private server. */
export interface PrivateNatsServerOptions {
  /**
   * Configuration file text (nats-server's format), e.g. `authorization { … }`; the address and port are set on
   * the command line, and JetStream with its store directory is added to it. Default none.
   */
  readonly config?: string;
}

export async function startPrivateNatsServer(
  binary: string,
  options: PrivateNatsServerOptions = {},
): Promise<PrivateNatsServer> {
  const port = await freePort();
  const storeDir = mkdtempSync(join(tmpdir(), 'qb-nats-'));
  const configFile = join(storeDir, 'server.conf');
  // JetStream in the file, not as -js/-sd flags: a reload turns off what the file does not name, flags or not.
  const configText = (config: string) => `jetstream { store_dir: "${join(storeDir, 'js')}" }\n${config}`;
  writeFileSync(configFile, configText(options.config ?? ''));
  let child: ChildProcess | undefined;

  const start = async () => {
    const args = ['-c', configFile, '-a', '127.0.0.1', '-p', String(port)];
    const started = spawn(binary, args, {
      stdio: 'ignore',
    });
    child = started;
    for (let i = 0; i < 200; i++) {
      if (started.exitCode !== null) throw new Error(`nats-server exited with ${started.exitCode}`);
      if (await answers(port)) return;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    throw new Error(`nats-server did not answer on ${port}`);
  };
  const stop = async () => {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null) return;
    const exited = new Promise((resolve) => running.once('exit', resolve));
    running.kill('SIGTERM');
    await exited;
  };
  await start();
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    start,
    stop,
    async reload(config) {
      writeFileSync(configFile, configText(config));
      child?.kill('SIGHUP');
      // nats-server applies a reload at once but says nothing to its clients; a short wait covers it.
      await new Promise((resolve) => setTimeout(resolve, 500));
    },
    async dispose() {
      await stop();
      rmSync(storeDir, { recursive: true, force: true });
    },
  };
}
