import { errorFields, type MigrationReport, QueueBoxError } from '@queuebox/core';
import type { MigrateEvent } from '@queuebox/deploy-contract';
import { embeddedMigrations, migrationsHash } from '@queuebox/store';
import { createShell, lambda, type ShellOptions } from './lambda-shell/lambda.ts';

/** The deploy sent the hash of other migrations than this bundle embeds (a stale bundle or a stale hash). */
export class MigrationsMismatchError extends QueueBoxError {}

/** Options of the migrate handler beyond the shell's. */
export interface MigrateOptions extends ShellOptions {
  /**
   * Attempts at loading the configuration and opening the store while IAM answers AccessDenied: on the first deploy
   * the function's role policy was created moments before and may not be in effect yet. Default 6.
   */
  readonly accessDeniedAttempts?: number;
  /** Wait between those attempts. Default 5000 ms (six attempts span 25 s; the function may run 300 s). */
  readonly accessDeniedDelayMs?: number;
}

/** Whether `error` (or its cause) is IAM's refusal: `AccessDeniedException` from Secrets Manager, KMS, … */
export function isAccessDenied(error: unknown): boolean {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; depth++) {
    if (
      /^AccessDenied/.test(current.name) ||
      /AccessDenied/.test(String((current as { code?: unknown }).code))
    )
      return true;
    current = current.cause;
  }
  return false;
}

/**
 * migrate (invoked once per deploy when the migrations or the database changed): checks that the event's
 * `migrationsHash` is the hash of the migrations this bundle embeds (infra/migrations.ts computes it the same way),
 * applies pending migrations and answers the report, `{ applied: [{ version, name }], current }`. A failure
 * throws, so the deploy's invocation fails; AccessDenied while reading the configuration's secrets is retried
 * (IAM propagation on a first deploy).
 */
export function createHandler(options: MigrateOptions = {}) {
  const shell = createShell(options);
  const attempts = options.accessDeniedAttempts ?? 6;
  const delayMs = options.accessDeniedDelayMs ?? 5000;

  async function container() {
    for (let attempt = 1; ; attempt++) {
      try {
        return await shell.cache.get();
      } catch (error) {
        if (!isAccessDenied(error) || attempt >= attempts) throw error;
        shell.logger.warn('access denied, retrying: IAM may not have propagated the new role policy yet', {
          attempt,
          error: errorFields(error),
        });
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
    }
  }

  return lambda(
    shell,
    async (event: MigrateEvent | null | undefined): Promise<MigrationReport> => {
      const { config, store } = await container();
      const embedded = migrationsHash(await embeddedMigrations(config.database.provider));
      if (event?.migrationsHash !== undefined && event.migrationsHash !== embedded) {
        throw new MigrationsMismatchError(
          `the deploy sent the migrations hash ${event.migrationsHash}, but this bundle embeds ${embedded}: the bundle and the deploy disagree on the migrations; rebuild and deploy again`,
          { context: { sent: event.migrationsHash, embedded, provider: config.database.provider } },
        );
      }
      const report = await store.migrate();
      shell.logger.info('migrations applied', {
        migrationsHash: embedded,
        applied: report.applied.map((m) => `${String(m.version).padStart(4, '0')}_${m.name}`),
        version: report.current,
      });
      return report;
    },
    { metrics: false },
  );
}

export const handler = createHandler();
