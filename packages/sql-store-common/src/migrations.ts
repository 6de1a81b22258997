import {
  type AppliedMigration,
  MigrationError,
  type MigrationProgress,
  type MigrationReport,
} from '@queuebox/core';

/** What the shared migration loop needs of a migration. */
export interface MigrationRef {
  readonly version: number;
  readonly name: string;
}

/** The migrations in version order; a version that appears twice is refused before anything runs. */
export function sortMigrations<M extends MigrationRef>(migrations: readonly M[]): M[] {
  const sorted = [...migrations].sort((a, b) => a.version - b.version);
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i]?.version === sorted[i - 1]?.version) {
      throw new MigrationError(`Migration version ${sorted[i]?.version} appears twice`, {
        context: { version: sorted[i]?.version },
      });
    }
  }
  return sorted;
}

/** Options of {@link applyMigrations}. */
export interface ApplyMigrationsOptions<M extends MigrationRef> {
  /** In version order (see {@link sortMigrations}). */
  readonly migrations: readonly M[];
  /**
   * One migration in its own transaction, the dialect's part: take the migrators' lock, and when the version is
   * not applied yet call `applying()`, run the migration and record its version. Answers whether it applied it.
   */
  applyOne(migration: M, applying: () => void): Promise<boolean>;
  /** The versions the schema-version table lists once every migration ran. */
  appliedVersions(): Promise<readonly number[]>;
  /** Told before a pending migration runs and after it committed. Default: nothing. */
  readonly onMigration?: (progress: MigrationProgress) => void;
  /**
   * Whether `applyOne` failed because its transaction was chosen as a deadlock's victim (the dialect's code):
   * such a migration rolled back whole and is run again, up to {@link MIGRATION_DEADLOCK_ATTEMPTS} times in all.
   * Default: never.
   */
  readonly isDeadlock?: (error: unknown) => boolean;
  /**
   * Whether `applyOne` failed because a statement gave up waiting for a table's lock (the dialect's code): such a
   * migration rolled back whole and runs again after {@link lockWaitRetryDelayMs}, for as long as
   * {@link MIGRATION_LOCK_WAIT_BUDGET_MS} allows. Default: never.
   */
  readonly isLockTimeout?: (error: unknown) => boolean;
  /** Waits between the runs of a deadlocked migration. Default a timer. */
  readonly sleep?: (ms: number) => Promise<void>;
  /** The clock of the lock-wait budget. Default `Date.now`. */
  readonly now?: () => number;
}

/**
 * How long a run of migrations keeps trying again after statements gave up waiting for a table's lock: 2 minutes
 * for the whole run (the `migrate` function's timeout is 5). A migrator waits for a table's lock only briefly
 * (PostgreSQL: `MIGRATION_LOCK_TIMEOUT_MAX_MS`), since every insert into
 * the table queues behind a schema change that waits; it then steps aside for a few seconds and tries again, until
 * the long transaction in its way has ended or this budget is spent.
 */
export const MIGRATION_LOCK_WAIT_BUDGET_MS = 120_000;

/** The wait before a migration tries again after a lock wait gave up: 1 to 3 s, at random. */
export function lockWaitRetryDelayMs(random: () => number = Math.random): number {
  return Math.round(1_000 + random() * 2_000);
}

/**
 * Runs of one migration whose transaction a deadlock chose as its victim. Migrations lock the tables they build
 * indexes on while the application, the relay and the poller write to them; the migrators lock in the writers'
 * order (see each dialect's migrator), so this is the net behind that, for a writer of another order.
 */
export const MIGRATION_DEADLOCK_ATTEMPTS = 5;

/** The wait before the `n`th run again (n ≥ 1) of a deadlocked migration: 250 ms doubling, at most 4 s, ± 25%. */
export function deadlockRetryDelayMs(n: number, random: () => number = Math.random): number {
  const base = Math.min(4_000, 250 * 2 ** (n - 1));
  return Math.round(base * (0.75 + random() / 2));
}

const wait = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The migration loop both dialects share: each migration in turn through `applyOne`, progress reported around
 * it (`applying` once, `retrying` before each run again after a deadlock), then the report of what was applied
 * and the current version.
 */
export async function applyMigrations<M extends MigrationRef>(
  options: ApplyMigrationsOptions<M>,
): Promise<MigrationReport> {
  const { migrations, onMigration } = options;
  const applied: AppliedMigration[] = [];
  // One budget for the whole run, so that it stays within a function's timeout however many migrations wait.
  const now = options.now ?? Date.now;
  const lockWaitUntil = now() + MIGRATION_LOCK_WAIT_BUDGET_MS;
  for (const [i, migration] of migrations.entries()) {
    const position = {
      version: migration.version,
      name: migration.name,
      index: i + 1,
      total: migrations.length,
    };
    let told = false;
    const applying = () => {
      if (told) return;
      told = true;
      onMigration?.({ phase: 'applying', ...position });
    };
    let done: boolean;
    let deadlocks = 0;
    for (;;) {
      try {
        done = await options.applyOne(migration, applying);
        break;
      } catch (error) {
        if (options.isLockTimeout?.(error) ?? false) {
          const delay = lockWaitRetryDelayMs();
          if (now() + delay >= lockWaitUntil) throw error;
          onMigration?.({ phase: 'retrying', ...position });
          await (options.sleep ?? wait)(delay);
          continue;
        }
        deadlocks++;
        if (deadlocks >= MIGRATION_DEADLOCK_ATTEMPTS || !(options.isDeadlock?.(error) ?? false)) throw error;
        onMigration?.({ phase: 'retrying', ...position });
        await (options.sleep ?? wait)(deadlockRetryDelayMs(deadlocks));
      }
    }
    if (done) {
      applied.push({ version: migration.version, name: migration.name });
      onMigration?.({ phase: 'applied', ...position });
    }
  }
  const current = (await options.appliedVersions()).reduce((max, v) => Math.max(max, v), 0);
  return { applied, current };
}
