// SST bundles sst.config.ts (and the infra/ modules it imports) into one ESM file with a banner that declares
// `require`, `__filename` and `__dirname`, then evaluates it on `sst deploy` and `sst install`. A module bundled
// into it that declares one of those names itself (the `open` package, which tedious → @azure/identity pulls in)
// makes the evaluation fail with "Identifier '__dirname' has already been declared", so nothing deploys. SST's Go
// side cannot run here; this bundles the same entry with esbuild and the same kind of banner, and checks the file
// Node would evaluate, and that no database driver came along.
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../local/support.ts';

/** The names SST's banner declares at the top of the bundled config (as its error shows). */
const SST_BANNER = [
  "import { createRequire as topLevelCreateRequire } from 'module';",
  'const require = topLevelCreateRequire(import.meta.url);',
  "import { fileURLToPath as topLevelFileUrlToPath, URL as topLevelURL } from 'url';",
  'const __filename = topLevelFileUrlToPath(import.meta.url);',
  "const __dirname = topLevelFileUrlToPath(new topLevelURL('.', import.meta.url));",
].join('\n');

async function bundleSstConfig() {
  return build({
    absWorkingDir: REPO_ROOT,
    entryPoints: ['sst.config.ts'],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node24',
    // Pulumi, SST and the AWS SDK are SST's own (installed in .sst/platform); everything of ours is bundled.
    external: ['@pulumi/*', 'sst', 'sst/*', '@aws-sdk/*'],
    banner: { js: SST_BANNER },
    metafile: true,
    write: false,
    logLevel: 'silent',
  });
}

describe('sst.config.ts as SST bundles it', () => {
  it('holds no database driver, and Node accepts the bundle under SST’s banner', async () => {
    // Act
    const result = await bundleSstConfig();

    // Assess
    const inputs = Object.keys(result.metafile.inputs);
    const drivers = inputs.filter((path) =>
      /node_modules\/(tedious|mssql|@azure\/identity|open|pg|@electric-sql\/pglite)\//.test(path),
    );
    expect(drivers).toEqual([]);
    const dir = await mkdtemp(join(tmpdir(), 'queuebox-sst-config-'));
    try {
      const file = join(dir, 'sst.config.mjs');
      await writeFile(file, result.outputFiles[0]?.contents ?? new Uint8Array());
      const check = spawnSync(process.execPath, ['--check', file], { encoding: 'utf8' });
      expect(check.stderr).toBe('');
      expect(check.status).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
