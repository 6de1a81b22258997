// What infra hands SST to bundle each function (infra/functions-plan.ts FUNCTION_BUNDLE, functionBundleArgs), and that SST's
// own bridge for `nodejs.plugins` (.sst/platform/functions/nodejs-runtime/plugin.mjs, written by
// scripts/sst-types.sh, which `npm test` runs first) loads our plugins with plain Node and answers with our modules.
// sst.aws.Function itself cannot be built under Pulumi mocks, and SST's Go side runs only on `sst deploy`.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { FUNCTION_BUNDLE, functionBundleArgs } from '../../infra/functions-plan.ts';
import { BUNDLE_ALIASES } from '../../scripts/bundle/aliases.ts';
import { REPO_ROOT } from '../local/support.ts';

const BRIDGE = join(REPO_ROOT, '.sst', 'platform', 'functions', 'nodejs-runtime', 'plugin.mjs');
const TEDIOUS_CONNECTION = join(REPO_ROOT, 'node_modules', 'tedious', 'lib', 'connection.js');

/** Our module for `specifier`. */
function replacementOf(specifier: string): string {
  const alias = BUNDLE_ALIASES.find((a) => a.specifiers.includes(specifier));
  if (!alias) throw new Error(`no alias for ${specifier}`);
  return alias.replacement;
}

/** A resolve request as SST's Go side sends it to the bridge (pkg/runtime/node/plugin.go). */
function aResolveRequest(id: number, path: string, importer: string, kind = 'require-call') {
  return {
    id,
    command: 'resolve',
    value: {
      path,
      importer,
      namespace: 'file',
      resolveDir: join(importer, '..'),
      kind,
      with: {},
    },
  };
}

/** Starts the bridge on `plugins`, sends `requests`, returns the replies by id. */
async function askBridge(
  plugins: string,
  requests: readonly ReturnType<typeof aResolveRequest>[],
): Promise<Map<number, Record<string, unknown>>> {
  const child = spawn(process.execPath, [BRIDGE, plugins], {
    cwd: REPO_ROOT,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  const replies = new Map<number, Record<string, unknown>>();
  const lines = createInterface({ input: child.stdout });
  const done = new Promise<void>((resolve, reject) => {
    lines.on('line', (line) => {
      const reply = JSON.parse(line) as { id: number; value: Record<string, unknown> };
      replies.set(reply.id, reply.value);
      if (replies.size === requests.length) resolve();
    });
    child.on('exit', (code) => reject(new Error(`the bridge exited ${code}: ${stderr}`)));
  });
  for (const request of requests) child.stdin.write(`${JSON.stringify(request)}\n`);
  try {
    await done;
  } finally {
    child.kill();
  }
  return replies;
}

describe('FUNCTION_BUNDLE', () => {
  it('gives SST the plugins, externals and kept names of every bundle', () => {
    // Act
    const args = functionBundleArgs();

    // Assess
    expect(args).toEqual({
      format: 'esm',
      minify: true,
      sourcemap: false,
      plugins: 'scripts/bundle/sst-plugins.ts',
      esbuild: {
        external: ['@aws-sdk/*', 'pg-native', 'cpu-features', '@electric-sql/pglite'],
        keepNames: true,
      },
    });
    expect(existsSync(join(REPO_ROOT, FUNCTION_BUNDLE.plugins))).toBe(true);
  });
});

describe("SST's nodejs.plugins bridge", () => {
  it('loads FUNCTION_BUNDLE.plugins with plain Node and answers the replaced imports, and only those, with our modules', async () => {
    // Prepare
    expect(existsSync(BRIDGE), `${BRIDGE} is missing: run bash scripts/sst-types.sh`).toBe(true);
    const elsewhere = join(REPO_ROOT, 'node_modules', 'some-body-parser', 'index.js');
    const requests = [
      aResolveRequest(0, '@azure/identity', TEDIOUS_CONNECTION),
      aResolveRequest(1, 'iconv-lite', join(REPO_ROOT, 'node_modules', 'tedious', 'lib', 'value-parser.js')),
      aResolveRequest(2, 'iconv-lite', elsewhere),
      aResolveRequest(3, '@azure/core-auth', TEDIOUS_CONNECTION),
      aResolveRequest(4, 'node:http', elsewhere, 'import-statement'),
      aResolveRequest(5, 'node:http', elsewhere),
    ];

    // Act
    const replies = await askBridge(join(REPO_ROOT, FUNCTION_BUNDLE.plugins), requests);

    // Assess
    expect(replies.get(0)).toEqual({
      path: join(REPO_ROOT, replacementOf('@azure/identity')),
    });
    expect(replies.get(1)).toEqual({
      path: join(REPO_ROOT, replacementOf('iconv-lite')),
    });
    expect(replies.get(2)).toEqual({});
    expect(replies.get(3)).toEqual({});
    expect(replies.get(4)).toEqual({ path: join(REPO_ROOT, replacementOf('node:http')) });
    expect(replies.get(5)).toEqual({});
  });
});
