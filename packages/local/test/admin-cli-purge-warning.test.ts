/** `queuebox purge` warns when it deletes processed inbox rows a provider may still retry (the dedup memory). */
import type { PurgeOptions, Store } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { type AdminArgs, planAdminCommand, runAdminCommand } from '../src/admin-cli.ts';

function args(options: Record<string, string>, flags: readonly string[] = []): AdminArgs {
  return { words: ['purge'], options, flags: new Set(flags) };
}

/** A store whose purge deletes `counts[table]` rows once, then none; it records every request. */
function fakeStore(counts: { outbox: number; inbox: number }) {
  const requests: PurgeOptions[] = [];
  const left = { ...counts };
  const admin = {
    purge: async (request: PurgeOptions) => {
      requests.push(request);
      const n = Math.min(left[request.table], request.batchSize);
      left[request.table] -= n;
      return n;
    },
  };
  return { store: { admin } as unknown as Pick<Store, 'admin' | 'outbox' | 'inbox'>, requests };
}

async function run(
  options: Record<string, string>,
  counts: { outbox: number; inbox: number },
  json = false,
  flags: readonly string[] = [],
) {
  const plan = planAdminCommand(args(options, flags));
  if (typeof plan === 'string') throw new Error(plan);
  const { store } = fakeStore(counts);
  let out = '';
  let err = '';
  const code = await runAdminCommand(store, plan, {
    out: (text) => (out += text),
    err: (text) => (err += text),
    json,
  });
  return { code, out, err };
}

describe('purge of processed inbox rows younger than 72 hours', () => {
  it('warns on stderr that provider retries of the deleted keys are stored and delivered again, exit 0', async () => {
    // Act: without --table, `--state sent` deletes processed inbox rows too.
    const { code, out, err } = await run({ state: 'sent', 'older-than': '24h' }, { outbox: 4, inbox: 3 });

    // Assess
    expect(code).toBe(0);
    expect(out).toBe('Purged 4 outbox, 3 inbox rows older than 1d.\n');
    expect(err).toContain('purged 3 processed inbox rows\n'); // progress
    expect(err).toMatch(
      /\nwarning: deleted 3 processed inbox rows older than 1d, which can include rows younger than 72h/,
    );
    expect(err).toContain('deduplicates an idempotency key only while its row exists');
    expect(err).toContain('stored and delivered again');
    expect(err).toContain('--older-than 72h or more, or --table outbox');
  });

  it('puts the warning in the JSON answer instead', async () => {
    // Act
    const { code, out, err } = await run(
      { state: 'processed', 'older-than': '71h', table: 'inbox' },
      { outbox: 0, inbox: 1 },
      true,
    );

    // Assess
    expect(code).toBe(0);
    expect(err).toBe('');
    const answer = JSON.parse(out) as { ok: boolean; deleted: unknown; warnings: string[] };
    expect(answer).toMatchObject({ ok: true, deleted: { inbox: 1 } });
    expect(answer.warnings).toHaveLength(1);
    expect(answer.warnings[0]).toMatch(/^deleted 1 processed inbox row older than 2d 23h/);
  });

  it('warns for dead inbox rows too: a dead row holds its idempotency key as a processed one does', async () => {
    // Act
    const { code, err } = await run({ state: 'dead', 'older-than': '1h' }, { outbox: 5, inbox: 2 }, false, [
      'yes',
    ]);

    // Assess
    expect(code).toBe(0);
    expect(err).toMatch(/^warning: deleted 2 dead inbox rows older than 1h/m);
  });

  it('stays quiet at 72 hours or more, for the outbox alone, and when nothing was deleted', async () => {
    for (const [options, counts] of [
      [
        { state: 'sent', 'older-than': '72h' },
        { outbox: 5, inbox: 5 },
      ],
      [
        { state: 'sent', 'older-than': '7d' },
        { outbox: 5, inbox: 5 },
      ],
      [
        { state: 'sent', 'older-than': '1h', table: 'outbox' },
        { outbox: 5, inbox: 5 },
      ],
      [
        { state: 'sent', 'older-than': '1h' },
        { outbox: 5, inbox: 0 },
      ],
    ] as const) {
      // Act
      const { code, out, err } = await run(options, counts, false);
      const json = await run(options, counts, true);

      // Assess
      expect(code, JSON.stringify(options)).toBe(0);
      expect(out).toMatch(/^Purged /);
      expect(err, JSON.stringify(options)).not.toContain('warning');
      expect(JSON.parse(json.out)).not.toHaveProperty('warnings');
    }
  });
});
