/**
 * `queuebox purge`: a purge of dead rows, the only copy of messages never delivered, needs `--yes` (an outside audit
 * saw 14,183 deleted at once, unasked), and `--dry-run` counts what a purge would delete, per table, deleting nothing
 * (it was refused: "does not apply to purge"). Scripted stores, no database.
 */
import type { PurgeOptions, Store } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { type AdminArgs, type AdminPlan, planAdminCommand } from '../src/admin-cli.ts';
import { EXIT, runCli } from '../src/commands.ts';
import { runCliCommand } from './support/admin-cli.ts';

function args(options: Record<string, string>, flags: string[] = []): AdminArgs {
  return { words: ['purge'], options, flags: new Set(flags) };
}

/** A store whose admin counts `counts[table]` rows for a purge (when `counts` is given) and records every purge. */
function scriptedStore(counts?: Partial<Record<'outbox' | 'inbox', number>>) {
  const purged: PurgeOptions[] = [];
  const counted: Omit<PurgeOptions, 'batchSize'>[] = [];
  const admin = {
    purge: async (options: PurgeOptions) => {
      purged.push(options);
      return 0;
    },
    ...(counts === undefined
      ? {}
      : {
          countPurge: async (options: Omit<PurgeOptions, 'batchSize'>) => {
            counted.push(options);
            return counts[options.table] ?? 0;
          },
        }),
  };
  const store = { admin, outbox: {}, inbox: {} } as unknown as Pick<Store, 'admin' | 'outbox' | 'inbox'>;
  return { store, purged, counted };
}

const run = runCliCommand;

describe('queuebox purge --state dead', () => {
  it('is a usage error without --yes, naming what it would delete and the dry run', () => {
    // Act
    const refused = planAdminCommand(args({ state: 'dead', 'older-than': '7d', table: 'outbox' }));
    const confirmed = planAdminCommand(args({ state: 'dead', 'older-than': '7d' }, ['yes']));
    const counted = planAdminCommand(args({ state: 'dead', 'older-than': '7d' }, ['dry-run']));
    const sent = planAdminCommand(args({ state: 'sent', 'older-than': '7d' }));

    // Assess
    expect(refused).toBe(
      '"purge --state dead" deletes dead rows, the only copy of messages that were never delivered: add --yes to delete them (every dead outbox row older than 7d), or --dry-run to count them first',
    );
    expect(confirmed).toMatchObject({ kind: 'purge', state: 'Dead', dryRun: false });
    expect(counted).toMatchObject({ kind: 'purge', state: 'Dead', dryRun: true });
    expect(sent).toMatchObject({ kind: 'purge', state: 'Sent', dryRun: false });
  });

  it('exits 2 on the command line without --yes, before the configuration or database is read', async () => {
    // Prepare
    let err = '';
    const io = { out: () => {}, err: (text: string) => (err += text), cwd: '/nonexistent', env: {} };

    // Act
    const code = await runCli(['purge', '--state', 'dead', '--older-than', '7d'], io);
    const yesElsewhere = await runCli(['stats', '--yes'], { ...io, err: () => {} });

    // Assess
    expect(code).toBe(EXIT.usage);
    expect(err).toContain('add --yes to delete them');
    expect(yesElsewhere).toBe(EXIT.usage);
  });
});

describe('queuebox purge --dry-run', () => {
  const plan: AdminPlan = {
    kind: 'purge',
    tables: ['outbox', 'inbox'],
    state: 'Dead',
    olderThanMs: 7 * 86_400_000,
    batchSize: 500,
    dryRun: true,
  };

  it('counts per table and deletes nothing, as text and as JSON', async () => {
    // Prepare
    const { store, purged, counted } = scriptedStore({ outbox: 14_183, inbox: 1 });

    // Act
    const text = await run(store, plan);
    const json = await run(store, plan, true);

    // Assess
    expect(purged).toEqual([]);
    expect(counted[0]).toEqual({ table: 'outbox', state: 'Dead', olderThanMs: 7 * 86_400_000 });
    expect(text).toEqual({
      code: 0,
      stdout:
        'Would purge 14183 dead outbox rows and 1 dead inbox row older than 7d (it needs --yes); nothing was deleted.\n',
      stderr: '',
    });
    expect(JSON.parse(json.stdout)).toEqual({
      ok: true,
      dryRun: true,
      state: 'dead',
      olderThanMs: 7 * 86_400_000,
      wouldDelete: { outbox: 14_183, inbox: 1 },
    });
  });

  it('warns of young inbox rows in the words of a dry run: it would delete them', async () => {
    // Prepare
    const { store, purged } = scriptedStore({ outbox: 0, inbox: 2 });

    // Act
    const text = await run(store, { ...plan, state: 'Sent', olderThanMs: 3_600_000 });

    // Assess
    expect(purged).toEqual([]);
    expect(text.stderr).toMatch(/^warning: would delete 2 processed inbox rows older than 1h, /m);
    expect(text.stderr).not.toMatch(/deleted 2/);
  });

  it('exits 1 on a store that cannot count a purge, deleting nothing', async () => {
    // Prepare
    const { store, purged } = scriptedStore();

    // Act
    const json = await run(store, plan, true);

    // Assess
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual({ ok: false, error: 'dry_run_unavailable' });
    expect(purged).toEqual([]);
  });
});
