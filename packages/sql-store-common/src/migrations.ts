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
}

/**
 * The migration loop both dialects share: each migration in turn through `applyOne`, progress reported around
 * it, then the report of what was applied and the current version.
 */
export async function applyMigrations<M extends MigrationRef>(
  options: ApplyMigrationsOptions<M>,
): Promise<MigrationReport> {
  const { migrations, onMigration } = options;
  const applied: AppliedMigration[] = [];
  for (const [i, migration] of migrations.entries()) {
    const position = {
      version: migration.version,
      name: migration.name,
      index: i + 1,
      total: migrations.length,
    };
    const done = await options.applyOne(migration, () => onMigration?.({ phase: 'applying', ...position }));
    if (done) {
      applied.push({ version: migration.version, name: migration.name });
      onMigration?.({ phase: 'applied', ...position });
    }
  }
  const current = (await options.appliedVersions()).reduce((max, v) => Math.max(max, v), 0);
  return { applied, current };
}
