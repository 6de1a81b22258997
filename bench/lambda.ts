/**
 * Lambda bundles: size per function and cold initialisation (issue 7's benchmark).
 *
 *   npx tsx bench/lambda.ts
 *
 * Bundles every `functions/*.ts` with the deployment's esbuild settings and plugins (scripts/check-bundles.ts,
 * infra/functions-plan.ts FUNCTION_BUNDLE) into `.queuebox/bench-lambda/`, prints each bundle's size and what dominates it (esbuild
 * metafile, bytes in the output per package), then starts fresh Node processes (the Node running this script,
 * which must be 24) that import one bundle each, as the Lambda runtime does, and time the import (wall clock, and
 * the process's CPU time, which other jobs on the machine disturb less). inbox-http then
 * handles a real-shaped API Gateway HTTP API (payload 2.0) event against the local PostgreSQL (default
 * `postgres://postgres@127.0.0.1:5432/test`, or `QUEUEBOX_BENCH_POSTGRES_URL`) in a fresh schema that is dropped
 * at the end; the time from the start of the import to the handler's answer is the cold initialisation figure.
 * `QUEUEBOX_BENCH_RUNS` (default 5) fresh processes per function. Targets: inbox-http < 1.5 MB and < 300 ms.
 */
import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { openStore } from '@queuebox/store';
import { build, type Metafile } from 'esbuild';
import pg from 'pg';
import { deploymentBuildOptions, deploymentPlugins, functionEntries } from '../scripts/check-bundles.ts';
import { machineLine, median } from './support/machine.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const OUTDIR = join(ROOT, '.queuebox', 'bench-lambda');
const DATABASE_URL = process.env.QUEUEBOX_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const RUNS = Number(process.env.QUEUEBOX_BENCH_RUNS ?? 5);
const TARGET_BYTES = 1.5 * 1024 * 1024;
const TARGET_MS = 300;

/** Bundles as scripts/check-bundles.ts does (FUNCTION_BUNDLE and its plugins), written out, metafile kept. */
async function bundle(): Promise<Metafile> {
  await rm(OUTDIR, { recursive: true, force: true });
  const plugins = await deploymentPlugins(ROOT);
  const result = await build({
    ...deploymentBuildOptions(ROOT, functionEntries(ROOT), plugins),
    write: true,
    outdir: OUTDIR,
  });
  return result.metafile;
}

/** The package an input path belongs to: `pg`, `@smithy/core`, `@queuebox/store-postgres`, … */
function packageOf(input: string): string {
  const modules = input.lastIndexOf('node_modules/');
  if (modules >= 0) {
    const parts = input.slice(modules + 'node_modules/'.length).split('/');
    return parts[0]?.startsWith('@') ? `${parts[0]}/${parts[1]}` : (parts[0] ?? input);
  }
  const local = /^(packages|functions)\/([^/]+)/.exec(input);
  if (local) return local[1] === 'packages' ? `@queuebox/${local[2]}` : 'functions/';
  return input;
}

/** The largest packages of one output, by bytes they put into it. */
function dominating(output: Metafile['outputs'][string], count = 5): string {
  const byPackage = new Map<string, number>();
  for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
    const name = packageOf(input);
    byPackage.set(name, (byPackage.get(name) ?? 0) + bytesInOutput);
  }
  return [...byPackage]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([name, bytes]) => `${name} ${(bytes / 1024).toFixed(0)}`)
    .join(', ');
}

