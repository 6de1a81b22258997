/**
 * SIGTERM during a short outage of the database (a failover, a restart; a rolling deploy at the same moment): the
 * rows already delivered are settled once the database is back, within the stop's bound, instead of being left
 * processing for their lease (5 minutes) and delivered again while the process reported a clean stop.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { openPostgresStore } from '@queuebox/store-postgres';
import { dropSchemasAfterPass, requireServices } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { startPgProxy } from '../../outbox/test/support/pg-proxy.ts';
import { runtimeYaml, slowReceiver, spawnRuntime } from './support/runtime-process.ts';

const needs = await requireServices('local runtime: a stop during a database outage', ['postgres']);
const SCHEMA = `lfix_stop_outage_${randomBytes(4).toString('hex')}`;

describe.skipIf(needs.skipReason)('the runtime stopped during a database outage', () => {
  dropSchemasAfterPass(() => [SCHEMA], needs.url.postgres);

  it('settles the rows it delivered once the database is back, and exits 0', async () => {
    // Prepare: the runtime reaches PostgreSQL through a proxy; the receiver answers each delivery after 1.5 s.
    const proxy = await startPgProxy(needs.url.postgres);
    const receiver = await slowReceiver(1_500);
    const runtime = await spawnRuntime(
      runtimeYaml({ url: proxy.url, schema: SCHEMA, receiverUrl: receiver.url }),
    );
    const store = await openPostgresStore({ url: needs.url.postgres, schema: SCHEMA });
    try {
      await runtime.until(() => runtime.logs.some((l) => l.message === 'listening'));
      const ids = await store.outbox.insert(
        Array.from({ length: 5 }, (_, i) => ({
          topic: 't.x',
          key: null,
          payload: { i },
          headers: {},
          maxAttempts: 5,
        })),
      );
      await runtime.until(() => receiver.received() === 5);

      // Act: the database goes away, SIGTERM 0.3 s later, the database is back after 3 s.
      proxy.down();
      await sleep(300);
      runtime.child.kill('SIGTERM');
      await sleep(2_700);
      await proxy.up();
      const exit = await runtime.exited;

      // Assess: delivered once, settled sent; a clean stop.
      const rows = await Promise.all(ids.map((id) => store.outbox.get(id)));
      expect(rows.map((row) => row?.state)).toEqual(['Sent', 'Sent', 'Sent', 'Sent', 'Sent']);
      expect(receiver.received()).toBe(5);
      expect(exit).toEqual({ code: 0, signal: null });
      expect(runtime.logs.find((l) => l.message === 'stopped')).toMatchObject({ clean: true });
    } finally {
      await runtime.dispose();
      await store.close();
      proxy.close();
      receiver.close();
    }
  });
});
