import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { planDatabase } from '../../infra/database-plan.ts';
import { InfraPlanError } from '../../infra/errors.ts';
import { migrationsDir, migrationsHash, migrationTriggers } from '../../infra/migrations.ts';
import { aConfig, DB_SECRET } from './fixtures.ts';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'queuebox-migrations-'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('migrationsHash', () => {
  it('changes when a migration is added or edited, and ignores other files', async () => {
    // Prepare
    await writeFile(join(dir, '0001_init.sql'), 'create table a ();');
    const first = migrationsHash(dir);
    await writeFile(join(dir, 'README.md'), 'notes');
    const withNotes = migrationsHash(dir);
    await writeFile(join(dir, '0002_more.sql'), 'create table b ();');
    const added = migrationsHash(dir);
    await writeFile(join(dir, '0001_init.sql'), 'create table a (id int);');

    // Act
    const edited = migrationsHash(dir);

    // Assess
    expect(first).toMatch(/^[0-9a-f]{64}$/);
    expect(withNotes).toBe(first);
    expect(new Set([first, added, edited]).size).toBe(3);
  });

  it('refuses a directory without migrations', async () => {
    expect(() => migrationsHash(dir)).toThrow(InfraPlanError);
    expect(() => migrationsHash(join(dir, 'missing'))).toThrow(/cannot read the migrations/);
  });

  it('hashes the repository migrations of the provider infra deploys', () => {
    // Prepare
    const root = join(import.meta.dirname, '..', '..');
    const aurora = planDatabase(aConfig(), undefined, 'qb/dev');
    const sqlserver = planDatabase(
      aConfig({ aws: { database: { secretArn: DB_SECRET } } }),
      'sqlserver',
      'qb/dev',
    );

    // Act
    const postgresHash = migrationsHash(migrationsDir(root, aurora));
    const sqlserverHash = migrationsHash(migrationsDir(root, sqlserver));

    // Assess
    expect(migrationsDir(root, sqlserver)).toBe(join(root, 'migrations', 'sqlserver'));
    expect(postgresHash).not.toBe(sqlserverHash);
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
});
