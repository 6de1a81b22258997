/**
 * A stop whose store or publishers never close (`startRuntime` in this process, on a real PostgreSQL store whose
 * `close()` alone is made to hang, as a connection stuck on a server that went silent would, or with a publisher
 * whose close hangs). The stop used to await both closes without a bound, so it never resolved; now they are
 * bounded by the shutdown timeout, a warning names what did not close, and the stop resolves `false` (not clean).
 */

import { parseConfig } from '@queuebox/config';
import { type LogFields, type Logger, type Publisher, type Store, silentLogger } from '@queuebox/core';
import { openStore } from '@queuebox/store';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { type Runtime, startRuntime } from '../src/runtime.ts';

const needs = await requireServices('local runtime store close stop test', ['postgres']);

/** The shutdown timeout of the runtime under test. */
const SHUTDOWN_TIMEOUT_MS = 1_000;

/** A logger that keeps its warnings (children included) and drops everything else. */
function warningsLogger(): { logger: Logger; warnings: { message: string; fields?: LogFields }[] } {
  const warnings: { message: string; fields?: LogFields }[] = [];
  const logger: Logger = {
    ...silentLogger,
    warn: (message, fields) => {
      warnings.push({ message, ...(fields ? { fields } : {}) });
    },
    child: () => logger,
  };
  return { logger, warnings };
}

describe.skipIf(needs.skipReason)('local runtime stop with a store whose close hangs', () => {
  const { schema } = usePostgresSchema(needs.url.postgres, 'local_close_stop', 1);
  let runtime: Runtime | undefined;
  let real: Store | undefined;

  afterEach(async () => {
    // The real store under the hanging wrapper still holds its pool (closed already when the publisher hung).
    await real?.close().catch(() => undefined);
    real = undefined;
  });

  it.each([{ hangs: 'store' as const }, { hangs: 'publishers' as const }])(
    'resolves within its shutdown timeout, not clean, and warns when the $hangs did not close',
    async ({ hangs }) => {
      // Prepare: a runtime with one source, its store a real PostgreSQL store; the store's or the publisher's close()
      // never resolves.
      const never = () => new Promise<void>(() => {});
      const hangingPublisher: Publisher = {
        publish: async () => ({ status: 'sent' }) as never,
        close: never,
      };
      const { logger, warnings } = warningsLogger();
      runtime = await startRuntime(
        parseConfig({
          database: { provider: 'postgres', url: needs.url.postgres, schema: schema.name },
          http: { port: 0, host: '127.0.0.1' },
          inbox: { relay: { enabled: false } },
          sources: {
            hooks: {
              type: 'http',
              path: 'hooks',
              auth: { scheme: 'none' },
              topic: 'hooks',
              idempotencyKey: { path: '$.id' },
            },
          },
          destinations: { sink: { type: 'http', url: 'http://127.0.0.1:9/sink' } },
          routes: [{ match: '#', destination: 'sink' }],
        }),
        {
          logger,
          brokerConsumers: false,
          statsIntervalMs: 0,
          retentionIntervalMs: 0,
          wakeUps: false,
          shutdownTimeoutMs: SHUTDOWN_TIMEOUT_MS,
          ...(hangs === 'publishers' ? { publisherFactories: { http: () => hangingPublisher } } : {}),
          openStore: async (database) => {
            real = await openStore(database);
            return hangs === 'store' ? { ...real, close: never } : real;
          },
        },
      );
      await runtime.store.ping();

      // Act: stop, giving up (as a failure) well after the store's close should have been cut short.
      const startedAt = Date.now();
      const outcome = await Promise.race([
        runtime.stop('test'),
        new Promise<'still waiting'>((resolve) => setTimeout(() => resolve('still waiting'), 8_000)),
      ]);
      const stopMs = Date.now() - startedAt;

      // Assess: resolved, not clean, within the work's and the close's bounds, with a warning about the store.
      expect(outcome).toBe(false);
      expect(stopMs).toBeLessThan(2 * SHUTDOWN_TIMEOUT_MS + 2_000);
      expect(warnings).toContainEqual({
        message: `shutdown timeout: the ${hangs} did not close in time; stopping anyway`,
        fields: { timeoutMs: SHUTDOWN_TIMEOUT_MS, notClosed: [hangs] },
      });
    },
    30_000,
  );
});
