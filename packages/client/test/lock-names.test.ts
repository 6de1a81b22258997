/**
 * The lock names the client documents are the stores' own, and importing the client still loads no driver (the
 * names come from the stores' driver-free `outbox-key-lock` modules, not from their indexes, which load pg and
 * mssql). The import is checked in a child Node process, so this process's module cache does not hide a load.
 */
import { spawnSync } from 'node:child_process';
import * as postgresStore from '@queuebox/store-postgres';
import * as sqlServerStore from '@queuebox/store-sqlserver';
import { describe, expect, it } from 'vitest';
import * as client from '../src/index.ts';

describe('the lock names of @queuebox/client', () => {
  it("are store-postgres's and store-sqlserver's own functions", () => {
    expect(client.outboxKeyLockName).toBe(postgresStore.outboxKeyLockName);
    expect(client.outboxKeyLockResource).toBe(sqlServerStore.outboxKeyLockResource);
    expect(client.outboxKeyLockName('queuebox', 'order-1')).toBe('queuebox.outbox-key:queuebox:order-1');
  });

  it('come without loading pg or mssql when the client is imported', () => {
    // Prepare: a child that records every module resolved while importing the client.
    const script = `
import { registerHooks } from 'node:module';
const resolved = [];
registerHooks({
  resolve(specifier, context, next) {
    const result = next(specifier, context);
    resolved.push(result.url);
    return result;
  },
});
const client = await import(${JSON.stringify(new URL('../src/index.ts', import.meta.url).href)});
if (typeof client.outboxKeyLockResource !== 'function') throw new Error('no outboxKeyLockResource');
console.log(JSON.stringify(resolved));
`;
    // Act
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    // Assess
    expect(child.stderr).toBe('');
    const resolved = JSON.parse(child.stdout) as string[];
    const drivers = resolved.filter((url) => /\/node_modules\/(pg|mssql|tedious)\//.test(url));
    expect(drivers).toEqual([]);
    expect(resolved.filter((url) => url.endsWith('/src/outbox-key-lock.ts'))).toHaveLength(2);
  });
});
