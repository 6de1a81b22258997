// The infra type check must fail on the probe issue 14 found type-checking clean (`const n: number = sst;` in
// infra/), and report nothing else on the tree: if SST's types stopped resolving, the probe would pass again.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkInfraTypes, PROBE, SENTINELS, sentinelSource } from '../../scripts/typecheck-infra.ts';

const root = join(import.meta.dirname, '..', '..');
const platformTypes = existsSync(join(root, '.sst', 'platform', 'config.d.ts'));

describe('the infra type check', () => {
  it('marks every sentinel line as an expected error, so a sentinel that stops failing is reported', () => {
    const lines = sentinelSource().split('\n');
    for (const sentinel of SENTINELS) {
      const at = lines.indexOf(sentinel.code);
      expect(at, sentinel.code).toBeGreaterThan(0);
      expect(lines[at - 1]).toBe('// @ts-expect-error');
    }
  });

  it('fails on the probe `const n: number = sst;` in infra/ and on nothing else in the tree', () => {
    // `npm test` runs `npm run check` first, whose typecheck:infra writes SST's types; a bare vitest run may not.
    expect(platformTypes, 'SST platform types missing: run bash scripts/sst-types.sh').toBe(true);
    const report = checkInfraTypes({ root, extraFiles: { [join(root, PROBE.file)]: PROBE.text } });

    expect(report.ok).toBe(false);
    expect(report.checkedFiles).toContain('sst.config.ts');
    expect(report.checkedFiles).toContain(PROBE.file);
    expect(report.diagnostics).toHaveLength(1);
    expect(report.diagnostics[0]).toMatch(
      /infra\/__probe__\.ts\(1,14\): error TS2322: Type 'typeof .*' is not assignable to type 'number'/,
    );
  }, 240_000);
});
