import { createHash } from 'node:crypto';

/** One embedded migration, as the store packages carry it (`migrations.generated.ts`). */
export interface EmbeddedMigrationText {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/**
 * The migrations embedded in the store package of `provider` (`pglite` uses PostgreSQL's), in version order:
 * exactly what a bundle applies. Loaded by a dynamic `import()` with literal specifiers, as `openStore` does.
 */
export async function embeddedMigrations(
  provider: 'postgres' | 'pglite' | 'sqlserver',
): Promise<readonly EmbeddedMigrationText[]> {
  // The generated modules alone, not the store packages: infra imports this under SST, where bundling the drivers
  // (tedious → @azure/identity → open) breaks the evaluation of sst.config.ts.
  if (provider === 'sqlserver') return (await import('@queuebox/store-sqlserver/migrations')).MIGRATIONS;
  return (await import('@queuebox/store-postgres/migrations')).MIGRATIONS;
}

/**
 * SHA-256 (hex) over the versions, names and SQL of `migrations` in version order. Infra sends the hash of the
 * migrations it deploys; the migrate function compares it with the hash of those it embeds. Pure.
 */
export function migrationsHash(migrations: readonly EmbeddedMigrationText[]): string {
  const hash = createHash('sha256');
  for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
    hash.update(String(m.version)).update('\0').update(m.name).update('\0').update(m.sql).update('\0');
  }
  return hash.digest('hex');
}
