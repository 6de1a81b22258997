/**
 * A runtime started before its database (real processes, as `npm start` runs): it waits instead of exiting, says so
 * in a WARN line with the cause, answers /health 503 and webhooks 503 with Retry-After meanwhile (/metrics 200:
 * the process is alive), and starts everything once the database answers. SIGTERM during the wait exits 0 at once,
 * also while a connection attempt hangs. Errors waiting would not mend (authentication failed, no such database)
 * still end the start with exit 1.
 *
 * The database's "front door" is a TCP server of this test on the port the runtime connects to: first nothing
 * listens there (ECONNREFUSED), then it answers every connection as a starting PostgreSQL does (ErrorResponse
 * SQLSTATE 57P03 "the database system is starting up"), then it forwards to the machine's PostgreSQL. Other modes:
 * `silent` (accepts, never answers) and `auth-failed` (ErrorResponse 28P01, as a server with a password the
 * runtime does not have).
 */
import { connect, createServer as createTcpServer, type Server, type Socket } from 'node:net';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../faults/support/processes.ts';
import {
  cleanup,
  type LogLine,
  postWebhook,
  type QueueBoxProcess,
  type Receiver,
  startQueueBox,
  startReceiver,
  testConfigYaml,
} from './support.ts';

const needs = await requireServices('local runtime waiting for its database', ['postgres']);

type DoorMode = 'starting' | 'auth-failed' | 'silent' | 'proxy';

