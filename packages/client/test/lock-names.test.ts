/**
 * The lock names the client documents are the stores' own, and importing the client still loads no driver (the
 * names come from the stores' driver-free `outbox-key-lock` modules, not from their indexes, which load pg and
 * mssql). The import is checked in a child Node process, so this process's module cache does not hide a load.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
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

describe('the SQL Server lock name documented in README.md', () => {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

  it("lists resources that are outboxKeyLockResource's own, for every schema spelling it names", () => {
    // Prepare: the rows of the vector table: | `schema` or `Schema` | `key` … | `resource` |
    const rows = [
      ...readme.matchAll(/^\| (`[^|]+`) +\| `([^`]+)`[^|]* \| `(queuebox\.outbox-key:[^`]+)` \|$/gm),
    ];

    // Assess
    expect(rows.map((row) => row[2])).toEqual(['order-1', 'café', '😀']);
    for (const [, schemas = '', key = '', resource] of rows) {
      for (const [, schema = ''] of schemas.matchAll(/`([^`]+)`/g)) {
        expect(client.outboxKeyLockResource(schema, key)).toBe(resource);
      }
    }
  });

  it('gives T-SQL that hashes the UTF-8 of the key (COLLATE inside the CAST) in lower-case hex', () => {
    expect(readme).toContain(
      "LOWER(CONVERT(CHAR(64), HASHBYTES('SHA2_256', CAST(@key COLLATE Latin1_General_100_BIN2_UTF8 AS VARCHAR(8000))), 2))",
    );
    expect(readme).toContain(
      "@LockMode = N'Exclusive',\n  @LockOwner = N'Transaction', @LockTimeout = 10000;",
    );
    expect(readme).toContain('Before SQL Server 2019 this cannot be done in T-SQL alone');
  });
});
