import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanup } from '../local/support.ts';
import { usePostgresSchema } from '../schema.ts';
import { findPostgres } from '../services.ts';
import { aLambdaContext, functionConfigYaml, writeConfigFile } from './support.ts';

const postgres = await findPostgres();
const onServer = postgres.provider === 'postgres';
if (!onServer) console.info('[function tests] skipped: migrate needs a PostgreSQL server, not PGlite');

describe.runIf(onServer)('migrate handler', () => {
  const { pool, schema } = usePostgresSchema(postgres.url, 'functions_migrate', 1);
  const saved = { ...process.env };
  let handler: typeof import('../../functions/migrate.ts').handler;

  beforeAll(async () => {
    // A Lambda environment holds only what infra sets; other QUEUEBOX_* variables would be read as keys.
    for (const name of Object.keys(process.env)) if (name.startsWith('QUEUEBOX_')) delete process.env[name];
    process.env.QUEUEBOX_CONFIG = await writeConfigFile(
      functionConfigYaml({
        databaseUrl: postgres.url,
        schema: schema.name,
        receiverUrl: 'http://127.0.0.1:9/hooks',
      }),
    );
    process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
    ({ handler } = await import('../../functions/migrate.ts'));
  });

  afterAll(async () => {
    process.env = saved;
    await cleanup();
  });

  it('applies every migration on the first deploy and answers the report', async () => {
    const report = await handler({ trigger: 'deploy', migrationsHash: 'abc' }, aLambdaContext());

    expect(report.applied.length).toBeGreaterThan(0);
    expect(report.current).toBe(report.applied.at(-1)?.version);
    const tables = await pool.query(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`,
      [schema.name],
    );
    expect(tables.rows.map((r) => r.table_name)).toEqual(expect.arrayContaining(['inbox', 'outbox']));
  });

  it('has nothing to apply on the next invocation (warm container)', async () => {
    const report = await handler({ trigger: 'deploy', migrationsHash: 'abc' }, aLambdaContext());

    expect(report.applied).toEqual([]);
    expect(report.current).toBeGreaterThan(0);
  });
});