/** The TCP server in front of the database: see the file's comment. */
interface DatabaseDoor {
  mode: DoorMode;
  /** Connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

/** A PostgreSQL ErrorResponse message ('E') with severity FATAL. */
function fatal(sqlState: string, message: string): Buffer {
  const field = (type: string, value: string) => Buffer.from(`${type}${value}\0`, 'utf8');
  const fields = Buffer.concat([
    field('S', 'FATAL'),
    field('V', 'FATAL'),
    field('C', sqlState),
    field('M', message),
    Buffer.from([0]),
  ]);
  const header = Buffer.alloc(5);
  header.write('E', 0, 'latin1');
  header.writeInt32BE(fields.length + 4, 1);
  return Buffer.concat([header, fields]);
}

async function openDatabaseDoor(port: number, target: URL, mode: DoorMode): Promise<DatabaseDoor> {
  const open = new Set<Socket>();
  let connections = 0;
  const door = {
    mode,
    connections: () => connections,
    close: async () => {
      for (const socket of open) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server: Server = createTcpServer((client) => {
    connections++;
    open.add(client);
    client.on('close', () => open.delete(client));
    client.on('error', () => undefined);
    const mode = door.mode;
    if (mode === 'silent') return;
    if (mode === 'starting' || mode === 'auth-failed') {
      // Answered to the startup message, as the server does.
      client.once('data', () => {
        client.end(
          mode === 'starting'
            ? fatal('57P03', 'the database system is starting up')
            : fatal('28P01', 'password authentication failed for user "postgres"'),
        );
      });
      return;
    }
    const upstream = connect(Number(target.port || 5432), target.hostname);
    open.add(upstream);
    upstream.on('close', () => open.delete(upstream));
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  return door;
}

/** The database URL of the test's PostgreSQL, with its host and port replaced by 127.0.0.1:`port`. */
function urlThrough(port: number): string {
  const url = new URL(needs.url.postgres);
  url.host = `127.0.0.1:${port}`;
  return url.href;
}

const isWaitLine = (line: LogLine) => line.message === 'database unavailable; waiting for it before starting';

async function waitFor(probe: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000) {
  const until = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > until) throw new Error(`${what} did not happen within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Sends SIGTERM and answers the exit code and how long the exit took. */
async function terminate(queuebox: QueueBoxProcess): Promise<{ code: number | string; ms: number }> {
  const started = Date.now();
  const code = await queuebox.stop('SIGTERM');
  return { code, ms: Date.now() - started };
}

describe.skipIf(needs.skipReason)('local runtime started before its database (real process)', () => {
  const { schema } = usePostgresSchema(needs.url.postgres, 'local_dbwait', 1);
  const doors: DatabaseDoor[] = [];
  let receiver: Receiver | undefined;

  afterAll(async () => {
    await cleanup();
    await receiver?.close();
    for (const door of doors) await door.close();
  });

  it('waits while the database refuses and is starting up, serving /health 503 meanwhile, then starts everything', async () => {
    receiver = await startReceiver();
    const port = await freePort();
    const queuebox = await startQueueBox({
      yaml: testConfigYaml({
        receiverUrl: receiver.url,
        database: { url: urlThrough(port), schema: schema.name },
      }),
    });
    const waiting = await queuebox.waitForLog(isWaitLine, 'database unavailable (refused)');
    expect(waiting.level).toBe('WARN');
    expect(JSON.stringify(waiting.error)).toContain('ECONNREFUSED');
    const base = waiting.url as string;
    expect(base).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    const health = await fetch(`${base}/health`);
    expect(health.status).toBe(503);
    expect(await health.json()).toEqual({ status: 'starting', error: 'store_unavailable' });
    const refused = await fetch(`${base}/inbox/demo`, { method: 'POST', body: '{}' });
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(await refused.json()).toMatchObject({ error: 'store_unavailable' });
    expect((await fetch(`${base}/metrics`)).status).toBe(200);

    // The server starts up: every connection is refused with 57P03 for a while.
    const door = await openDatabaseDoor(port, new URL(needs.url.postgres), 'starting');
    doors.push(door);
    await waitFor(() => door.connections() >= 2, 'two tries while the server is starting up');
    expect(queuebox.child.exitCode).toBeNull();
    expect((await fetch(`${base}/health`)).status).toBe(503);

    // The database is up.
    door.mode = 'proxy';
    await queuebox.waitForLog((l) => l.message === 'listening', 'listening');
    const answers = await queuebox.waitForLog((l) => l.message === 'database answers; starting', 'answers');
    expect(answers.attempts).toBeGreaterThanOrEqual(3);
    expect(queuebox.logs.some((l) => l.message === 'migrations applied')).toBe(true);
    // The WARN is bounded: the first failure, then at most one line per 30 s.
    const warns = queuebox.logs.filter(isWaitLine);
    expect(warns.length).toBeLessThanOrEqual(1 + Math.floor(Number(answers.waitedMs) / 30_000));
    expect(warns.length).toBeLessThan(Number(answers.attempts) - 1);

    expect((await fetch(`${base}/health`)).status).toBe(200);
    const accepted = await postWebhook(`${base}/inbox/demo`, 'dbwait-1', { type: 'a.b', data: { id: '1' } });
    expect(accepted.status).toBe(202);
    const [delivery] = await receiver.waitFor(1);
    expect(delivery?.headers['x-idempotency-key']).toBe('dbwait-1');
    expect((await terminate(queuebox)).code).toBe(0);
  });

  it('exits 0 at once on SIGTERM while it waits for a database that refuses connections', async () => {
    const port = await freePort();
    const queuebox = await startQueueBox({
      yaml: testConfigYaml({
        receiverUrl: 'http://127.0.0.1:9/hooks',
        database: { url: urlThrough(port), schema: schema.name },
      }),
    });
    await queuebox.waitForLog(isWaitLine, 'database unavailable (refused)');
    const { code, ms } = await terminate(queuebox);
    expect(code).toBe(0);
    expect(ms).toBeLessThan(5_000);
    expect(queuebox.logs.at(-1)).toMatchObject({ message: 'stopped', reason: 'SIGTERM', started: false });
  });

  it('exits 0 at once on SIGTERM while a connection attempt hangs (database.connectTimeoutMs is 30 s)', async () => {
    const port = await freePort();
    const door = await openDatabaseDoor(port, new URL(needs.url.postgres), 'silent');
    doors.push(door);
    const queuebox = await startQueueBox({
      yaml: testConfigYaml({
        receiverUrl: 'http://127.0.0.1:9/hooks',
        database: { url: urlThrough(port), schema: schema.name },
      }),
    });
    await waitFor(() => door.connections() >= 1, 'a connection attempt');
    const { code, ms } = await terminate(queuebox);
    expect(code).toBe(0);
    expect(ms).toBeLessThan(5_000);
  });

  it('does not wait for what waiting would not mend: a refused password, an unknown database', async () => {
    const port = await freePort();
    const door = await openDatabaseDoor(port, new URL(needs.url.postgres), 'auth-failed');
    doors.push(door);
    const denied = await startQueueBox({
      yaml: testConfigYaml({
        receiverUrl: 'http://127.0.0.1:9/hooks',
        database: { url: urlThrough(port), schema: schema.name },
      }),
    });
    expect(await denied.exited).toBe(1);
    expect(denied.logs.some(isWaitLine)).toBe(false);
    expect(JSON.stringify(denied.logs.at(-1))).toContain('password authentication failed');
    expect(door.connections()).toBe(1);

    const unknown = new URL(needs.url.postgres);
    unknown.pathname = '/queuebox_no_such_database';
    const missing = await startQueueBox({
      yaml: testConfigYaml({
        receiverUrl: 'http://127.0.0.1:9/hooks',
        database: { url: unknown.href, schema: schema.name },
      }),
    });
    expect(await missing.exited).toBe(1);
    expect(missing.logs.some(isWaitLine)).toBe(false);
    expect(missing.logs.at(-1)).toMatchObject({ level: 'ERROR', message: 'QueueBox could not start' });
    expect(JSON.stringify(missing.logs.at(-1))).toContain('does not exist');
  });
});
