/**
 * What the process-level tests of the local runtime share: the runtime started as a real child process, the way
 * `npm start` starts it (package.json's `start` script: `exec node packages/local/src/main.ts`, Node's own type
 * stripping, no loader), with a temporary configuration file, its JSON log lines, and a real HTTP receiver on
 * 127.0.0.1 that records deliveries.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { type AddressInfo, connect, createServer as createTcpServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root. */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * The Node arguments of package.json's `start` script (`node <args…>`), so the tests start the runtime exactly as
 * `npm start` does, in the runtime's own process (SIGTERM and SIGKILL reach it, no wrapper in between). Throws
 * when the script is not a plain `node …` command.
 */
export function startScriptArgs(): string[] {
  const manifest = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as {
    scripts?: Record<string, string>;
  };
  // `exec node …`: the shell npm runs the script in (dash) is replaced by node, so npm's forwarded SIGTERM reaches it.
  const [command, ...args] = (manifest.scripts?.start ?? '')
    .trim()
    .replace(/^exec\s+/, '')
    .split(/\s+/);
  if (command !== 'node' || args.length === 0) {
    throw new Error(`package.json's start script is not "[exec] node <args>": ${manifest.scripts?.start}`);
  }
  // Paths in the script are relative to the repository; the runtime runs in its own directory.
  return args.map((arg) => (/\.[cm]?[jt]s$/.test(arg) ? resolve(REPO_ROOT, arg) : arg));
}

/** How long a test waits for a log line or a delivery before it fails with what it saw. */
export const WAIT_MS = 45_000;

/** One parsed log line of the runtime. */
export type LogLine = Record<string, unknown> & { message?: string; level?: string };

/** A runtime child process. */
export interface QueueBoxProcess {
  readonly child: ChildProcess;
  /** The working directory of the process (a fresh temporary directory). */
  readonly dir: string;
  /** Every JSON line written to stdout so far. */
  readonly logs: LogLine[];
  /** Everything written to stderr (and non-JSON stdout), for failure messages. */
  readonly stderr: () => string;
  /** Resolves with the first log line (already seen or still to come) that `match` accepts. */
  waitForLog(match: (line: LogLine) => boolean, what: string): Promise<LogLine>;
  /** Resolves with the exit code (or the signal's name) once the process exited. */
  readonly exited: Promise<number | string>;
  /** Sends `signal` (default SIGTERM) and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | string>;
}

/** Options of {@link startQueueBox}. */
export interface StartOptions {
  /** The YAML configuration text written to a temporary `queuebox.yaml` (QUEUEBOX_CONFIG points at it). */
  readonly yaml: string;
  /** Working directory; default a new temporary directory (removed by `cleanup`). */
  readonly dir?: string;
  /** Extra environment variables. */
  readonly env?: Readonly<Record<string, string>>;
  /**
   * Start it with `npm start` itself, in the repository (the command a container runs): the child is npm, and a
   * signal sent to it must reach the runtime. Default false: the start script's `node <args…>` in `dir`.
   */
  readonly viaNpm?: boolean;
}

const started = new Set<QueueBoxProcess>();
const tempDirs = new Set<string>();

/** A new temporary directory, removed by {@link cleanup}. */
export async function tempDir(prefix = 'queuebox-local-'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}

/**
 * Starts the runtime as `npm start` does ({@link startScriptArgs}) in a temporary directory with the given
 * configuration, on the Node that runs the tests (24, from the repository; its directory also goes first on PATH).
 */
export async function startQueueBox(options: StartOptions): Promise<QueueBoxProcess> {
  const dir = options.dir ?? (await tempDir());
  const configFile = join(dir, 'queuebox.yaml');
  await writeFile(configFile, options.yaml);
  const env: Record<string, string> = {};
  // Only what a process needs; QUEUEBOX_* variables of the developer's shell would change the configuration.
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && !name.startsWith('QUEUEBOX_')) env[name] = value;
  }
  env.PATH = [dirname(process.execPath), process.env.PATH ?? ''].join(delimiter);
  env.QUEUEBOX_CONFIG = configFile;
  Object.assign(env, options.env);
  const child = options.viaNpm
    ? spawn('npm', ['start'], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(process.execPath, startScriptArgs(), {
        cwd: dir,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });

  const logs: LogLine[] = [];
  let stderr = '';
  const waiters: { match: (line: LogLine) => boolean; resolve: (line: LogLine) => void }[] = [];
  let buffered = '';
  child.stdout?.setEncoding('utf8');
  child.stdout?.on('data', (text: string) => {
    buffered += text;
    for (let newline = buffered.indexOf('\n'); newline >= 0; newline = buffered.indexOf('\n')) {
      const raw = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      let line: LogLine;
      try {
        line = JSON.parse(raw) as LogLine;
      } catch {
        stderr += `[stdout] ${raw}\n`;
        continue;
      }
      logs.push(line);
      for (const waiter of [...waiters]) {
        if (waiter.match(line)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(line);
        }
      }
    }
  });
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (text: string) => {
    stderr += text;
  });
  // 'close', not 'exit': 'close' comes once stdout is read to its end, so `logs` holds the process's last lines.
  const exited = new Promise<number | string>((resolvePromise) => {
    child.on('close', (code, signal) => resolvePromise(code ?? signal ?? 'unknown'));
  });

  const describe = () =>
    `logs:\n${logs.map((l) => JSON.stringify(l)).join('\n')}\nstderr:\n${stderr || '(empty)'}`;

  const process_: QueueBoxProcess = {
    child,
    dir,
    logs,
    stderr: () => stderr,
    exited,
    waitForLog(match, what) {
      const seen = logs.find(match);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolvePromise, reject) => {
        const timer = setTimeout(() => {
          reject(new Error(`no log line "${what}" within ${WAIT_MS} ms\n${describe()}`));
        }, WAIT_MS);
        const waiter = {
          match,
          resolve: (line: LogLine) => {
            clearTimeout(timer);
            resolvePromise(line);
          },
        };
        waiters.push(waiter);
        void exited.then((code) => {
          if (!waiters.includes(waiter)) return;
          clearTimeout(timer);
          reject(new Error(`the runtime exited (${code}) before logging "${what}"\n${describe()}`));
        });
      });
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
  started.add(process_);
  return process_;
}

