import { MigrationError, type MigrationProgress } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import {
  applyMigrations,
  deadlockRetryDelayMs,
  lockWaitRetryDelayMs,
  MIGRATION_DEADLOCK_ATTEMPTS,
  MIGRATION_LOCK_WAIT_BUDGET_MS,
  sortMigrations,
} from '../src/migrations.ts';

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

  it('runs a migration again when its transaction was a deadlock victim, reporting applying once', async () => {
    // Prepare: migration 2 is chosen as a deadlock's victim twice, then commits.
    const events: string[] = [];
    const waits: number[] = [];
    let runs = 0;
    const deadlock = Object.assign(new Error('deadlock detected'), { deadlock: true });
    // Act
    const report = await applyMigrations({
      migrations: [m(1), m(2)],
      onMigration: (p) => events.push(`${p.phase} ${p.name}`),
      isDeadlock: (error) => (error as { deadlock?: boolean }).deadlock === true,
      sleep: async (ms) => {
        waits.push(ms);
      },
      applyOne: async (migration, applying) => {
        applying();
        if (migration.version === 2 && ++runs <= 2) throw deadlock;
        return true;
      },
      appliedVersions: async () => [1, 2],
    });
    // Assess
    expect(report.current).toBe(2);
    expect(runs).toBe(3);
    expect(events).toEqual([
      'applying m1',
      'applied m1',
      'applying m2',
      'retrying m2',
      'retrying m2',
      'applied m2',
    ]);
    expect(waits).toHaveLength(2);
    expect(waits[0]).toBeGreaterThanOrEqual(187);
    expect(waits[1]).toBeGreaterThanOrEqual(375);
  });

  it('gives up after MIGRATION_DEADLOCK_ATTEMPTS runs, and never runs again after another error', async () => {
    const deadlock = Object.assign(new Error('deadlock detected'), { deadlock: true });
    let runs = 0;
    const options = {
      migrations: [m(1)],
      isDeadlock: (error: unknown) => (error as { deadlock?: boolean }).deadlock === true,
      sleep: async () => undefined,
      appliedVersions: async () => [],
    };
    await expect(
      applyMigrations({
        ...options,
        applyOne: async () => {
          runs++;
          throw deadlock;
        },
      }),
    ).rejects.toBe(deadlock);
    expect(runs).toBe(MIGRATION_DEADLOCK_ATTEMPTS);

    runs = 0;
    const syntax = new Error('syntax error');
    await expect(
      applyMigrations({
        ...options,
        applyOne: async () => {
          runs++;
          throw syntax;
        },
      }),
    ).rejects.toBe(syntax);
    expect(runs).toBe(1);
  });

  it('waits 250 ms doubling up to 4 s between runs, within ±25%', () => {
    expect([1, 2, 3, 4, 5, 6].map((n) => deadlockRetryDelayMs(n, () => 0.5))).toEqual([
      250, 500, 1000, 2000, 4000, 4000,
    ]);
    expect(deadlockRetryDelayMs(1, () => 0)).toBe(188);
    expect(deadlockRetryDelayMs(1, () => 0.999_999)).toBe(312);
  });
  it('runs a migration whose lock wait gave up again, 1 to 3 s later, until the lock-wait budget is spent', async () => {
    // Prepare: a clock the sleeps move; migration 1 gives up on its lock wait every time.
    let now = 0;
    const waits: number[] = [];
    let runs = 0;
    const lockTimeout = Object.assign(new Error('canceling statement due to lock timeout'), { lock: true });
    const options = {
      migrations: [m(1)],
      isLockTimeout: (error: unknown) => (error as { lock?: boolean }).lock === true,
      isDeadlock: () => false,
      now: () => now,
      sleep: async (ms: number) => {
        waits.push(ms);
        now += ms;
      },
      appliedVersions: async () => [1],
    };
    // Act: the lock comes free at the 10th run; then a migration that never gets it.
    const report = await applyMigrations({
      ...options,
      applyOne: async () => {
        if (++runs < 10) throw lockTimeout;
        return true;
      },
    });
    now = 0;
    waits.length = 0;
    const failed = await applyMigrations({
      ...options,
      applyOne: async () => {
        throw lockTimeout;
      },
    }).catch((error: unknown) => error);
    // Assess: more runs than a deadlock gets, each 1 to 3 s apart, and a failure once the budget would be passed.
    expect(report.applied).toEqual([m(1)]);
    expect(runs).toBe(10);
    expect(failed).toBe(lockTimeout);
    expect(waits.length).toBeGreaterThan(MIGRATION_DEADLOCK_ATTEMPTS);
    expect(waits.every((w) => w >= 1_000 && w <= 3_000)).toBe(true);
    expect(waits.reduce((sum, w) => sum + w, 0)).toBeLessThanOrEqual(MIGRATION_LOCK_WAIT_BUDGET_MS);
    expect(lockWaitRetryDelayMs(() => 0)).toBe(1_000);
    expect(lockWaitRetryDelayMs(() => 1)).toBe(3_000);
  });
});
