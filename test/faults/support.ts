/**
 * What the fault and abuse suite (and bench/soak.ts) share: a receiver that records every delivery by outbox id,
 * key and sequence and judges losses, duplicates and per-key order; bulk enqueue through @queuebox/client; a
 * private PostgreSQL cluster that can really be stopped and started; raw HTTP over a socket; and a scan of the
 * runtime's output for secrets. Nothing here imports vitest, so the soak can use it too.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { type AddressInfo, connect, createServer as createTcpServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type EnqueueMessage, enqueueMany } from '@queuebox/client';
import type pg from 'pg';
import type { QueueBoxProcess } from '../local/support.ts';

/** Polls `probe` every `everyMs` until it answers true; throws after `timeoutMs` with `what` and `describe()`. */
export async function waitUntil(
  probe: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs: number,
  describe: () => string = () => '',
  everyMs = 100,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (await probe()) return;
    if (Date.now() > until) throw new Error(`${what} did not happen within ${timeoutMs} ms. ${describe()}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** A free TCP port on 127.0.0.1 (closed again before it is returned). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createTcpServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

// ------------------------------------------------------------------------------------------------------------
// Killing a runtime for real

/** Ids of every process below `pid` (children, grandchildren, …), deepest last. */
export function descendantPids(pid: number): number[] {
  const listing = spawnSync('ps', ['-eo', 'pid=,ppid='], { encoding: 'utf8' });
  const childrenOf = new Map<number, number[]>();
  for (const line of listing.stdout.split('\n')) {
    const [child, parent] = line.trim().split(/\s+/).map(Number);
    if (child === undefined || parent === undefined || Number.isNaN(child)) continue;
    childrenOf.set(parent, [...(childrenOf.get(parent) ?? []), child]);
  }
  const found: number[] = [];
  const queue = [pid];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    for (const child of childrenOf.get(next) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

/**
 * kill -9 of a runtime started by `startQueueBox`. That helper spawns the `tsx` wrapper, which runs the runtime in
 * a child `node` process; SIGKILL cannot be relayed, so killing only the wrapper would leave the runtime running.
 * This kills the runtime's own process first (the crash), then the wrapper, and resolves once the wrapper exited.
 */
export async function killHard(queuebox: QueueBoxProcess): Promise<void> {
  const pid = queuebox.child.pid;
  if (pid === undefined) return;
  for (const child of descendantPids(pid).reverse()) {
    try {
      process.kill(child, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  if (queuebox.child.exitCode === null && queuebox.child.signalCode === null) queuebox.child.kill('SIGKILL');
  await queuebox.exited;
}

/** Kills (hard) every runtime in `processes` that still runs, with its tsx child. */
export async function killAll(processes: Iterable<QueueBoxProcess>): Promise<void> {
  for (const queuebox of processes) await killHard(queuebox);
}

// ------------------------------------------------------------------------------------------------------------
// Messages: what the test enqueues, and what it expects to arrive

/** What a test message is: its key and its place in the key's sequence (0, 1, 2, … in insert order). */
export interface Expected {
  readonly key: string;
  readonly seq: number;
}

/** The payload of a test message; the receiver reads `key` and `seq` back from it. */
export interface TestPayload {
  readonly key: string;
  readonly seq: number;
  readonly run: string;
}

/**
 * Enqueues `count` messages over `keys` keys (message i has key `k<i % keys>` and sequence `⌊i / keys⌋`) with
 * `enqueueMany` of @queuebox/client, `perTransaction` messages per transaction, on topic `topic`. Answers the
 * expected key and sequence of every new outbox id.
 */
export async function enqueueKeyed(
  pool: pg.Pool,
  options: {
    readonly schema: string;
    readonly count: number;
    readonly keys: number;
    readonly topic: string;
    readonly run: string;
    readonly perTransaction?: number;
    readonly maxAttempts?: number;
    /** First message number (to enqueue more of the same run later). Default 0. */
    readonly from?: number;
  },
): Promise<Map<string, Expected>> {
  const expected = new Map<string, Expected>();
  const perTransaction = options.perTransaction ?? 500;
  const from = options.from ?? 0;
  for (let start = from; start < from + options.count; start += perTransaction) {
    const end = Math.min(from + options.count, start + perTransaction);
    const messages: EnqueueMessage[] = [];
    for (let i = start; i < end; i += 1) {
      const key = `k${i % options.keys}`;
      const seq = Math.floor(i / options.keys);
      const payload: TestPayload = { key, seq, run: options.run };
      messages.push({ topic: options.topic, key, payload, maxAttempts: options.maxAttempts ?? 25 });
    }
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const ids = await enqueueMany(client, messages, { schema: options.schema });
      await client.query('COMMIT');
      ids.forEach((id, i) => {
        const payload = messages[i]?.payload as TestPayload;
        expected.set(id, { key: payload.key, seq: payload.seq });
      });
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }
  return expected;
}

// ------------------------------------------------------------------------------------------------------------
// The receiver

/** One delivery as the receiver saw it. */
export interface Arrival {
  /** The `Idempotency-Key` header: the outbox row id. */
  readonly id: string;
  readonly key: string | undefined;
  readonly seq: number | undefined;
  /** The `x-idempotency-key` relay header: the inbox idempotency key of a relayed message. */
  readonly inboxKey: string | undefined;
  /** Position among all arrivals (0-based). */
  readonly index: number;
  /** Headers, when the receiver keeps them. */
  readonly headers?: IncomingHttpHeaders;
  /** The raw body, when the receiver keeps headers. */
  readonly body?: string;
}

/** A real HTTP destination on 127.0.0.1 that answers 204 and records every delivery. */
export interface RecordingReceiver {
  readonly url: string;
  readonly arrivals: Arrival[];
  /** Distinct outbox ids received so far. */
  readonly distinct: () => number;
  close(): Promise<void>;
}

/**
 * Starts a recording receiver. `keepHeaders` keeps each delivery's headers and body (small runs only).
 * `answer` may change the status for a delivery (default 204).
 */
export async function startRecordingReceiver(
  options: { readonly keepHeaders?: boolean; readonly answer?: (arrival: Arrival) => number } = {},
): Promise<RecordingReceiver> {
  const arrivals: Arrival[] = [];
  const seen = new Set<string>();
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const id = String(request.headers['idempotency-key'] ?? '');
      let key: string | undefined;
      let seq: number | undefined;
      try {
        const payload = JSON.parse(body) as Partial<TestPayload>;
        if (typeof payload.key === 'string') key = payload.key;
        if (typeof payload.seq === 'number') seq = payload.seq;
      } catch {
        // A body that is not a test payload is still recorded by id.
      }
      const inboxKey = request.headers['x-idempotency-key'];
      const arrival: Arrival = {
        id,
        inboxKey: typeof inboxKey === 'string' ? inboxKey : undefined,
        key,
        seq,
        index: arrivals.length,
        ...(options.keepHeaders ? { headers: request.headers, body } : {}),
      };
      arrivals.push(arrival);
      seen.add(id);
      response.writeHead(options.answer?.(arrival) ?? 204);
      response.end();
    });
  });
  // Deliveries come over keep-alive connections; the default 5 s idle timeout would only add reconnects.
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    arrivals,
    distinct: () => seen.size,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What the arrivals say against what was enqueued. */
export interface DeliveryVerdict {
  /** Enqueued ids that never arrived. */
  readonly missing: readonly string[];
  /** Arrived ids that were never enqueued (or whose body does not match the enqueued key/sequence). */
  readonly foreign: readonly string[];
  /** Ids that arrived more than once, with how many times. */
  readonly duplicates: ReadonlyMap<string, number>;
  /** Extra arrivals in total (sum of count − 1 over duplicates). */
  readonly extraArrivals: number;
  /**
   * Per-key order violations: a key whose first deliveries did not come as sequence 0, 1, 2, … (each message's
   * first arrival is the next sequence of its key). A redelivery of a sequence already seen is not a violation.
   */
  readonly orderViolations: readonly string[];
}

/** Judges `arrivals` against `expected` (outbox id → key and sequence). */
export function judgeDeliveries(
  arrivals: readonly Arrival[],
  expected: ReadonlyMap<string, Expected>,
): DeliveryVerdict {
  const counts = new Map<string, number>();
  const foreign = new Set<string>();
  const nextSeq = new Map<string, number>();
  const orderViolations: string[] = [];
  for (const arrival of arrivals) {
    const count = (counts.get(arrival.id) ?? 0) + 1;
    counts.set(arrival.id, count);
    const wanted = expected.get(arrival.id);
    if (wanted === undefined || wanted.key !== arrival.key || wanted.seq !== arrival.seq) {
      foreign.add(arrival.id);
      continue;
    }
    if (count > 1) continue;
    const next = nextSeq.get(wanted.key) ?? 0;
    if (wanted.seq !== next && orderViolations.length < 20) {
      orderViolations.push(
        `key ${wanted.key}: first delivery of sequence ${wanted.seq} (id ${arrival.id}, arrival ${arrival.index}) when ${next} was next`,
      );
    }
    nextSeq.set(wanted.key, Math.max(next, wanted.seq + 1));
  }
  const duplicates = new Map<string, number>();
  let extraArrivals = 0;
  for (const [id, count] of counts) {
    if (count > 1) {
      duplicates.set(id, count);
      extraArrivals += count - 1;
    }
  }
  const missing = [...expected.keys()].filter((id) => !counts.has(id));
  return { missing, foreign: [...foreign], duplicates, extraArrivals, orderViolations };
}

// ------------------------------------------------------------------------------------------------------------
// Database views

/** Rows per state of `schema`.`table`. */
export async function statesOf(
  pool: pg.Pool,
  schema: string,
  table: 'outbox' | 'inbox',
): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ state: string; n: number }>(
    `SELECT state, count(*)::int AS n FROM "${schema}"."${table}" GROUP BY state`,
  );
  return Object.fromEntries(rows.map((r) => [r.state, r.n]));
}

/** Ids of the outbox rows in state processing, with their lease. */
export async function processingRows(
  pool: pg.Pool,
  schema: string,
): Promise<Map<string, { leaseUntil: Date; attempt: number }>> {
  const { rows } = await pool.query<{ id: string; lease_until: Date; attempt: number }>(
    `SELECT id::text AS id, lease_until, attempt FROM "${schema}".outbox WHERE state = 'processing'`,
  );
  return new Map(rows.map((r) => [r.id, { leaseUntil: r.lease_until, attempt: r.attempt }]));
}

// ------------------------------------------------------------------------------------------------------------
// Configuration of a fault-suite runtime

/** Options of {@link faultConfigYaml}. */
export interface FaultConfigOptions {
  readonly database: { readonly url: string; readonly schema: string; readonly poolSize?: number };
  readonly receiverUrl: string;
  readonly claimTimeoutMs?: number;
  readonly batchSize?: number;
  readonly maxAttempts?: number;
  /** Extra YAML appended under `sources:` (indented two spaces per level), e.g. hostile-input sources. */
  readonly sourcesYaml?: string;
  readonly adminToken?: string;
  readonly signingSecret?: string;
  readonly maxBodyBytes?: number;
}

/**
 * A runtime configuration: one http destination `receiver` (route `#` → receiver, so every topic reaches it), a
 * short outbox and relay lease (default 3000 ms; the outbox-tick and relay-tick function timeouts are lowered to
 * match, since validation requires lease > timeout), quick back-off, info logs. `sourcesYaml` adds inbox sources.
 */
export function faultConfigYaml(options: FaultConfigOptions): string {
  const claimTimeoutMs = options.claimTimeoutMs ?? 3000;
  const tickSeconds = Math.max(1, Math.floor((claimTimeoutMs - 1) / 1000));
  const sources = options.sourcesYaml ? `sources:\n${options.sourcesYaml}` : '';
  const signing = options.signingSecret
    ? `\n    signing: { scheme: standard-webhooks, secrets: [${JSON.stringify(options.signingSecret)}] }`
    : '';
  const admin = options.adminToken ? `admin:\n  token: ${JSON.stringify(options.adminToken)}\n` : '';
  return `database:
  provider: postgres
  url: ${JSON.stringify(options.database.url)}
  schema: ${options.database.schema}
  poolSize: ${options.database.poolSize ?? 10}
http:
  port: 0
  host: 127.0.0.1
${admin}inbox:
  maxBodyBytes: ${options.maxBodyBytes ?? 1048576}
  relay:
    pollIntervalMs: 50
    claimTimeoutMs: ${claimTimeoutMs}
outbox:
  pollIntervalMs: 50
  batchSize: ${options.batchSize ?? 100}
  claimTimeoutMs: ${claimTimeoutMs}
  maxAttempts: ${options.maxAttempts ?? 25}
  backoff: { baseMs: 100, maxMs: 1000 }
aws:
  functions:
    outboxTick: { timeoutSeconds: ${tickSeconds} }
    relayTick: { timeoutSeconds: ${tickSeconds} }
${sources}destinations:
  receiver:
    type: http
    url: ${options.receiverUrl}
    timeoutMs: 10000${signing}
routes:
  - { match: "#", destination: receiver }
logLevel: info
`;
}

/** A PostgreSQL URL with a password added (trust authentication ignores it), to check it never leaks. */
export function withPassword(url: string, password: string): string {
  const parsed = new URL(url);
  parsed.password = password;
  return parsed.href;
}

// ------------------------------------------------------------------------------------------------------------
// Secrets in output

/** Everything a runtime process wrote: its JSON log lines and its stderr. */
export function outputOf(process: QueueBoxProcess): string {
  return `${process.logs.map((line) => JSON.stringify(line)).join('\n')}\n${process.stderr()}`;
}

/**
 * The secrets that occur in `text`, by label. Each secret is looked for as written and, for Standard Webhooks
 * secrets (`whsec_…`), also as its bare base64 part; JSON escaping of the log is undone first.
 */
export function leakedSecrets(text: string, secrets: Readonly<Record<string, string>>): string[] {
  const leaks: string[] = [];
  for (const [label, secret] of Object.entries(secrets)) {
    const forms = new Set([secret, JSON.stringify(secret).slice(1, -1)]);
    if (secret.startsWith('whsec_')) forms.add(secret.slice('whsec_'.length));
    for (const form of forms) {
      if (form.length >= 6 && text.includes(form)) {
        leaks.push(label);
        break;
      }
    }
  }
  return leaks;
}

// ------------------------------------------------------------------------------------------------------------
// Raw HTTP

/** What came back on a raw socket. */
export interface RawAnswer {
  /** The status of the first response, or undefined when the server closed without one. */
  readonly status: number | undefined;
  /** Everything received, as latin1 text. */
  readonly text: string;
  /** Whether the server closed the connection (rather than our timeout ending the wait). */
  readonly closed: boolean;
}

/**
 * Writes `request` (bytes as given, nothing added) to 127.0.0.1:`port` and collects the answer until the server
 * closes the connection, a complete response with Content-Length arrived, or `timeoutMs` passed.
 */
export function rawHttp(port: number, request: Buffer | string, timeoutMs = 5000): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    let settled = false;
    const finish = (closed: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(text);
      resolve({ status: match ? Number(match[1]) : undefined, text, closed });
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      const text = Buffer.concat(chunks).toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, end === -1 ? undefined : end));
      if (end !== -1 && length && Buffer.byteLength(text, 'latin1') >= end + 4 + Number(length[1])) {
        finish(false);
      }
    });
    socket.on('error', () => finish(true));
    socket.on('close', () => finish(true));
    socket.write(request);
  });
}

