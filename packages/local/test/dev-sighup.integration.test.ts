/**
 * SIGHUP (a closed terminal or SSH session, `kill -HUP` meant as a reload) stops the runtime as gracefully as
 * SIGTERM: the deliveries in flight finish and settle, instead of the default disposition killing the process and
 * leaving them processing for their lease (to be delivered again). The real `node packages/local/src/main.ts`.
 */
import { randomBytes } from 'node:crypto';
import { openPostgresStore } from '@queuebox/store-postgres';
import { dropSchemasAfterPass, requireServices } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { runtimeYaml, slowReceiver, spawnRuntime } from './support/runtime-process.ts';

const needs = await requireServices('local runtime: SIGHUP', ['postgres']);
const SCHEMA = `lfix_sighup_${randomBytes(4).toString('hex')}`;

describe.skipIf(needs.skipReason)('the runtime on SIGHUP', () => {
  dropSchemasAfterPass(() => [SCHEMA], needs.url.postgres);

  it('stops gracefully, settling the deliveries in flight, and says the configuration is not reloaded', async () => {
    // Prepare: a receiver that answers each delivery after 1 s, and the runtime on PostgreSQL.
    const receiver = await slowReceiver(1_000);
    const runtime = await spawnRuntime(
      runtimeYaml({ url: needs.url.postgres, schema: SCHEMA, receiverUrl: receiver.url }),
    );
    const store = await openPostgresStore({ url: needs.url.postgres, schema: SCHEMA });
    try {
      await runtime.until(() => runtime.logs.some((l) => l.message === 'listening'));
      const ids = await store.outbox.insert(
        [1, 2, 3].map((i) => ({ topic: 't.x', key: null, payload: { i }, headers: {}, maxAttempts: 5 })),
      );
      await runtime.until(() => receiver.received() === 3);

      // Act
      runtime.child.kill('SIGHUP');
      const exit = await runtime.exited;

      // Assess: a graceful stop (exit 0, clean), with the line about the reload, and every delivery settled sent.
      expect({ exit, stderr: runtime.stderr() }).toEqual({ exit: { code: 0, signal: null }, stderr: '' });
      expect(runtime.logs.some((l) => /does not reload its configuration/.test(l.message ?? ''))).toBe(true);
      expect(runtime.logs.find((l) => l.message === 'stopped')).toMatchObject({ clean: true });
      const rows = await Promise.all(ids.map((id) => store.outbox.get(id)));
      expect(rows.map((row) => row?.state)).toEqual(['Sent', 'Sent', 'Sent']);
      expect(receiver.received()).toBe(3);
    } finally {
      await runtime.dispose();
      await store.close();
      receiver.close();
    }
  });
});
