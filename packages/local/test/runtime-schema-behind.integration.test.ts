/**
 * The local runtime reads the install id during its start (a role that may not read it ends the start, naming the
 * grant: test/local/runtime.role-grants), but a schema that is only behind starts as before: with `migrate: false`
 * during a rolling upgrade, before `npx queuebox migrate` ran, it serves, warns, and the outbox delivers nothing
 * until the migration (an outside review: the first version of the start-time read crash-looped such a start).
 */
import { parseConfig } from '@queuebox/config';
import { openPostgresStore } from '@queuebox/store-postgres';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../src/logger.ts';
import { type Runtime, startRuntime } from '../src/runtime.ts';

const needs = await requireServices('local runtime on a schema that is behind', ['postgres']);

describe.skipIf(needs.skipReason)('local runtime: migrate false on a schema without its install id', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'local_behind');
  let runtime: Runtime | undefined;

  afterEach(async () => {
    await runtime?.stop('test end');
    runtime = undefined;
  });

  it('starts, serves and warns that the outbox delivers nothing until the schema is migrated', async () => {
    // Prepare: a migrated schema whose install table is gone, as before migration 0005
    const owner = await openPostgresStore({ url: needs.url.postgres, schema: schema.name });
    try {
      await owner.migrate();
    } finally {
      await owner.close();
    }
    await pool.query(`DROP TABLE "${schema.name}".install`);
    const lines: string[] = [];

    // Act
    runtime = await startRuntime(
      parseConfig({
        database: { provider: 'postgres', url: needs.url.postgres, schema: schema.name },
        http: { port: 0, host: '127.0.0.1' },
        destinations: { sink: { type: 'http', url: 'http://127.0.0.1:9/sink' } },
        routes: [{ match: '#', destination: 'sink' }],
      }),
      {
        migrate: false,
        logger: createLogger({ write: (line) => lines.push(line) }),
        brokerConsumers: false,
        statsIntervalMs: 0,
        retentionIntervalMs: 0,
        wakeUps: false,
      },
    );
    const health = await fetch(`${runtime.url}/health`);

    // Assess
    expect(health.status).toBe(200);
    const warnings = lines.map((line) => JSON.parse(line)).filter((line) => line.level === 'WARN');
    expect(warnings).toContainEqual(
      expect.objectContaining({
        message: 'the schema is behind this QueueBox: the outbox delivers nothing until it is migrated',
        error: { message: expect.stringContaining('migration 0005 (install_id) has not run') },
      }),
    );
  });
});