// ------------------------------------------------------------------------------------------------------------
// A private PostgreSQL cluster, stopped and started for real

/** A PostgreSQL server of our own (initdb in a temporary directory) on a free port of 127.0.0.1. */
export interface PrivatePostgres {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication). */
  readonly url: string;
  readonly port: number;
  /** The PostgreSQL version of the binaries, e.g. `15`. */
  readonly version: string;
  /** Fast shutdown (`pg_ctl stop -m fast`): clients are disconnected, the port closes. */
  stop(): Promise<void>;
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

/** initdb and the server refuse to run as root: under root they run as the `postgres` user. */
function runAs(): { uid: number; gid: number } | undefined {
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
export async function startPrivatePostgres(binaries: {
  readonly bindir: string;
  readonly version: string;
}): Promise<PrivatePostgres> {
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
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=200`;
  const start = () =>
    run(
      join(binaries.bindir, 'pg_ctl'),
      ['-D', data, '-o', options, '-l', join(dir, 'server.log'), '-w', '-t', '30', 'start'],
      as,
    );
  const stop = () => run(join(binaries.bindir, 'pg_ctl'), ['-D', data, '-m', 'fast', '-w', 'stop'], as);
  let running = false;
  await start();
  running = true;
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    version: binaries.version,
    async stop() {
      if (!running) return;
      await stop();
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
  down(): Promise<void>;
  up(): Promise<void>;
  dispose(): Promise<void>;
}

/**
 * A private PostgreSQL cluster that is really stopped and started, when `initdb`/`pg_ctl` are installed; otherwise
 * a TCP proxy in front of `fallbackUrl` whose connections are cut (the reason is printed with `label`).
 */
export async function databaseOutage(fallbackUrl: string, label: string): Promise<DatabaseOutage> {
  const binaries = postgresBinaries();
  if ('bindir' in binaries) {
    try {
      const server = await startPrivatePostgres(binaries);
      return {
        url: server.url,
        how: `private cluster (PostgreSQL ${server.version}, port ${server.port}), stopped (pg_ctl -m fast) and started`,
        down: () => server.stop(),
        up: () => server.start(),
        dispose: () => server.dispose(),
      };
    } catch (error) {
      console.info(`[${label}] no private cluster (${String(error)}); using a TCP proxy instead`);
    }
  } else {
    console.info(`[${label}] no private cluster (${binaries.reason}); using a TCP proxy instead`);
  }
  const { startTcpProxy } = await import('../local/support.ts');
  const target = new URL(fallbackUrl);
  const proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
  target.host = `127.0.0.1:${proxy.port}`;
  return {
    url: target.href,
    how: `TCP proxy on port ${proxy.port} in front of ${fallbackUrl}, cut and restored`,
    down: async () => proxy.cut(),
    up: async () => proxy.restore(),
    dispose: () => proxy.close(),
  };
}

// ------------------------------------------------------------------------------------------------------------
// A webhook sender that behaves like a real provider: it retries until the inbox takes the message

/** What a {@link startWebhookSender} run did. */
export interface WebhookSenderReport {
  /** Webhook ids the inbox took (202, or 200 duplicate for a retry of a message it had stored), in order. */
  readonly accepted: readonly string[];
  /** Answers by status (503 while the database is down, …), counting every try. */
  readonly statuses: Readonly<Record<string, number>>;
  /** Tries that failed without an HTTP answer. */
  readonly networkErrors: number;
}

/** A running sender: stop() lets each key's loop finish its current message, then resolves with the report. */
export interface WebhookSender {
  /** Webhooks taken so far. */
  readonly acceptedCount: () => number;
  stop(): Promise<WebhookSenderReport>;
}

/**
 * Posts Standard Webhooks signed messages to `url`, one loop per key (a key's messages one after another, each
 * retried every 100 ms until the inbox answers 202 or 200), `gapMs` between messages of a loop, until `stop()`.
 * Payload `{ type, agg: key, seq, run }`; webhook id `<run>-<key>-<seq>`.
 */
export function startWebhookSender(options: {
  readonly url: string;
  readonly secret: string;
  readonly keys: number;
  readonly run: string;
  readonly gapMs: number;
  readonly sign: (id: string, body: string, secret: string) => Record<string, string>;
}): WebhookSender {
  const accepted: string[] = [];
  const statuses: Record<string, number> = {};
  let networkErrors = 0;
  let stopping = false;
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  const loop = async (key: string) => {
    for (let seq = 0; !stopping; seq += 1) {
      const id = `${options.run}-${key}-${seq}`;
      const body = JSON.stringify({ type: 'order.changed', agg: key, seq, run: options.run });
      for (;;) {
        try {
          const response = await fetch(options.url, {
            method: 'POST',
            headers: options.sign(id, body, options.secret),
            body,
          });
          await response.arrayBuffer();
          statuses[response.status] = (statuses[response.status] ?? 0) + 1;
          if (response.status === 202 || response.status === 200) break;
        } catch {
          networkErrors += 1;
        }
        await pause(100);
      }
      accepted.push(id);
      await pause(options.gapMs);
    }
  };
  const loops = Array.from({ length: options.keys }, (_, i) => loop(`w${i}`));
  return {
    acceptedCount: () => accepted.length,
    async stop() {
      stopping = true;
      await Promise.all(loops);
      return { accepted, statuses, networkErrors };
    },
  };
}

/** What {@link streamChunked} saw. */
export interface StreamedAnswer {
  /** The status of a response that reached us, or undefined (the server may reset the connection first). */
  readonly status: number | undefined;
  /** Body bytes written before the connection closed. */
  readonly written: number;
  /** Whether the connection closed before the whole body was written. */
  readonly cutShort: boolean;
}

/**
 * POSTs `total` bytes of body in 64 KiB chunks (Transfer-Encoding: chunked, no Content-Length) to `path`, as fast
 * as the socket takes them, and reports how far it got and what came back.
 */
export function streamChunked(port: number, path: string, total: number): Promise<StreamedAnswer> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    let received = '';
    let written = 0;
    let finished = false;
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      const match = /^HTTP\/1\.1 (\d{3})/.exec(received);
      resolve({ status: match ? Number(match[1]) : undefined, written, cutShort: !finished });
    });
    socket.write(
      `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
    );
    const chunk = `${(64 * 1024).toString(16)}\r\n${'a'.repeat(64 * 1024)}\r\n`;
    const pump = () => {
      while (written < total && !socket.destroyed) {
        written += 64 * 1024;
        if (!socket.write(chunk)) {
          socket.once('drain', pump);
          return;
        }
      }
      if (!socket.destroyed) {
        finished = true;
        socket.end('0\r\n\r\n');
      }
    };
    pump();
  });
}