/** Waits for the `listening` line and answers the runtime's base URL. */
export async function baseUrlOf(queuebox: QueueBoxProcess): Promise<string> {
  const line = await queuebox.waitForLog((l) => l.message === 'listening', 'listening');
  const port = line.port;
  if (typeof port !== 'number' || port <= 0) throw new Error(`no port in ${JSON.stringify(line)}`);
  return `http://127.0.0.1:${port}`;
}

/** Kills what the tests left running and removes temporary directories. */
export async function cleanup(): Promise<void> {
  for (const queuebox of started) {
    if (queuebox.child.exitCode === null && queuebox.child.signalCode === null) {
      queuebox.child.kill('SIGKILL');
      await queuebox.exited;
    }
  }
  started.clear();
  for (const dir of tempDirs) await rm(dir, { recursive: true, force: true });
  tempDirs.clear();
}

// ------------------------------------------------------------------------------------------------------------
// Standard Webhooks, written here from the specification rather than imported, so the tests check the runtime
// against an independent signer.

/** A development secret for test sources and destinations. */
export const TEST_SECRET = `whsec_${Buffer.from('queuebox-local-test-secret').toString('base64')}`;

/** The headers of a Standard Webhooks request for `body`, signed with `secret`. */
export function signStandardWebhook(
  id: string,
  body: string,
  secret = TEST_SECRET,
  timestamp = Math.floor(Date.now() / 1000),
): Record<string, string> {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const signature = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': `v1,${signature}`,
  };
}

/** Whether `headers` carry a valid Standard Webhooks signature of `body` by `secret`. */
export function hasValidSignature(headers: IncomingHttpHeaders, body: string, secret = TEST_SECRET): boolean {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (typeof id !== 'string' || typeof timestamp !== 'string' || typeof signatures !== 'string') return false;
  const expected = signStandardWebhook(id, body, secret, Number(timestamp))['webhook-signature'];
  return signatures.split(' ').includes(expected ?? '');
}

