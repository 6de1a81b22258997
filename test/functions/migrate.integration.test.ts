import { AccessDeniedException, BadRequestException, ForbiddenException } from '@aws-sdk/client-rds-data';
import { loadConfig } from '@queuebox/config';
import type { Store } from '@queuebox/core';
import { embeddedMigrations, migrationsHash, openStore } from '@queuebox/store';
import { translateDataApiError } from '@queuebox/store-postgres';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { createServiceCache } from '@queuebox/use-cases';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler, isAccessDenied, MigrationsMismatchError } from '../../functions/migrate.ts';
import { deployedMigrationsHash } from '../../infra/migrations.ts';
import { cleanup } from '../local/support.ts';
import {
  aLambdaContext,
  functionConfigYaml,
  RecordingMetrics,
  type TestShell,
  testShell,
  writeConfigFile,
} from './support.ts';

const needs = await requireServices('function tests: migrate', ['postgres']);

/** An error as the AWS SDK throws it when IAM refuses a call. */
function anAccessDenied(): Error {
  const error = new Error('User is not authorized to perform: secretsmanager:GetSecretValue');
  error.name = 'AccessDeniedException';
  return error;
}

const ROLE = 'arn:aws:sts::123456789012:assumed-role/queuebox-prod-MigrateRole/queuebox-prod-Migrate';
const DB_SECRET = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:DatabaseSecret-AbCdEf';

/** The RDS Data API's refusals as `@aws-sdk/client-rds-data` throws them, by exception name. */
const dataApiRefusal = {
  AccessDeniedException: () =>
    new AccessDeniedException({
      message: `User: ${ROLE} is not authorized to perform: rds-data:ExecuteStatement on resource: arn:aws:rds:eu-west-1:123456789012:cluster:queuebox-prod`,
      $metadata: { httpStatusCode: 403 },
    }),
  BadRequestException: () =>
    new BadRequestException({
      message: `User: ${ROLE} is not authorized to perform: secretsmanager:GetSecretValue on resource: ${DB_SECRET} because no identity-based policy allows the secretsmanager:GetSecretValue action`,
      $metadata: { httpStatusCode: 400 },
    }),
  ForbiddenException: () =>
    new ForbiddenException({
      message: `User: ${ROLE} is not authorized to perform: secretsmanager:GetSecretValue on resource: ${DB_SECRET}`,
      $metadata: { httpStatusCode: 403 },
    }),
} as const;

/**
 * Opens the test's real store, whose `migrate()` first fails `refusals` times with the StoreError the Data API store
 * makes of `refusal` (its own translation, so the AWS error stays the cause), then migrates.
 */
function refusingFirstMigrations(refusal: () => Error, counter: { refusals: number }) {
  return async (database: Parameters<typeof openStore>[0]): Promise<Store> => {
    const store = await openStore(database);
    return {
      ...store,
      migrate: async (options) => {
        if (counter.refusals-- > 0) throw translateDataApiError(refusal());
        return store.migrate(options);
      },
    };
  };
}

describe.skipIf(needs.skipReason)('migrate handler', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'functions_migrate', 1);
  const saved = { ...process.env };
  let handler: typeof import('../../functions/migrate.ts').handler;
  let configFile: string;
  let hash: string;
  const shells: TestShell[] = [];

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
    for (const options of shells) for (const cache of options.caches) await cache.close();
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

  it('survives IAM propagation at the first Data API call: migrate() refused twice with AccessDenied, then applied', async () => {
    // Prepare: loading succeeds (the Data API needs no secret of ours); the store's first statements are refused.
    const counter = { refusals: 2 };
    const options = testShell(configFile, {
      openStore: refusingFirstMigrations(dataApiRefusal.AccessDeniedException, counter),
    });
    shells.push(options);
    const { logger, metrics, createCache } = options;
    const flaky = createHandler({ logger, metrics, createCache, accessDeniedDelayMs: 10 });

    // Act
    const report = await flaky({ trigger: 'deploy', migrationsHash: hash }, aLambdaContext());

    // Assess
    expect(counter.refusals).toBe(-1);
    expect(report.current).toBeGreaterThan(0);
  });

  it("recognises the Data API's refusals of the database secret, through the store's translation", () => {
    for (const [name, refusal] of Object.entries(dataApiRefusal)) {
      // Act
      const translated = translateDataApiError(refusal());

      // Assess: the store's error keeps the AWS error as its cause, and the retry sees it there
      expect((translated.cause as Error).name, name).toBe(name);
      expect(isAccessDenied(translated), name).toBe(true);
      expect(isAccessDenied(new Error('migration 0001_init failed', { cause: translated })), name).toBe(true);
    }
    const badSql = new BadRequestException({
      message: 'syntax error at or near "SELEC"',
      $metadata: { httpStatusCode: 400 },
    });
    expect(isAccessDenied(translateDataApiError(badSql))).toBe(false);
  });

  it('publishes the gauges of both tables once after migrating, so a fresh stage has a heartbeat datapoint', async () => {
    // Prepare
    const metrics = new RecordingMetrics();
    const options = testShell(configFile, { metrics });
    shells.push(options);
    const migrate = createHandler(options);

    // Act
    await migrate({ trigger: 'deploy', migrationsHash: hash }, aLambdaContext());

    // Assess
    for (const table of ['outbox', 'inbox'] as const) {
      expect(metrics.gauges(table), table).toEqual([
        {
          metrics: { DeadRows: 0, OldestPendingAgeSeconds: 0 },
          dimensions: { Table: table, service: 'queuebox-test' },
        },
      ]);
    }
  });
});
