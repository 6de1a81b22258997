/**
 * The store contract: one suite, run against every implementation of core's `Store` port (PostgreSQL, PGlite,
 * SQL Server). Its tests follow the rows of the seed's outbox and inbox state tables, then fencing, ordering,
 * duplicates, payloads and concurrency.
 */
import { MigrationError } from '@queuebox/core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { adminStatsListRequeueContract } from './admin-list-contract.ts';
import { adminReplayPurgeNextDueContract } from './admin-purge-contract.ts';
import { adminRedactContract } from './admin-redact-contract.ts';
import { concurrencyContract } from './concurrency-contract.ts';
import { inboxFencingAndDuplicatesContract } from './inbox-fencing-contract.ts';
import { inboxRelayOrderContract } from './inbox-relay-order-contract.ts';
import { inboxStateTableContract } from './inbox-state-contract.ts';
import { outboxFencingAndOrderingContract } from './outbox-fencing-contract.ts';
import { outboxStateTableContract } from './outbox-state-contract.ts';
import { payloadContract } from './payload-contract.ts';
import type { StoreHarness } from './store-harness.ts';
import { textContract } from './text-contract.ts';

export type { StoreHarness, StoreHooks } from './store-harness.ts';

/** Options of `describeStoreContract`. */
export interface StoreContractOptions {
  /** When set, the whole suite is registered as skipped and this reason is printed. Default: run. */
  readonly skipReason?: string;
}

/**
 * Registers the store contract under `name`. `harness` opens the store in a fresh, migrated schema; it is called
 * once for the file, and again after a failing test: the failing test's schema is kept as it was (and named on
 * the console) so its rows can be inspected, and the remaining tests go on in a new schema. Between passing tests
 * the rows are deleted. After the file, a schema that saw no failure is dropped.
 */
export function describeStoreContract(
  name: string,
  harness: () => Promise<StoreHarness>,
  options: StoreContractOptions = {},
): void {
  const { skipReason } = options;
  if (skipReason !== undefined) console.info(`[store contract] ${name}: skipped — ${skipReason}`);

  describe.skipIf(skipReason !== undefined)(`store contract: ${name}`, () => {
    let h: StoreHarness | undefined;
    const current = (): StoreHarness => {
      if (!h) throw new Error('the store harness did not open (see the beforeAll error)');
      return h;
    };

    beforeAll(async () => {
      h = await harness();
    });

    afterEach(async (context) => {
      if (!h) return;
      if (context.task.result?.state === 'fail') {
        console.info(
          `[store contract] ${name}: keeping schema ${h.schema} with the rows of the failed test "${context.task.name}"`,
        );
        const failed = h;
        h = undefined;
        await failed.close();
        h = await harness();
      } else {
        await h.deleteAllRows();
      }
    });

    // biome-ignore lint/correctness/noEmptyPattern: vitest requires a destructuring pattern for the hook context
    afterAll(async ({}, suite) => {
      if (!h) return;
      const opened = h;
      h = undefined;
      try {
        if (suite.result?.state === 'fail' || (suite.result?.errors?.length ?? 0) > 0) {
          console.info(`[store contract] ${name}: keeping schema ${opened.schema}: the suite failed`);
        } else {
          await opened.dropSchema();
        }
      } finally {
        await opened.close();
      }
    });

    describe('store', () => {
      it('answers ping, and a second migrate applies nothing', async () => {
        await current().store.ping();

        const again = await current().store.migrate();

        expect(again.applied).toEqual([]);
        expect(again.current).toBeGreaterThanOrEqual(1);
      });

      it("refuses to migrate a schema whose schema_migrations is another tool's, and creates nothing in it", async () => {
        // Prepare: golang-migrate's table at its 12th migration, which a migrator that reads it as its own takes
        // for a newer QueueBox's and applies nothing.
        const foreign = await current().openOnForeignVersionTable();
        try {
          // Act
          const migrated = foreign.store.migrate();

          // Assess
          await expect(migrated).rejects.toBeInstanceOf(MigrationError);
          await expect(migrated).rejects.toThrow(
            new RegExp(
              `^Schema ${foreign.schema} has a table schema_migrations that is not QueueBox's \\(its columns: version bigint, dirty (boolean|bit)\\): another migration tool keeps its versions there`,
            ),
          );
          await expect(foreign.store.outbox.get('1')).rejects.toThrow();
        } finally {
          await foreign.drop();
        }
      });

      it('reads no row for an id that was never written', async () => {
        expect(await current().store.outbox.get('999999999999')).toBeUndefined();
        expect(await current().store.inbox.get('999999999999')).toBeUndefined();
      });
    });

    outboxStateTableContract(current);
    outboxFencingAndOrderingContract(current);
    inboxStateTableContract(current);
    inboxFencingAndDuplicatesContract(current);
    inboxRelayOrderContract(current);
    payloadContract(current);
    textContract(current);
    concurrencyContract(current);
    adminStatsListRequeueContract(current);
    adminReplayPurgeNextDueContract(current);
    adminRedactContract(current);
  });
}
