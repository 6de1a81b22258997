import { errorFields, type MigrationReport, QueueBoxError, type Table } from '@queuebox/core';
import type { MigrateEvent } from '@queuebox/deploy-contract';
import { embeddedMigrations, migrationsHash } from '@queuebox/store';
import { publishGaugesAfterWrite } from './lambda-shell/gauges.ts';
import { createShell, lambda, type ShellOptions } from './lambda-shell/lambda.ts';

/** The deploy sent the hash of other migrations than this bundle embeds (a stale bundle or a stale hash). */
export class MigrationsMismatchError extends QueueBoxError {}

/** Options of the migrate handler beyond the shell's. */
export interface MigrateOptions extends ShellOptions {
  /**
   * Attempts at the first use of AWS (loading the configuration, opening the store and migrating) while IAM
   * answers AccessDenied: on the first deploy the function's role policy was created moments before and may not
   * be in effect yet. Default 6.
   */
  readonly accessDeniedAttempts?: number;
  /** Wait between those attempts. Default 5000 ms (six attempts span 25 s; the function may run 300 s). */
  readonly accessDeniedDelayMs?: number;
}

/**
 * The RDS Data API reads the cluster's secret with the caller's role; when that is refused it may answer
 * `BadRequestException` or `ForbiddenException` (not only `AccessDeniedException`), naming the action.
 */
const DATA_API_SECRET_DENIED = /not authori[sz]ed to perform:?\s*secretsmanager:GetSecretValue/i;

/**
 * Whether `error` (or its cause, up to 5 levels) is IAM's refusal: `AccessDeniedException` from Secrets Manager,
 * KMS or the RDS Data API, or the Data API's `BadRequestException` / `ForbiddenException` saying the role may not
 * read the database secret.
 */
export function isAccessDenied(error: unknown): boolean {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; depth++) {
    if (
      /^AccessDenied/.test(current.name) ||
      /AccessDenied/.test(String((current as { code?: unknown }).code)) ||
      ((current.name === 'BadRequestException' || current.name === 'ForbiddenException') &&
        DATA_API_SECRET_DENIED.test(current.message))
    )
      return true;
    current = current.cause;
  }
  return false;
}

/**
 * migrate (invoked once per deploy when the migrations or the database changed): checks that the event's
 * `migrationsHash` is the hash of the migrations this bundle embeds (infra/migrations.ts computes it the same way),
 * applies pending migrations, publishes the gauges once and answers the report,
 * `{ applied: [{ version, name }], current }`. A failure throws, so the deploy's invocation fails; AccessDenied
 * anywhere in the first use (reading the configuration's secrets, the store's first Data API calls) is retried
 * (IAM propagation on a first deploy).
 */
export function createHandler(options: MigrateOptions = {}) {
  const shell = createShell(options);
  const attempts = options.accessDeniedAttempts ?? 6;
  const delayMs = options.accessDeniedDelayMs ?? 5000;

  // The first AWS call may be loadConfig's secret read or, with the Data API (which loads no secret of its own),
  // the migration's first statement: the whole first use is retried, not only the loading.
  async function retryingAccessDenied<T>(work: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await work();
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
      const { store, report, embedded } = await retryingAccessDenied(async () => {
        const { config, store } = await shell.cache.get();
        const embedded = migrationsHash(await embeddedMigrations(config.database.provider));
        if (event?.migrationsHash !== undefined && event.migrationsHash !== embedded) {
          throw new MigrationsMismatchError(
            `the deploy sent the migrations hash ${event.migrationsHash}, but this bundle embeds ${embedded}: the bundle and the deploy disagree on the migrations; rebuild and deploy again`,
            { context: { sent: event.migrationsHash, embedded, provider: config.database.provider } },
          );
        }
        const report = await store.migrate({
          // A migration that runs again (a deadlock's victim, a lock wait behind a long transaction) says so.
          onMigration: (progress) => {
            if (progress.phase === 'retrying') {
              shell.logger.warn('migration waits for a lock or lost a deadlock; trying it again', {
                migration: `${String(progress.version).padStart(4, '0')}_${progress.name}`,
              });
            }
          },
        });
        return { store, embedded, report };
      });
      shell.logger.info('migrations applied', {
        migrationsHash: embedded,
        applied: report.applied.map((m) => `${String(m.version).padStart(4, '0')}_${m.name}`),
        version: report.current,
      });
      if (report.newer) {
        shell.logger.warn(
          'the database schema is newer than this QueueBox; running on it (a rolling upgrade, or a rollback): finish the upgrade',
          { schemaVersion: report.newer.applied, knownVersion: report.newer.known },
        );
      }
      // The gauges-missing alarm treats missing data as breaching and maintenance-tick first publishes up to a day
      // after a fresh deploy; a first datapoint now keeps a new stage from alarming. The migration succeeded, so a
      // failure here is logged and does not fail the deploy.
      await publishGaugesAfterWrite(shell, store, ['outbox', 'inbox'] satisfies readonly Table[]);
      return report;
    },
    // The gauges are published per table above; there is nothing left to flush.
    { metrics: false },
  );
}

export const handler = createHandler();
