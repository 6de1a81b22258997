/**
 * The local runtime warns when a relay forward waited for outbox key locks an application's open transaction held
 * (`RelayDrainReport.keyWaitMs`, at least a second): one WARN line with the wait and a hint, where before an
 * operator saw only an advisory-lock wait in pg_stat_activity. In this process, on a real PostgreSQL. The rate limit
 * is key-wait-warning.test.ts's.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { parseConfig } from '@queuebox/config';
import { MessageState } from '@queuebox/core';
import { KEY_WAIT_WARNING } from '@queuebox/inbox';
import { createPgExecutor, createPostgresOutboxStore } from '@queuebox/store-postgres';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../src/logger.ts';
import { type Runtime, startRuntime } from '../src/runtime.ts';

const needs = await requireServices('local runtime key wait test', ['postgres']);

describe.skipIf(needs.skipReason)(
  'local runtime: a relay forward held by an open application transaction',
  () => {
    const { pool, schema } = usePostgresSchema(needs.url.postgres, 'local_key_wait', 2);
    let runtime: Runtime | undefined;

    afterEach(async () => {
      await runtime?.stop('test end');
      runtime = undefined;
    });

    it('logs one WARN with how long the forward waited and what holds it', async () => {
      // Prepare: a runtime with the push source `hooks` (no route matches its topic: its outbox rows go dead).
      const lines: string[] = [];
      runtime = await startRuntime(
        parseConfig({
          database: { provider: 'postgres', url: needs.url.postgres, schema: schema.name },
          http: { port: 0, host: '127.0.0.1' },
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
          routes: [{ match: 'nothing.routes.here', destination: 'sink' }],
        }),
        {
          logger: createLogger({ write: (line) => lines.push(line) }),
          brokerConsumers: false,
          statsIntervalMs: 0,
          retentionIntervalMs: 0,
          wakeUps: false,
        },
      );
      // The application enqueues a row of key `order-7` in a transaction that stays open 1.5 s.
      let inserted = () => {};
      const ready = new Promise<void>((resolve) => {
        inserted = resolve;
      });
      const committed = createPgExecutor(pool).transaction(async (tx) => {
        await createPostgresOutboxStore({ executor: tx, schema: schema.name }).insert([
          { topic: 'app', key: 'order-7', payload: {}, maxAttempts: 1 },
        ]);
        inserted();
        await sleep(1_500);
      });
      await Promise.race([ready, committed]);

      // Act: a webhook of the same aggregate id is stored and the relay woken, as the ingestion does.
      const stored = await runtime.store.inbox.store({
        source: 'hooks',
        idempotencyKey: 'w1',
        eventType: 'e',
        aggregateId: 'order-7',
        correlationId: null,
        payload: {},
        headers: {},
        maxAttempts: 3,
      });
      runtime.wakeRelay();
      await committed;
      const until = Date.now() + 10_000;
      while ((await runtime.store.inbox.get(stored.id))?.state !== MessageState.Sent && Date.now() < until) {
        await sleep(50);
      }
      await sleep(200);

      // Assess: forwarded after the commit, and said once, by the relay.
      const warnings = lines
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .filter((line) => line.message === KEY_WAIT_WARNING.message);
      expect((await runtime.store.inbox.get(stored.id))?.state).toBe(MessageState.Sent);
      expect(warnings).toEqual([
        expect.objectContaining({ level: 'WARN', component: 'relay', hint: KEY_WAIT_WARNING.hint }),
      ]);
      expect(warnings[0]?.waitedMs).toBeGreaterThanOrEqual(1_000);
    });
  },
);
