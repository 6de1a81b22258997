import type { MigrationReport } from '@queuebox/core';
import { createShell, lambda, type ShellOptions } from './shell/lambda.ts';

/** The event infra sends on deploy (infra/contract.ts MigrateEvent); any other event migrates the same way. */
export type MigrateEvent = { readonly trigger?: string; readonly migrationsHash?: string } | null | undefined;

/**
 * migrate (invoked once per deploy when the migrations changed): applies pending migrations and answers the report,
 * `{ applied: [{ version, name }], current }`. A failure throws, so the deploy's invocation fails.
 */
export function createHandler(options: ShellOptions = {}) {
  const shell = createShell(options);
  return lambda(
    shell,
    async (event: MigrateEvent): Promise<MigrationReport> => {
      const { store } = await shell.cache.get();
      const report = await store.migrate();
      shell.logger.info('migrations applied', {
        migrationsHash: event?.migrationsHash,
        applied: report.applied.map((m) => `${String(m.version).padStart(4, '0')}_${m.name}`),
        version: report.current,
      });
      return report;
    },
    { metrics: false },
  );
}

export const handler = createHandler();
