/**
 * A private PgBouncer in front of a PostgreSQL, for the tests of what a connection pooler changes (transaction
 * mode: one server connection serves many clients' transactions in turn). The binary is the machine's
 * (`/usr/sbin/pgbouncer`, Debian's package; `scripts/services.sh` installs it when it is missing and the package
 * manager can) or `QUEUEBOX_TEST_PGBOUNCER`. Nothing here imports vitest.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runAs } from './postgres-cluster.ts';
import { freePort } from './processes.ts';

/** The PgBouncer binary, or the reason there is none. */
export function pgBouncerBinary(): { readonly path: string; readonly version: string } | { reason: string } {
  const path = process.env.QUEUEBOX_TEST_PGBOUNCER || '/usr/sbin/pgbouncer';
  if (!existsSync(path)) {
    return {
      reason: `no PgBouncer at ${path} (Debian: apt-get install pgbouncer; or set QUEUEBOX_TEST_PGBOUNCER)`,
    };
  }
  const version = spawnSync(path, ['--version'], { encoding: 'utf8' });
  if (version.status !== 0) return { reason: `${path} --version failed: ${version.stderr}` };
  return { path, version: /PgBouncer (\S+)/.exec(version.stdout)?.[1] ?? version.stdout.trim() };
}

/** A running private PgBouncer. */
export interface PrivatePgBouncer {
  /** `postgres://postgres@127.0.0.1:<port>/<database>` through the pooler. */
  readonly url: string;
  readonly port: number;
  readonly version: string;
  /** Its log so far (connections, cancels, errors). */
  log(): string;
  /** Kills it (SIGKILL: no shutdown mode differs between versions): every client connection is closed. */
  stop(): Promise<void>;
  /** Stops it and removes its directory. */
  dispose(): Promise<void>;
}

/** Options of {@link startPgBouncer}. */
export interface PgBouncerOptions {
  /** The PostgreSQL behind it, `postgres://user@host:port/database` (trust authentication). */
  readonly target: string;
  /** Default `transaction`. */
  readonly mode?: 'transaction' | 'session';
  /** Server connections per database and user (`default_pool_size`). Default 3. */
  readonly poolSize?: number;
  /** More `[pgbouncer]` settings, e.g. `{ server_lifetime: '3' }`. */
  readonly settings?: Readonly<Record<string, string>>;
  /** More settings of the database's line, e.g. `{ connect_query: "'SET …'" }`. */
  readonly databaseSettings?: Readonly<Record<string, string>>;
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Starts a PgBouncer of its own on a free port of 127.0.0.1; resolves once it accepts connections. */
export async function startPgBouncer(
  binary: { readonly path: string; readonly version: string },
  options: PgBouncerOptions,
): Promise<PrivatePgBouncer> {
  const as = runAs();
  const dir = mkdtempSync(join(tmpdir(), 'qb-pgbouncer-'));
  if (as) chownSync(dir, as.uid, as.gid);
  const port = await freePort();
  const target = new URL(options.target);
  const database = decodeURIComponent(target.pathname.slice(1)) || 'postgres';
  const user = decodeURIComponent(target.username) || 'postgres';
  const line = {
    host: target.hostname,
    port: target.port || '5432',
    dbname: database,
    user,
    ...options.databaseSettings,
  };
  const settings = {
    listen_addr: '127.0.0.1',
    listen_port: String(port),
    unix_socket_dir: dir,
    auth_type: 'trust',
    auth_file: join(dir, 'users.txt'),
    pool_mode: options.mode ?? 'transaction',
    default_pool_size: String(options.poolSize ?? 3),
    max_client_conn: '500',
    logfile: join(dir, 'pgbouncer.log'),
    pidfile: join(dir, 'pgbouncer.pid'),
    // pg sends extra_float_digits; `options` carries the executor's startup settings.
    ignore_startup_parameters: 'extra_float_digits,options',
    ...options.settings,
  };
  const ini = [
    '[databases]',
    `${database} = ${Object.entries(line)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')}`,
    '[pgbouncer]',
    ...Object.entries(settings).map(([k, v]) => `${k} = ${v}`),
    '',
  ].join('\n');
  writeFileSync(join(dir, 'pgbouncer.ini'), ini);
  writeFileSync(join(dir, 'users.txt'), `"${user}" ""\n`);
  if (as) {
    chownSync(join(dir, 'pgbouncer.ini'), as.uid, as.gid);
    chownSync(join(dir, 'users.txt'), as.uid, as.gid);
  }
  let output = '';
  const child: ChildProcess = spawn(binary.path, [join(dir, 'pgbouncer.ini')], {
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(as ? { uid: as.uid, gid: as.gid } : {}),
  });
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true;
      resolve();
    }),
  );
  const log = () => {
    try {
      return readFileSync(join(dir, 'pgbouncer.log'), 'utf8');
    } catch {
      return output;
    }
  };
  const until = Date.now() + 10_000;
  while (!(await answers(port))) {
    if (exited || Date.now() > until) {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`PgBouncer did not start on port ${port}: ${output.slice(-2000)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const stop = async () => {
    if (exited) return;
    child.kill('SIGKILL');
    await exit;
  };
  return {
    url: `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/${encodeURIComponent(database)}`,
    port,
    version: binary.version,
    log,
    stop,
    async dispose() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