/** Posts a signed webhook and answers the status and parsed JSON body. */
export async function postWebhook(
  url: string,
  id: string,
  payload: unknown,
  secret = TEST_SECRET,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const body = JSON.stringify(payload);
  const response = await fetch(url, { method: 'POST', headers: signStandardWebhook(id, body, secret), body });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

// ------------------------------------------------------------------------------------------------------------
// The receiver

/** One request the receiver got. */
export interface Delivery {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** A real HTTP destination on 127.0.0.1 that records deliveries. */
export interface Receiver {
  readonly url: string;
  readonly deliveries: Delivery[];
  /** Resolves once at least `count` deliveries arrived (their responses may still be held). */
  waitFor(count: number): Promise<Delivery[]>;
  /**
   * Holds the response to deliveries that `match` accepts until `release()` is called (to keep a delivery in
   * flight, e.g. across a SIGTERM).
   */
  hold(match: (delivery: Delivery) => boolean): { release(): void };
  close(): Promise<void>;
}

/** Starts a receiver that answers 204 to every request (after any hold). */
export async function startReceiver(): Promise<Receiver> {
  const deliveries: Delivery[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  const holds: { match: (d: Delivery) => boolean; gate: Promise<void> }[] = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', async () => {
      const delivery: Delivery = {
        method: request.method ?? '',
        path: request.url ?? '',
        headers: request.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      deliveries.push(delivery);
      for (const waiter of [...waiters]) {
        if (deliveries.length >= waiter.count) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve();
        }
      }
      for (const hold of holds) if (hold.match(delivery)) await hold.gate;
      response.writeHead(204);
      response.end();
    });
  });
  await new Promise<void>((resolvePromise) => server.listen(0, '127.0.0.1', resolvePromise));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    deliveries,
    waitFor(count) {
      if (deliveries.length >= count) return Promise.resolve(deliveries);
      return new Promise((resolvePromise, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`${deliveries.length} of ${count} deliveries within ${WAIT_MS} ms`)),
          WAIT_MS,
        );
        waiters.push({
          count,
          resolve: () => {
            clearTimeout(timer);
            resolvePromise(deliveries);
          },
        });
      });
    },
    hold(match) {
      let release = () => {};
      const gate = new Promise<void>((resolvePromise) => {
        release = resolvePromise;
      });
      holds.push({ match, gate });
      return { release: () => release() };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolvePromise) => server.close(() => resolvePromise()));
    },
  };
}

/** The configuration of a test runtime: one signed http source `demo`, one http destination, one route. */
export function testConfigYaml(options: {
  readonly receiverUrl: string;
  /** Lines of a `database:` section, or none for the embedded PGlite. */
  readonly database?: { readonly url: string; readonly schema: string };
  readonly maxBodyBytes?: number;
  /** `outbox.pollIntervalMs` and `inbox.relay.pollIntervalMs`. Default 50. */
  readonly pollIntervalMs?: number;
  /** `admin.token`; default none (the admin API is off). */
  readonly adminToken?: string;
  /** `http.requestTimeoutMs` and `http.maxConnections`; default the runtime's own. */
  readonly http?: { readonly requestTimeoutMs?: number; readonly maxConnections?: number };
}): string {
  const database = options.database
    ? `database:\n  url: ${JSON.stringify(options.database.url)}\n  schema: ${options.database.schema}\n`
    : '';
  const admin = options.adminToken ? `admin:\n  token: ${JSON.stringify(options.adminToken)}\n` : '';
  const pollIntervalMs = options.pollIntervalMs ?? 50;
  const limits = Object.entries(options.http ?? {})
    .map(([key, value]) => `  ${key}: ${value}\n`)
    .join('');
  return `${database}${admin}http:
  port: 0
  host: 127.0.0.1
${limits}inbox:
  maxBodyBytes: ${options.maxBodyBytes ?? 1048576}
  relay:
    pollIntervalMs: ${pollIntervalMs}
outbox:
  pollIntervalMs: ${pollIntervalMs}
  backoff: { baseMs: 100, maxMs: 1000 }
sources:
  demo:
    type: http
    auth: { scheme: standard-webhooks, secrets: [${TEST_SECRET}] }
    eventTypePath: $.type
    aggregateIdPath: $.data.id
    topic: "demo.{{ eventType }}"
destinations:
  receiver:
    type: http
    url: ${options.receiverUrl}
    timeoutMs: 15000
    signing: { scheme: standard-webhooks, secrets: [${TEST_SECRET}] }
routes:
  - { match: "demo.#", destination: receiver }
logLevel: debug
`;
}

