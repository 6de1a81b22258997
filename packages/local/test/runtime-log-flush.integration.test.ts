/**
 * The runtime's stop writes what its log throttle still counts: refused webhooks of the last minute (the first is
 * written at once, the others counted) end in one line with their count instead of being dropped (an outside review).
 */
import { parseConfig } from '@queuebox/config';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { expect, it } from 'vitest';
import { createLogger } from '../src/logger.ts';
import { startRuntime } from '../src/runtime.ts';

const needs = await requireServices('local runtime log flush', ['postgres']);

const { schema } = usePostgresSchema(needs.url.postgres, 'local_log_flush', 1);

it.skipIf(needs.skipReason)('writes the count of the refusals it throttled when it stops', async () => {
  const lines: Record<string, unknown>[] = [];
  const runtime = await startRuntime(
    parseConfig({
      database: { provider: 'postgres', url: needs.url.postgres, schema: schema.name },
      http: { port: 0, host: '127.0.0.1' },
      sources: {
        hooks: {
          type: 'http',
          path: 'hooks',
          auth: { scheme: 'bearer', secrets: ['a-sixteen-char-token'] },
          topic: 'hooks',
          idempotencyKey: { path: '$.id' },
        },
      },
    }),
    {
      logger: createLogger({ level: 'info', write: (line) => lines.push(JSON.parse(line)) }),
      brokerConsumers: false,
      statsIntervalMs: 0,
      retentionIntervalMs: 0,
    },
  );
  let stopped = false;
  try {
    for (let i = 0; i < 4; i++) {
      const answer = await fetch(`${runtime.url}/inbox/hooks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ id: `r-${i}` }),
      });
      expect(answer.status).toBe(401);
    }
    expect(lines.filter((l) => l.message === 'inbox request refused')).toHaveLength(1);
    stopped = true;
    await runtime.stop('test end');
  } finally {
    if (!stopped) await runtime.stop('test end');
  }
  const refused = lines.filter((l) => l.message === 'inbox request refused');
  expect(refused).toHaveLength(2);
  expect(refused[1]).toEqual(expect.objectContaining({ source: 'hooks', status: 401, repeated: 3 }));
});
