/**
 * The `queuebox` CLI as a real process: `migrate` on a real PostgreSQL (fresh schema), `config check` with secrets
 * redacted, and the exit codes 0 / 1 / 2.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanup, runQueueBoxCli, TEST_SECRET, tempDir, testConfigYaml } from './support.ts';

const needs = await requireServices('queuebox cli tests: migrate', ['postgres']);

afterAll(async () => {
  await cleanup();
});

describe.skipIf(needs.skipReason)('queuebox migrate (PostgreSQL)', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'local_cli', 1);

  it('applies the migrations once, then has nothing to do', async () => {
    const cwd = await tempDir();
    const env = { QUEUEBOX_DATABASE__URL: needs.url.postgres, QUEUEBOX_DATABASE__SCHEMA: schema.name };

    const first = await runQueueBoxCli(['migrate', '--json'], { cwd, env });
    const second = await runQueueBoxCli(['migrate'], { cwd, env });

    expect(first.code, first.stderr).toBe(0);
    const report = JSON.parse(first.stdout) as { ok: boolean; applied: string[]; version: number };
    expect(report.ok).toBe(true);
    expect(report.applied.length).toBeGreaterThan(0);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toContain(`Nothing to migrate; schema ${schema.name} (postgres) is at version`);
    const { rows } = await pool.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`,
      [schema.name],
    );
    expect(rows.map((r) => r.table_name)).toEqual(expect.arrayContaining(['inbox', 'outbox']));
  });

  it('shows each migration as it goes (plain lines on stderr when not a terminal)', async () => {
    const cwd = await tempDir();
    const progressSchema = `${schema.name}_progress`;
    const env = { QUEUEBOX_DATABASE__URL: needs.url.postgres, QUEUEBOX_DATABASE__SCHEMA: progressSchema };
    try {
      const run = await runQueueBoxCli(['migrate'], { cwd, env });

      expect(run.code, run.stderr).toBe(0);
      expect(run.stderr).toMatch(/^applying migration 1\/\d+: 0001_init$/m);
      expect(run.stderr).toMatch(/^applied migration 1\/\d+: 0001_init$/m);
      expect(run.stdout).toContain('Applied 0001_init');
    } finally {
      await pool.query(`DROP SCHEMA IF EXISTS "${progressSchema}" CASCADE`);
    }
  });
});

describe('queuebox config check', () => {
  it('prints the validated configuration with every secret redacted', async () => {
    const cwd = await tempDir();
    await writeFile(join(cwd, 'queuebox.yaml'), testConfigYaml({ receiverUrl: 'http://127.0.0.1:9/hooks' }));

    const result = await runQueueBoxCli(['config', 'check', '--json'], { cwd });

    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).not.toContain(TEST_SECRET);
    const { config } = JSON.parse(result.stdout) as {
      config: { sources: { demo: { auth: { secrets: string[] } } }; http: { port: number } };
    };
    expect(config.sources.demo.auth.secrets).toEqual(['***']);
    expect(config.http.port).toBe(0);
  });

  it('warns when one route can match the topics of several sources (issue 13), and still exits 0', async () => {
    const cwd = await tempDir();
    await writeFile(
      join(cwd, 'queuebox.yaml'),
      `sources:
  stripe: { type: http, auth: { scheme: stripe, secrets: [whsec_x] } }
  partner: { type: http, auth: { scheme: bearer, secrets: [t] }, eventTypePath: $.type }
destinations:
  payments: { type: http, url: "https://pay.example/hooks?token=q5-secret" }
routes:
  - { match: "charge.*", destination: payments }
`,
    );

    const result = await runQueueBoxCli(['config', 'check'], { cwd });

    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain(
      'warning: routes[0].match "charge.*" can match topics of the sources stripe, partner',
    );
    expect(result.stdout).not.toContain('q5-secret');
  });

  it('exits 1 and names the problem for an invalid configuration', async () => {
    const cwd = await tempDir();
    await writeFile(join(cwd, 'bad.yaml'), 'outbox:\n  maxAtempts: 3\n');

    const result = await runQueueBoxCli(['config', 'check', '--config', 'bad.yaml', '--json'], { cwd });

    expect(result.code).toBe(1);
    const answer = JSON.parse(result.stdout) as { ok: boolean; issues: { path: string }[] };
    expect(answer.ok).toBe(false);
    expect(answer.issues.map((i) => i.path)).toContain('outbox.maxAtempts');
  });

  it('exits 2 on bad usage', async () => {
    const cwd = await tempDir();

    const result = await runQueueBoxCli(['config', 'fix'], { cwd });

    expect(result.code).toBe(2);
    expect(result.stderr).toContain('unknown command "config fix"');
  });
});
