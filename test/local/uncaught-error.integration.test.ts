/**
 * The last resort of the process that owns `process.exit` (`exitOnUncaughtError`, installed by `runDev`): an error
 * nothing caught is one JSON log line with the error, then exit 1. Before, Node printed its stack to stderr as plain
 * text, outside the log's shape (a reading of the process's lifecycle). Each case runs in a child process of its own.
 */
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanup, startQueueBox, tempDir, testConfigYaml } from './support.ts';

const DEV = fileURLToPath(new URL('../../packages/local/src/dev.ts', import.meta.url));

async function runChild(
  body: string,
): Promise<{ code: number | null; lines: Record<string, unknown>[]; stderr: string }> {
  const script = `import { exitOnUncaughtError } from ${JSON.stringify(DEV)};
import { createLogger } from ${JSON.stringify(DEV.replace(/dev\.ts$/, 'logger.ts'))};
exitOnUncaughtError(createLogger({ level: 'error' }));
${body}
setTimeout(() => { console.log(JSON.stringify({ message: 'still running' })); }, 2000);`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: 'pipe' });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  const lines = stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { code, lines, stderr };
}

const needs = await requireServices('local runtime: an error nothing caught', ['postgres']);

describe('an error nothing caught', () => {
  it('a rejected promise without a handler is logged as a JSON line with its error, and the process exits 1', async () => {
    // Act
    const { code, lines } = await runChild(`void Promise.reject(new Error('planted rejection'));`);

    // Assess
    expect(code).toBe(1);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 'ERROR',
      message: expect.stringContaining('unhandled promise rejection'),
      error: { message: 'planted rejection' },
    });
  });

  it('an exception thrown from a timer is logged the same way, and the process exits 1', async () => {
    // Act
    const { code, lines } = await runChild(
      `setTimeout(() => { throw new TypeError('planted throw'); }, 10);`,
    );

    // Assess
    expect(code).toBe(1);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 'ERROR',
      message: expect.stringContaining('uncaught exception'),
      error: { message: 'planted throw' },
    });
  });
});

describe.skipIf(needs.skipReason)('an error nothing caught in the runtime npm start runs', () => {
  const { schema } = usePostgresSchema(needs.url.postgres, 'local_uncaught', 1);

  afterAll(async () => {
    await cleanup();
  });

  it('is logged as a JSON line and exits 1 (runDev installs the handlers)', async () => {
    // Prepare: a preloaded module rejects a promise without a handler when the process gets SIGUSR2
    const preload = join(await tempDir(), 'reject-on-sigusr2.mjs');
    await writeFile(
      preload,
      `process.on('SIGUSR2', () => { void Promise.reject(new Error('planted in the runtime')); });\n`,
    );
    const queuebox = await startQueueBox({
      yaml: testConfigYaml({
        receiverUrl: 'http://127.0.0.1:9/none',
        database: { url: needs.url.postgres, schema: schema.name },
      }),
      env: {
        NODE_OPTIONS: `--import=${preload}`,
      },
    });
    await queuebox.waitForLog((l) => l.message === 'listening', 'listening');

    // Act
    const code = await queuebox.stop('SIGUSR2');

    // Assess
    expect(code).toBe(1);
    expect(queuebox.logs).toContainEqual(
      expect.objectContaining({
        level: 'ERROR',
        message: expect.stringContaining('unhandled promise rejection'),
        error: expect.objectContaining({ message: 'planted in the runtime' }),
      }),
    );
  });
});
