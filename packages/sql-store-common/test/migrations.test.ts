import { MigrationError, type MigrationProgress } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { applyMigrations, sortMigrations } from '../src/migrations.ts';

const m = (version: number, name = `m${version}`) => ({ version, name });

describe('sortMigrations', () => {
  it('orders by version and refuses a version given twice', () => {
    expect(sortMigrations([m(2), m(1), m(3)]).map((x) => x.version)).toEqual([1, 2, 3]);
    expect(() => sortMigrations([m(1), m(2, 'a'), m(2, 'b')])).toThrow(MigrationError);
  });
});

describe('applyMigrations', () => {
  it('reports progress around the migrations it applied, skips applied ones, and answers the current version', async () => {
    // Prepare: version 1 is applied already.
    const events: MigrationProgress[] = [];
    const ran: number[] = [];
    // Act
    const report = await applyMigrations({
      migrations: [m(1), m(2), m(3)],
      onMigration: (p) => events.push(p),
      applyOne: async (migration, applying) => {
        if (migration.version === 1) return false;
        applying();
        ran.push(migration.version);
        return true;
      },
      appliedVersions: async () => [1, 2, 3],
    });
    // Assess
    expect(ran).toEqual([2, 3]);
    expect(report).toEqual({ applied: [m(2), m(3)], current: 3 });
    expect(events.map((e) => `${e.phase} ${e.index}/${e.total} ${e.name}`)).toEqual([
      'applying 2/3 m2',
      'applied 2/3 m2',
      'applying 3/3 m3',
      'applied 3/3 m3',
    ]);
  });
});
