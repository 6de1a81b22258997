/**
 * A private PostgreSQL cluster that can really be stopped and started, and a database that goes away and comes
 * back.
 * Nothing here imports vitest, so bench/soak.ts can use it too.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './processes.ts';

// ------------------------------------------------------------------------------------------------------------
// A private PostgreSQL cluster, stopped and started for real

/** A PostgreSQL server of our own (initdb in a temporary directory) on a free port of 127.0.0.1. */
export interface PrivatePostgres {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication). */
  readonly url: string;
  readonly port: number;
  /** The PostgreSQL version of the binaries, e.g. `15`. */
  readonly version: string;
  /**
   * Fast shutdown (`pg_ctl stop -m fast`): clients are disconnected, the port closes. `immediate`: a crash
   * (`-m immediate`: the server quits without a checkpoint or a flush of its WAL buffers; the next start recovers).
   */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  /** Starts the server again on the same port and data directory; resolves once it accepts connections. */
  start(): Promise<void>;
  /** Stops the server and removes its directory. */
  dispose(): Promise<void>;
}

/**
 * The directory of `initdb`/`pg_ctl`: `QUEUEBOX_TEST_PG_BINDIR`, else the highest `/usr/lib/postgresql/<v>/bin`,
 * else the reason there is none.
 */
export function postgresBinaries():
  | { readonly bindir: string; readonly version: string }
  | { reason: string } {
  const fromEnv = process.env.QUEUEBOX_TEST_PG_BINDIR;
  if (fromEnv) {
    return existsSync(join(fromEnv, 'initdb'))
      ? { bindir: fromEnv, version: 'QUEUEBOX_TEST_PG_BINDIR' }
      : { reason: `QUEUEBOX_TEST_PG_BINDIR=${fromEnv} has no initdb` };
  }
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter(
          (v) => existsSync(join(root, v, 'bin', 'initdb')) && existsSync(join(root, v, 'bin', 'pg_ctl')),
        )
        .sort((a, b) => Number(b) - Number(a))
    : [];
  const version = versions[0];
  if (version === undefined) return { reason: `no initdb/pg_ctl under ${root}/<version>/bin` };
  return { bindir: join(root, version, 'bin'), version };
}

/**
 * initdb and the server refuse to run as root (PgBouncer too): under root they run as the `postgres` user. Its uid
 * and gid, or undefined when not root.
 */
export function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  if (id.status !== 0 || gid.status !== 0) throw new Error('running as root and there is no postgres user');
  return { uid: Number(id.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

function run(command: string, args: readonly string[], as: { uid: number; gid: number } | undefined) {
  return new Promise<void>((resolve, reject) => {
    let output = '';
    const child: ChildProcess = spawn(command, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(as ? { uid: as.uid, gid: as.gid } : {}),
      env: { ...process.env, LC_ALL: 'C' },
    });
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0
        ? resolve()
        : reject(new Error(`${command} ${args.join(' ')} exited ${code}: ${output.slice(-2000)}`)),
    );
  });
}

/**
 * Creates and starts a private cluster: `initdb` (trust, UTF8, no fsync) in a new temporary directory and
 * `pg_ctl start` on a free port of 127.0.0.1 with its socket in that directory. About a second here.
 */
export async function startPrivatePostgres(
  binaries: {
    readonly bindir: string;
    readonly version: string;
  },
  /** More server settings (`-c name=value`), e.g. `{ wal_writer_delay: '10s' }`. */
  settings: Readonly<Record<string, string>> = {},
): Promise<PrivatePostgres> {
  const as = runAs();
  const dir = mkdtempSync(join(tmpdir(), 'qb-faults-pg-'));
  if (as) chownSync(dir, as.uid, as.gid);
  const data = join(dir, 'data');
  const port = await freePort();
  await run(
    join(binaries.bindir, 'initdb'),
    ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-sync', '--locale=C'],
    as,
  );
  const more = Object.entries(settings)
    .map(([name, value]) => ` -c ${name}=${value}`)
    .join('');
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=200${more}`;
  const start = () =>
    run(
      join(binaries.bindir, 'pg_ctl'),
      ['-D', data, '-o', options, '-l', join(dir, 'server.log'), '-w', '-t', '30', 'start'],
      as,
    );
  const stop = (mode: 'fast' | 'immediate' = 'fast') =>
    run(join(binaries.bindir, 'pg_ctl'), ['-D', data, '-m', mode, '-w', 'stop'], as);
  let running = false;
  await start();
  running = true;
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    version: binaries.version,
    async stop(mode) {
      if (!running) return;
      await stop(mode);
      running = false;
    },
    async start() {
      if (running) return;
      await start();
      running = true;
    },
    async dispose() {
      if (running) await stop().catch(() => undefined);
      running = false;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ------------------------------------------------------------------------------------------------------------
// A database that goes away and comes back

/** A PostgreSQL the test can take down and bring back. */
export interface DatabaseOutage {
  /** What the runtime connects to. */
  readonly url: string;
  /** `private cluster (PostgreSQL 15), stopped and started` or `TCP proxy …, cut and restored` */
  readonly how: string;
  /** Whether `down` crashes a server of our own (asked for, and a private cluster was there to crash). */
  readonly crashes: boolean;
  down(): Promise<void>;
  up(): Promise<void>;
  dispose(): Promise<void>;
}

/**
 * A private PostgreSQL cluster that is really stopped and started, when `initdb`/`pg_ctl` are installed; otherwise
 * a TCP proxy in front of `fallbackUrl` whose connections are cut (the reason is printed with `label`).
 */
export async function databaseOutage(
  fallbackUrl: string,
  label: string,
  how: 'stop' | 'crash' = 'stop',
): Promise<DatabaseOutage> {
  const binaries = postgresBinaries();
  if ('bindir' in binaries) {
    try {
      const server = await startPrivatePostgres(binaries);
      const mode = how === 'crash' ? 'immediate' : 'fast';
      return {
        url: server.url,
        how: `private cluster (PostgreSQL ${server.version}, port ${server.port}), ${how === 'crash' ? 'crashed' : 'stopped'} (pg_ctl -m ${mode}) and started`,
        crashes: how === 'crash',
        down: () => server.stop(mode),
        up: () => server.start(),
        dispose: () => server.dispose(),
      };
    } catch (error) {
      console.info(`[${label}] no private cluster (${String(error)}); using a TCP proxy instead`);
    }
  } else {
    console.info(`[${label}] no private cluster (${binaries.reason}); using a TCP proxy instead`);
  }
  const { startTcpProxy } = await import('../../local/support.ts');
  const target = new URL(fallbackUrl);
  const proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
  target.host = `127.0.0.1:${proxy.port}`;
  return {
    url: target.href,
    how: `TCP proxy on port ${proxy.port} in front of ${fallbackUrl}, cut and restored`,
    crashes: false,
    down: async () => proxy.cut(),
    up: async () => proxy.restore(),
    dispose: () => proxy.close(),
  };
}
