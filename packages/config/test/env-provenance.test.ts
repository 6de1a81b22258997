/**
 * A problem with what a `QUEUEBOX_` variable set names the variable, not the file around it: an unknown section
 * or key created only by a variable (`QUEUEBOX_OUTBOXX__MAXATTEMPTS` was blamed on queuebox.yaml), a key of the file
 * a variable overrides, list items and references.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, type ConfigIssue } from '@queuebox/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createInMemorySecretResolver, loadConfig, overlayEnv } from '../src/index.ts';

const FILE = `outbox:
  maxAttempts: 3
outboxy:
  maxAttempts: 3
destinations:
  billing: { type: http, url: https://billing.example/hooks }
routes:
  - { match: "a.#", destination: billing }
`;

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'queuebox-env-provenance-'));
  await writeFile(join(dir, 'queuebox.yaml'), FILE);
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function issuesOf(env: Record<string, string>, text = FILE): Promise<readonly ConfigIssue[]> {
  await writeFile(join(dir, 'queuebox.yaml'), text);
  const error = await loadConfig({
    cwd: dir,
    env,
    secrets: createInMemorySecretResolver({ token: 'a-secret-from-the-store' }),
  }).then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof ConfigError)) throw new Error(`expected a ConfigError, got ${String(error)}`);
  return error.issues;
}

describe('the origin of a problem with what a variable set', () => {
  it('names the variable for an unknown section it creates, as for a single-segment one', async () => {
    // Act
    const nested = await issuesOf({ QUEUEBOX_OUTBOXX__MAXATTEMPTS: '3' }, 'outboxy: 1\n');
    const single = await issuesOf({ QUEUEBOX_FOO: '1' }, 'outboxy: 1\n');

    // Assess
    expect(nested).toEqual([
      { path: 'outboxy', message: expect.stringContaining('unknown key'), origin: 'queuebox.yaml:1' },
      {
        path: 'outboxx',
        message: 'unknown key "outboxx" (did you mean "outbox"?)',
        origin: 'QUEUEBOX_OUTBOXX__MAXATTEMPTS',
      },
    ]);
    expect(single).toContainEqual({ path: 'foo', message: 'unknown key "foo"', origin: 'QUEUEBOX_FOO' });
  });

  it('names the variable for an unknown key it creates inside a section of the file, or one the file lacks', async () => {
    // Act
    const issues = await issuesOf(
      {
        QUEUEBOX_OUTBOX__FOO__BAR: '1',
        QUEUEBOX_INBOX__RELAYX__ENABLED: 'true',
        QUEUEBOX_OUTBOX__BACKOFF__BASEMSX: '10',
      },
      'outbox:\n  maxAttempts: 3\n',
    );

    // Assess
    expect(issues).toEqual(
      expect.arrayContaining([
        { path: 'outbox.foo', message: 'unknown key "foo"', origin: 'QUEUEBOX_OUTBOX__FOO__BAR' },
        {
          path: 'inbox.relayx',
          message: expect.stringContaining('unknown key "relayx"'),
          origin: 'QUEUEBOX_INBOX__RELAYX__ENABLED',
        },
        {
          path: 'outbox.backoff.basemsx',
          message: expect.stringContaining('unknown key "basemsx"'),
          origin: 'QUEUEBOX_OUTBOX__BACKOFF__BASEMSX',
        },
      ]),
    );
    expect(issues).toHaveLength(3);
  });

  it('names the variable for a key of the file it overrides, and the file for an unknown section the file holds', async () => {
    // Act
    const issues = await issuesOf({
      QUEUEBOX_OUTBOX__MAXATTEMPTS: '0',
      QUEUEBOX_OUTBOXY__MAXATTEMPTS: '4',
    });

    // Assess
    expect(issues).toEqual(
      expect.arrayContaining([
        { path: 'outboxy', message: expect.stringContaining('unknown key'), origin: 'queuebox.yaml:3' },
        { path: 'outbox.maxAttempts', message: expect.any(String), origin: 'QUEUEBOX_OUTBOX__MAXATTEMPTS' },
      ]),
    );
    expect(issues).toHaveLength(2);
  });

  it('names the variable for a section of the file it replaces with a mapping', async () => {
    // Act
    const issues = await issuesOf({ QUEUEBOX_OUTBOXY__A__B: '4' }, 'outboxy: 3\n');

    // Assess
    expect(issues).toEqual([
      { path: 'outboxy', message: expect.stringContaining('unknown key'), origin: 'QUEUEBOX_OUTBOXY__A__B' },
    ]);
  });

  it('names the variable for a list item and an unknown key inside one', async () => {
    // Act
    const issues = await issuesOf({
      QUEUEBOX_ROUTES__0__FOO__BAR: '1',
      QUEUEBOX_ROUTES__1__MATCH: 'b.#',
      QUEUEBOX_OUTBOXY: '1',
    });

    // Assess
    expect(issues).toEqual(
      expect.arrayContaining([
        { path: 'outboxy', message: expect.stringContaining('unknown key'), origin: 'QUEUEBOX_OUTBOXY' },
        { path: 'routes[0].foo', message: 'unknown key "foo"', origin: 'QUEUEBOX_ROUTES__0__FOO__BAR' },
        {
          path: 'routes[1].destination',
          message: expect.stringContaining('is required'),
          origin: 'QUEUEBOX_ROUTES__1__MATCH',
        },
      ]),
    );
    expect(issues).toHaveLength(3);
  });

  it('names the variable for a reference it sets under an unknown section, resolved or not', async () => {
    // Act
    const issues = await issuesOf(
      {
        QUEUEBOX_ADMINX__TOKEN: 'secret://token',
        QUEUEBOX_DATABASEX__URL__PART: 'env://NOT_SET',
        QUEUEBOX_ADMIN__TOKEN: 'env://ALSO_NOT_SET',
      },
      'admin:\n  token: env://SET_IN_THE_FILE\n',
    );

    // Assess
    expect(issues).toEqual(
      expect.arrayContaining([
        { path: 'adminx', message: expect.stringContaining('unknown key'), origin: 'QUEUEBOX_ADMINX__TOKEN' },
        {
          path: 'databasex',
          message: expect.stringContaining('unknown key'),
          origin: 'QUEUEBOX_DATABASEX__URL__PART',
        },
        {
          path: 'databasex.url.part',
          message: expect.stringContaining('NOT_SET'),
          origin: 'QUEUEBOX_DATABASEX__URL__PART',
        },
        {
          path: 'admin.token',
          message: expect.stringContaining('ALSO_NOT_SET'),
          origin: 'QUEUEBOX_ADMIN__TOKEN',
        },
      ]),
    );
    expect(issues).toHaveLength(4);
  });
});

describe('overlayEnv', () => {
  it('records the variable as the origin of every mapping it creates', () => {
    // Prepare
    const origins = new Map([
      ['', 'queuebox.yaml'],
      ['outbox', 'queuebox.yaml:1'],
      ['outbox.maxAttempts', 'queuebox.yaml:2'],
    ]);

    // Act
    overlayEnv(
      { outbox: { maxAttempts: 3 } },
      {
        QUEUEBOX_OUTBOXX__MAXATTEMPTS: '3',
        QUEUEBOX_OUTBOX__FOO__BAR: '1',
        QUEUEBOX_INBOX__RELAY__ENABLED: 'true',
      },
      origins,
    );

    // Assess
    expect(Object.fromEntries(origins)).toEqual({
      '': 'queuebox.yaml',
      outbox: 'queuebox.yaml:1',
      'outbox.maxAttempts': 'queuebox.yaml:2',
      'outbox.foo': 'QUEUEBOX_OUTBOX__FOO__BAR',
      'outbox.foo.bar': 'QUEUEBOX_OUTBOX__FOO__BAR',
      outboxx: 'QUEUEBOX_OUTBOXX__MAXATTEMPTS',
      'outboxx.maxattempts': 'QUEUEBOX_OUTBOXX__MAXATTEMPTS',
      inbox: 'QUEUEBOX_INBOX__RELAY__ENABLED',
      'inbox.relay': 'QUEUEBOX_INBOX__RELAY__ENABLED',
      'inbox.relay.enabled': 'QUEUEBOX_INBOX__RELAY__ENABLED',
    });
  });
});
