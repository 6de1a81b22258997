/**
 * `npm start` as a container runs it (`CMD ["npm", "start"]`: npm is PID 1, and Kubernetes, ECS and `docker stop`
 * send it SIGTERM). npm forwards the signal to its child, the shell it runs the script in; Debian's sh (dash) does
 * not pass it on, so the runtime never heard it: npm exited 143 at once, the runtime ran on orphaned, and in a
 * container it would have been killed with PID 1 — every rolling restart a kill -9 (an outside audit of replicas).
 * The script now `exec`s node, so the signal reaches the runtime, which stops as on a direct SIGTERM.
 */
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { baseUrlOf, cleanup, startQueueBox, testConfigYaml } from './support.ts';

const needs = await requireServices('local runtime: npm start and signals', ['postgres']);

describe.skipIf(needs.skipReason)('npm start and SIGTERM', () => {
  const { schema } = usePostgresSchema(needs.url.postgres, 'local_npm_signal', 1);

  afterAll(async () => {
    await cleanup();
  });

  it('a SIGTERM sent to npm stops the runtime gracefully, and npm exits with its 0', async () => {
    // Prepare
    const queuebox = await startQueueBox({
      viaNpm: true,
      yaml: testConfigYaml({
        receiverUrl: 'http://127.0.0.1:9/none',
        database: { url: needs.url.postgres, schema: schema.name },
      }),
    });
    const base = await baseUrlOf(queuebox);

    // Act
    const code = await queuebox.stop('SIGTERM');

    // Assess: the runtime's own stop lines, then npm's exit with the runtime's code; the port is closed
    expect(queuebox.logs.map((l) => l.message)).toEqual(expect.arrayContaining(['shutting down', 'stopped']));
    expect(code).toBe(0);
    await expect(fetch(`${base}/health`)).rejects.toThrow();
  });
});
