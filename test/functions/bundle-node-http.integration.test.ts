/**
 * scripts/bundle/node-http.ts: the real node:http module, taken with require(), so a bundle's `import … from
 * 'node:http'` no longer makes Node 24 load undici for node:http's WebSocket, CloseEvent and MessageEvent getters.
 */
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import ours, * as named from '../../scripts/bundle/node-http.ts';
import { REPO_ROOT } from '../local/support.ts';

const STAND_IN = join(REPO_ROOT, 'scripts', 'bundle', 'node-http.ts');
/** node:http exports the stand-in leaves out: the undici getters, and one internal. */
const LEFT_OUT = ['WebSocket', 'CloseEvent', 'MessageEvent', '_connectionListener'];

/** Whether plain Node (this one, which strips the types) loads undici while importing `specifier`. */
function loadsUndici(specifier: string): boolean {
  const script = `const before = new Set(process.moduleLoadList);
await import(${JSON.stringify(specifier)});
process.stdout.write(String(process.moduleLoadList.some((m) => !before.has(m) && m.includes('undici'))));`;
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  if (child.status !== 0) throw new Error(`node exited ${child.status}: ${child.stderr}`);
  return child.stdout.trim() === 'true';
}

describe('the node:http stand-in', () => {
  it('is the module require() gives, and exports every name of node:http but the left-out ones', () => {
    // Prepare
    const http = createRequire(import.meta.url)('node:http') as Record<string, unknown>;
    const expected = Object.keys(http).filter((name) => !LEFT_OUT.includes(name));

    // Act
    const exported = named as Record<string, unknown>;

    // Assess
    expect(ours).toBe(http);
    for (const name of expected) expect(exported[name], name).toBe(http[name]);
  });

  it('loads no undici where an import of node:http does', () => {
    // Act
    const viaImport = loadsUndici('node:http');
    const viaStandIn = loadsUndici(pathToFileURL(STAND_IN).href);

    // Assess: when the first fails, Node no longer loads undici for node:http and the stand-in can go.
    expect(viaImport).toBe(true);
    expect(viaStandIn).toBe(false);
  });
});