/** The program each fresh process runs: plain JavaScript, no tsx, as close to the Lambda runtime as Node gets. */
const CHILD = `
const started = performance.now();
const cpuStart = process.cpuUsage();
const cpuMs = () => { const used = process.cpuUsage(cpuStart); return (used.user + used.system) / 1000; };
const [bundlePath, eventJson] = process.argv.slice(2);
const mod = await import(bundlePath);
const imported = performance.now();
const importCpuMs = cpuMs();
let answered = null;
let firstCpuMs = null;
let status = null;
if (eventJson) {
  const deadline = Date.now() + 29000;
  const context = {
    callbackWaitsForEmptyEventLoop: true, functionName: 'queuebox-bench-InboxHttp', functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:queuebox-bench-InboxHttp',
    memoryLimitInMB: '512', awsRequestId: crypto.randomUUID(), logGroupName: '/aws/lambda/queuebox-bench-InboxHttp',
    logStreamName: 'bench', getRemainingTimeInMillis: () => deadline - Date.now(),
    done() {}, fail() {}, succeed() {},
  };
  const answer = await mod.handler(JSON.parse(eventJson), context);
  answered = performance.now();
  firstCpuMs = cpuMs();
  status = answer.statusCode;
  if (status >= 400) throw new Error("inbox-http answered " + status + ": " + answer.body);
}
const result = { importMs: imported - started, firstResponseMs: answered === null ? null : answered - started, importCpuMs, firstCpuMs, status };
process.stdout.write('\\n' + JSON.stringify({ bench: result }) + '\\n');
process.exit(0);
`;

interface ChildResult {
  readonly importMs: number;
  readonly firstResponseMs: number | null;
  /** CPU time (user + system, all threads) of the import, and of import + first event: less sensitive to other load. */
  readonly importCpuMs: number;
  readonly firstCpuMs: number | null;
  readonly status: number | null;
  /** Spawn to exit, Node's own start included. */
  readonly wallMs: number;
}

async function runChild(
  script: string,
  bundlePath: string,
  env: Record<string, string>,
  event?: unknown,
): Promise<ChildResult> {
  const args = [script, pathToFileURL(bundlePath).href, ...(event ? [JSON.stringify(event)] : [])];
  const started = performance.now();
  const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString('utf8');
  });
  child.stderr.on('data', (chunk: Buffer) => {
    err += chunk.toString('utf8');
  });
  const code = await new Promise<number | null>((done) => child.on('exit', done));
  const wallMs = performance.now() - started;
  const line = out.split('\n').find((l) => l.startsWith('{"bench":'));
  if (code !== 0 || !line) {
    throw new Error(`bench/lambda: ${bundlePath} exited ${code}: ${err.slice(0, 2000)}${out.slice(-2000)}`);
  }
  return { ...(JSON.parse(line) as { bench: Omit<ChildResult, 'wallMs'> }).bench, wallMs };
}

/** An API Gateway HTTP API event (payload 2.0) carrying one webhook to source `bench`. */
function aWebhookEvent(): unknown {
  const body = JSON.stringify({ type: 'order.created', data: { id: randomUUID() } });
  const now = new Date();
  return {
    version: '2.0',
    routeKey: 'POST /inbox/{source}',
    rawPath: '/inbox/bench',
    rawQueryString: '',
    headers: {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      host: 'abc123.execute-api.eu-west-1.amazonaws.com',
      'user-agent': 'Stripe/1.0 (+https://stripe.com/docs/webhooks)',
      'idempotency-key': randomUUID(),
      'x-forwarded-for': '203.0.113.7',
      'x-forwarded-proto': 'https',
    },
    pathParameters: { source: 'bench' },
    requestContext: {
      accountId: '123456789012',
      apiId: 'abc123',
      domainName: 'abc123.execute-api.eu-west-1.amazonaws.com',
      domainPrefix: 'abc123',
      http: {
        method: 'POST',
        path: '/inbox/bench',
        protocol: 'HTTP/1.1',
        sourceIp: '203.0.113.7',
        userAgent: 'Stripe/1.0',
      },
      requestId: randomUUID(),
      routeKey: 'POST /inbox/{source}',
      stage: '$default',
      time: now.toUTCString(),
      timeEpoch: now.getTime(),
    },
    body: Buffer.from(body).toString('base64'),
    isBase64Encoded: true,
  };
}

const ms = (n: number) => `${n.toFixed(0)} ms`;

