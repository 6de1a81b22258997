/**
 * A runtime whose database role lacks a grant it needs ends its start and names the grant, instead of serving:
 * the install id (every delivered message's id names it) was read by the outbox's first claim, so a role granted
 * the outbox and the inbox alone started, answered /health ok, and failed every delivery (an outside audit).
 */
import { randomUUID } from 'node:crypto';
import { openPostgresStore } from '@queuebox/store-postgres';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { startQueueBox, testConfigYaml } from './support.ts';

const needs = await requireServices('local runtime and its role grants', ['postgres']);

describe.skipIf(needs.skipReason)("the local runtime's start and its role's grants", () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'local_grants');

  it('ends the start, naming the install table, when the role may not read it', async () => {
    // Prepare: the schema migrated by the owner; a role granted the schema, the two tables and the version table
    const owner = await openPostgresStore({ url: needs.url.postgres, schema: schema.name });
    try {
      await owner.migrate();
    } finally {
      await owner.close();
    }
    const role = `t_local_grants_${randomUUID().slice(0, 8)}`;
    await pool.query(`CREATE ROLE ${role} LOGIN`);
    try {
      const s = `"${schema.name}"`;
      await pool.query(`GRANT USAGE ON SCHEMA ${s} TO ${role}`);
      await pool.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ${s}.outbox, ${s}.inbox TO ${role}`);
      await pool.query(`GRANT SELECT ON ${s}.schema_migrations TO ${role}`);
      const url = new URL(needs.url.postgres);
      url.username = role;

      // Act
      const queuebox = await startQueueBox({
        yaml: testConfigYaml({
          receiverUrl: 'http://127.0.0.1:9/hooks',
          database: { url: url.href, schema: schema.name },
        }),
      });
      const code = await queuebox.exited;

      // Assess
      expect(code).toBe(1);
      expect(queuebox.logs.at(-1)).toMatchObject({ level: 'ERROR', message: 'QueueBox could not start' });
      expect(JSON.stringify(queuebox.logs.at(-1))).toContain(`may not read \\"${schema.name}\\".install`);
    } finally {
      await pool.query(`DROP OWNED BY ${role}`);
      await pool.query(`DROP ROLE ${role}`);
    }
  });
});
