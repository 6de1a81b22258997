/**
 * The local runtime as a real process, `node packages/local/src/main.ts` (what `npm start` runs), with its JSON log
 * lines collected, and a loopback receiver that answers each delivery after a pause: for the signal tests.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const MAIN = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'main.ts');

export interface LogLine {
  readonly level?: string;
  readonly message?: string;
  readonly [field: string]: unknown;
}

export interface RuntimeProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly logs: LogLine[];
  stderr(): string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Waits (up to 30 s) until `what` holds. */
  until(what: () => boolean): Promise<void>;
  /** Kills it if it still runs, and removes its directory. */
  dispose(): Promise<void>;
}

/** Starts the runtime with `yaml` as its configuration file (nothing of the caller's `QUEUEBOX_*`). */
export async function spawnRuntime(yaml: string): Promise<RuntimeProcess> {
  const dir = await mkdtemp(join(tmpdir(), 'lfix-runtime-'));
  await writeFile(join(dir, 'queuebox.yaml'), yaml);
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && !name.startsWith('QUEUEBOX_')) env[name] = value;
  }
  env.QUEUEBOX_CONFIG = join(dir, 'queuebox.yaml');
  const child = spawn(process.execPath, [MAIN], { cwd: dir, env, stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdin.end();
  const logs: LogLine[] = [];
  let stderr = '';
  let buffered = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (text: string) => {
    buffered += text;
    for (let at = buffered.indexOf('\n'); at >= 0; at = buffered.indexOf('\n')) {
      const line = buffered.slice(0, at);
      buffered = buffered.slice(at + 1);
      try {
        logs.push(JSON.parse(line) as LogLine);
      } catch {
        stderr += `[stdout] ${line}\n`;
      }
    }
  });
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (text: string) => {
    stderr += text;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => {
    child.on('close', (code, signal) => done({ code, signal }));
  });
  return {
    child,
    logs,
    stderr: () => stderr,
    exited,
    async until(what) {
      const giveUpAt = Date.now() + 30_000;
      while (!what()) {
        if (Date.now() > giveUpAt) {
          throw new Error(`timed out; logs:\n${logs.map((l) => JSON.stringify(l)).join('\n')}\n${stderr}`);
        }
        await sleep(20);
      }
    },
    async dispose() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A receiver on 127.0.0.1 that answers 200 to each request `delayMs` after its body arrived. */
export async function slowReceiver(
  delayMs: number,
): Promise<{ url: string; received(): number; close(): void }> {
  let received = 0;
  const server: Server = createServer((request, response) => {
    received++;
    request.resume();
    request.on('end', () => setTimeout(() => response.writeHead(200).end('ok'), delayMs));
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received: () => received,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

/** A configuration with one http destination `recv` (topics `t.#`) on PostgreSQL `url`, schema `schema`. */
export function runtimeYaml(options: { url: string; schema: string; receiverUrl: string }): string {
  return [
    'http: { port: 0, host: 127.0.0.1 }',
    `database: { provider: postgres, url: "${options.url}", schema: ${options.schema} }`,
    'destinations:',
    `  recv: { type: http, url: "${options.receiverUrl}", timeoutMs: 5000 }`,
    'routes:',
    '  - { match: "t.#", destination: recv }',
    '',
  ].join('\n');
}
