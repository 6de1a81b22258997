import { loadConfig } from '@queuebox/config';
import { embeddedMigrations, migrationsHash } from '@queuebox/store';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { createServiceCache } from '@queuebox/use-cases';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler, isAccessDenied, MigrationsMismatchError } from '../../functions/migrate.ts';
import { deployedMigrationsHash } from '../../infra/migrations.ts';
import { cleanup } from '../local/support.ts';
import { aLambdaContext, functionConfigYaml, testShell, writeConfigFile } from './support.ts';

const needs = await requireServices('function tests: migrate', ['postgres']);

/** An error as the AWS SDK throws it when IAM refuses a call. */
function anAccessDenied(): Error {
  const error = new Error('User is not authorized to perform: secretsmanager:GetSecretValue');
  error.name = 'AccessDeniedException';
  return error;
}

describe.skipIf(needs.skipReason)('migrate handler', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'functions_migrate', 1);
  const saved = { ...process.env };
  let handler: typeof import('../../functions/migrate.ts').handler;
  let configFile: string;
  let hash: string;

  beforeAll(async () => {
    // A Lambda environment holds only what infra sets; other QUEUEBOX_* variables would be read as keys.
    for (const name of Object.keys(process.env)) if (name.startsWith('QUEUEBOX_')) delete process.env[name];
    configFile = await writeConfigFile(
      functionConfigYaml({
        databaseUrl: needs.url.postgres,
        schema: schema.name,
        receiverUrl: 'http://127.0.0.1:9/hooks',
      }),
    );
    process.env.QUEUEBOX_CONFIG = configFile;
    process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
    ({ handler } = await import('../../functions/migrate.ts'));
    hash = await deployedMigrationsHash('postgres');
  });

  afterAll(async () => {
    process.env = saved;
    await cleanup();
  });

  it('receives from infra the hash of exactly the migrations it embeds', async () => {
    expect(hash).toBe(migrationsHash(await embeddedMigrations('postgres')));
  });

  it('refuses a deploy whose migrations hash differs from what the bundle embeds, and migrates nothing', async () => {
    // Act
    const attempt = handler({ trigger: 'deploy', migrationsHash: 'f'.repeat(64) }, aLambdaContext());

    // Assess
    await expect(attempt).rejects.toBeInstanceOf(MigrationsMismatchError);
    await expect(attempt).rejects.toThrow(/bundle and the deploy disagree/);
    const tables = await pool.query(
      `SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = $1`,
      [schema.name],
    );
    expect(tables.rows[0].n).toBe(0);
  });

  it('applies every migration on the first deploy and answers the report', async () => {
    const report = await handler({ trigger: 'deploy', migrationsHash: hash }, aLambdaContext());

    expect(report.applied.length).toBeGreaterThan(0);
    expect(report.current).toBe(report.applied.at(-1)?.version);
    const tables = await pool.query(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`,
      [schema.name],
    );
    expect(tables.rows.map((r) => r.table_name)).toEqual(expect.arrayContaining(['inbox', 'outbox']));
  });

  it('has nothing to apply on the next invocation (warm container)', async () => {
    const report = await handler({ trigger: 'deploy', migrationsHash: hash }, aLambdaContext());

    expect(report.applied).toEqual([]);
    expect(report.current).toBeGreaterThan(0);
  });

  it('survives IAM propagation: AccessDenied while loading is retried a bounded number of times', async () => {
    // Prepare: the role policy takes effect after two refusals.
    let refusals = 2;
    const { logger, metrics } = testShell(configFile);
    const flaky = createHandler({
      logger,
      metrics,
      createCache: (options) =>
        createServiceCache({
          ...options,
          loadConfig: async () => {
            if (refusals-- > 0)
              throw new Error('loading the configuration failed', { cause: anAccessDenied() });
            return loadConfig({ env: { QUEUEBOX_CONFIG: configFile } });
          },
        }),
      accessDeniedDelayMs: 10,
    });
    const never = createHandler({
      logger,
      metrics,
      createCache: (options) =>
        createServiceCache({
          ...options,
          loadConfig: async () => {
            throw anAccessDenied();
          },
        }),
      accessDeniedAttempts: 3,
      accessDeniedDelayMs: 10,
    });

    // Act
    const report = await flaky({ trigger: 'deploy', migrationsHash: hash }, aLambdaContext());
    const refused = never({ trigger: 'deploy', migrationsHash: hash }, aLambdaContext());

    // Assess
    expect(refusals).toBe(-1);
    expect(report.current).toBeGreaterThan(0);
    await expect(refused).rejects.toThrow(/not authorized/);
    expect(isAccessDenied(new Error('x', { cause: anAccessDenied() }))).toBe(true);
    expect(isAccessDenied(new Error('connection refused'))).toBe(false);
  });
});