// ------------------------------------------------------------------------------------------------------------
// The CLI

const CLI = join(REPO_ROOT, 'packages', 'local', 'src', 'cli.ts');

/** Runs `queuebox <args>` (`node packages/local/src/cli.ts`, as the `queuebox` bin's shebang does) to completion. */
export function runQueueBoxCli(
  args: readonly string[],
  options: { readonly cwd: string; readonly env?: Readonly<Record<string, string>> },
): Promise<{ code: number | string; stdout: string; stderr: string }> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && !name.startsWith('QUEUEBOX_')) env[name] = value;
  }
  env.PATH = [dirname(process.execPath), process.env.PATH ?? ''].join(delimiter);
  Object.assign(env, options.env);
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: options.cwd,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => {
    stdout += text;
  });
  child.stderr.setEncoding('utf8').on('data', (text: string) => {
    stderr += text;
  });
  return new Promise((resolvePromise) => {
    // 'close': stdout and stderr have been read to their end.
    child.on('close', (code, signal) =>
      resolvePromise({ code: code ?? signal ?? 'unknown', stdout, stderr }),
    );
  });
}

// ------------------------------------------------------------------------------------------------------------
// A database outage, for real: a TCP proxy in front of PostgreSQL whose connections the test can cut.

/** A TCP proxy to a real server that can refuse and drop connections on demand. */
export interface TcpProxy {
  readonly port: number;
  /** Connections accepted so far (refused ones not counted). */
  accepted(): number;
  /** Drops every open connection and refuses new ones (the server looks down). */
  cut(): void;
  /**
   * The server goes silent without closing anything: open and new connections stay open, and nothing is forwarded
   * on them either way (a dropped network path, a frozen host).
   */
  silence(): void;
  /** Accepts connections again and forwards on new ones (a silenced connection stays silent). */
  restore(): void;
  close(): Promise<void>;
}

/** Starts a TCP proxy on 127.0.0.1 (free port) to `host:port`. */
export async function startTcpProxy(host: string, port: number): Promise<TcpProxy> {
  const open = new Set<Socket>();
  const mutes = new Set<{ muted: boolean }>();
  let refusing = false;
  let silent = false;
  let accepted = 0;
  const server = createTcpServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    accepted += 1;
    const upstream = connect(port, host);
    open.add(client);
    open.add(upstream);
    const mute = { muted: silent };
    mutes.add(mute);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
      mutes.delete(mute);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.on('data', (chunk) => {
      if (!mute.muted) upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (!mute.muted) client.write(chunk);
    });
  });
  await new Promise<void>((resolvePromise) => server.listen(0, '127.0.0.1', resolvePromise));
  const cut = () => {
    refusing = true;
    for (const socket of open) socket.destroy();
    open.clear();
  };
  return {
    port: (server.address() as AddressInfo).port,
    accepted: () => accepted,
    cut,
    silence() {
      silent = true;
      for (const mute of mutes) mute.muted = true;
    },
    restore() {
      refusing = false;
      silent = false;
    },
    async close() {
      cut();
      await new Promise<void>((resolvePromise) => server.close(() => resolvePromise()));
    },
  };
}

/** Polls `probe` until it answers true; fails after {@link WAIT_MS} with `what`. */
export async function eventually(probe: () => Promise<boolean>, what: string): Promise<void> {
  const until = Date.now() + WAIT_MS;
  for (;;) {
    if (await probe()) return;
    if (Date.now() > until) throw new Error(`${what} did not happen within ${WAIT_MS} ms`);
    await new Promise((resolvePromise) => setTimeout(resolvePromise, 100));
  }
}
