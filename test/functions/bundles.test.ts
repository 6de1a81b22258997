/**
 * The build check of issue 6: a function bundled as the deployment bundles it holds both store providers, and the
 * check notices when one leaves the bundle (here: its dynamic import rewritten to an empty module).
 */
import { describe, expect, it } from 'vitest';
import { checkBundles, functionEntries } from '../../scripts/check-bundles.ts';
import { REPO_ROOT } from '../local/support.ts';

describe('scripts/check-bundles.ts', () => {
  it('finds one entry point per function file, and the shared shell is none of them', () => {
    const entries = functionEntries(REPO_ROOT);

    expect(entries).toEqual(expect.arrayContaining(['functions/inbox-http.ts', 'functions/outbox-tick.ts']));
    expect(entries.some((entry) => entry.includes('shell'))).toBe(false);
  });

  it('sees both providers in the inbox-http bundle', async () => {
    const [report] = await checkBundles({ root: REPO_ROOT, functions: ['functions/inbox-http.ts'] });

    expect(report).toMatchObject({
      touchesDatabase: true,
      providers: { postgres: true, sqlserver: true },
      missing: [],
    });
  });

  it.each(['sqlserver', 'postgres'] as const)(
    'reports %s missing when its import is dropped',
    async (provider) => {
      const [report] = await checkBundles({
        root: REPO_ROOT,
        functions: ['functions/relay-tick.ts'],
        dropProvider: provider,
      });

      expect(report?.touchesDatabase).toBe(true);
      expect(report?.missing).toEqual([provider]);
    },
  );
});
