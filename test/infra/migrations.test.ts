import { migrationsHash } from '@queuebox/store';
import { MIGRATIONS as POSTGRES } from '@queuebox/store-postgres';
import { MIGRATIONS as SQLSERVER } from '@queuebox/store-sqlserver';
import { describe, expect, it } from 'vitest';
import { planDatabase } from '../../infra/database-plan.ts';
import { deployedMigrationsHash, migrationTriggers } from '../../infra/migrations.ts';
import { aConfig, DB_SECRET } from './fixtures.ts';

describe('deployedMigrationsHash', () => {
  it('hashes the migrations the bundles embed for the provider infra deploys', async () => {
    // Act
    const postgres = await deployedMigrationsHash('postgres');
    const sqlserver = await deployedMigrationsHash('sqlserver');

    // Assess
    expect(postgres).toBe(migrationsHash(POSTGRES));
    expect(sqlserver).toBe(migrationsHash(SQLSERVER));
    expect(postgres).not.toBe(sqlserver);
  });

  it('changes with any embedded SQL, name or version', () => {
    // Prepare
    const [first, ...rest] = POSTGRES;
    if (!first) throw new Error('no embedded PostgreSQL migration');

    // Act
    const base = migrationsHash(POSTGRES);
    const edited = migrationsHash([{ ...first, sql: `${first.sql}\n-- edited` }, ...rest]);
    const renamed = migrationsHash([{ ...first, name: `${first.name}x` }, ...rest]);

    // Assess
    expect(new Set([base, edited, renamed]).size).toBe(3);
  });
});

describe('migrationTriggers', () => {
  it('names the database so that switching databases re-runs the migrations', () => {
    // Prepare
    const existing = planDatabase(
      aConfig({ aws: { database: { secretArn: DB_SECRET } } }),
      undefined,
      'qb/dev',
    );

    // Act
    const triggers = migrationTriggers('h', existing);

    // Assess
    expect(triggers).toEqual({ migrations: 'h', schema: 'queuebox', database: DB_SECRET });
  });

  it("includes the Aurora cluster's identity, so a replaced cluster is migrated", () => {
    // Prepare
    const aurora = planDatabase(aConfig(), undefined, 'qb/dev');

    // Act
    const before = migrationTriggers('h', aurora, 'cluster-AAAA');
    const after = migrationTriggers('h', aurora, 'cluster-BBBB');

    // Assess
    expect(before).toEqual({
      migrations: 'h',
      schema: 'queuebox',
      database: 'aurora:qb/dev/database',
      cluster: 'cluster-AAAA',
    });
    expect(after).not.toEqual(before);
  });
});
