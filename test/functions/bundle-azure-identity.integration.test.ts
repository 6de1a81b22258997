/**
 * scripts/bundle/azure-identity.ts: every credential class tedious constructs exists and refuses with a clear
 * error, so an Azure AD connection fails loudly on Lambda instead of with `undefined is not a constructor`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { QueueBoxError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import * as ours from '../../scripts/bundle/azure-identity.ts';
import { REPO_ROOT } from '../local/support.ts';

const CONNECTION = join(REPO_ROOT, 'node_modules', 'tedious', 'lib', 'connection.js');

/** The `@azure/identity` exports tedious's connection uses (`_identity.X`). */
function identityUsedByTedious(): string[] {
  const source = readFileSync(CONNECTION, 'utf8');
  return [...new Set([...source.matchAll(/\b_identity\.(\w+)/g)].map((m) => m[1] ?? ''))].sort();
}

describe('the @azure/identity stand-in', () => {
  it('exports every class tedious constructs, and tedious uses nothing else of the package', () => {
    // Act
    const used = identityUsedByTedious();

    // Assess
    expect(used).toEqual([
      'ClientSecretCredential',
      'DefaultAzureCredential',
      'ManagedIdentityCredential',
      'UsernamePasswordCredential',
    ]);
    for (const name of used) expect(typeof (ours as Record<string, unknown>)[name]).toBe('function');
  });

  it.each([
    [
      'UsernamePasswordCredential',
      () => new ours.UsernamePasswordCredential('common', 'client', 'user', 'pw'),
    ],
    ['ManagedIdentityCredential', () => new ours.ManagedIdentityCredential({})],
    ['DefaultAzureCredential', () => new ours.DefaultAzureCredential({ managedIdentityClientId: 'id' })],
    ['ClientSecretCredential', () => new ours.ClientSecretCredential('tenant', 'client', 'secret')],
  ])('%s refuses with AzureAdUnavailableError pointing at SQL authentication', (name, construct) => {
    // Act
    let thrown: unknown;
    try {
      construct();
    } catch (error) {
      thrown = error;
    }

    // Assess
    expect(thrown).toBeInstanceOf(ours.AzureAdUnavailableError);
    expect(thrown).toBeInstanceOf(QueueBoxError);
    const error = thrown as ours.AzureAdUnavailableError;
    expect(error.message).toMatch(/Azure AD authentication is not available in QueueBox's functions/);
    expect(error.message).toMatch(/use SQL authentication in database\.url/);
    expect(error.message).toContain(name);
    expect(error.context).toEqual({ credential: expect.stringContaining(name) });
  });
});