async function main(): Promise<void> {
  const major = Number(process.versions.node.split('.')[0]);
  if (major < 24) throw new Error(`bench/lambda needs Node 24 (the Lambda runtime), not ${process.version}`);
  console.log(
    `bench/lambda: ${machineLine()}, Node ${process.version}, ${RUNS} fresh processes per function`,
  );

  const metafile = await bundle();
  const entries = functionEntries(ROOT);
  console.log('\nbundle sizes (minified ESM, @aws-sdk/* external), largest packages in KiB:');
  const sizes = new Map<string, number>();
  for (const entry of entries) {
    const [path, output] =
      Object.entries(metafile.outputs).find(([, o]) => o.entryPoint === entry) ??
      (() => {
        throw new Error(`no output for ${entry}`);
      })();
    sizes.set(entry, output.bytes);
    const mark = output.bytes < TARGET_BYTES ? '' : '  (over 1.5 MB)';
    console.log(
      `  ${entry.padEnd(30)} ${(output.bytes / 1024 / 1024).toFixed(2)} MB${mark}  ${dominating(output)}  [${path}]`,
    );
  }

  const schema = `bench_lambda_${randomBytes(4).toString('hex')}`;
  const store = await openStore({ provider: 'postgres', url: DATABASE_URL, schema, poolSize: 1 });
  const script = join(OUTDIR, 'cold-start.mjs');
  try {
    await store.migrate();
    await mkdir(OUTDIR, { recursive: true });
    await writeFile(script, CHILD);
    const config = join(OUTDIR, 'queuebox.yaml');
    await writeFile(
      config,
      `database:\n  url: ${JSON.stringify(DATABASE_URL)}\n  schema: ${schema}\n  poolSize: 1\nsources:\n  bench:\n    type: http\n    auth: { scheme: none }\n    eventTypePath: $.type\n    topic: "bench.{{ eventType }}"\nlogLevel: warn\n`,
    );
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      QUEUEBOX_CONFIG: config,
      POWERTOOLS_SERVICE_NAME: 'queuebox-bench',
      POWERTOOLS_METRICS_NAMESPACE: 'QueueBox',
      POWERTOOLS_LOG_LEVEL: 'WARN',
      AWS_REGION: 'eu-west-1',
      AWS_LAMBDA_FUNCTION_NAME: 'queuebox-bench',
      NODE_ENV: 'production',
    };

    console.log('\ncold initialisation, median of fresh processes (min–max):');
    for (const entry of entries) {
      const name = entry.replace(/^functions\/|\.ts$/g, '');
      const bundlePath = join(OUTDIR, `${name}.mjs`);
      const isInbox = name === 'inbox-http';
      const results: ChildResult[] = [];
      for (let i = 0; i < RUNS; i++) {
        results.push(await runChild(script, bundlePath, env, isInbox ? aWebhookEvent() : undefined));
      }
      const imports = results.map((r) => r.importMs);
      const walls = results.map((r) => r.wallMs);
      let line = `  ${name.padEnd(18)} import ${ms(median(imports))} (${ms(Math.min(...imports))}–${ms(Math.max(...imports))}), CPU ${ms(median(results.map((r) => r.importCpuMs)))}`;
      if (isInbox) {
        const firsts = results.map((r) => r.firstResponseMs ?? Number.NaN);
        const statuses = [...new Set(results.map((r) => r.status))].join('/');
        line += `, import + first event ${ms(median(firsts))} (${ms(Math.min(...firsts))}–${ms(Math.max(...firsts))}), CPU ${ms(median(results.map((r) => r.firstCpuMs ?? Number.NaN)))}, status ${statuses}`;
        const verdict = median(firsts) < TARGET_MS ? 'meets' : 'misses';
        const size = sizes.get(entry) ?? 0;
        line += `\n  ${''.padEnd(18)} inbox-http ${verdict} the ${TARGET_MS} ms target; bundle ${(size / 1024 / 1024).toFixed(2)} MB ${size < TARGET_BYTES ? 'meets' : 'misses'} the 1.5 MB target`;
      }
      line += `; process spawn to exit ${ms(median(walls))}`;
      console.log(line);
    }
    console.log(`\nload average after: ${machineLine()}`);
  } finally {
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.end();
    await store.close();
  }
}

await main();
