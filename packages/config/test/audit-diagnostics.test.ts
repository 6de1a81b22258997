/**
 * Smaller findings of the operator audit: where a problem came from, how it is worded, and warnings about weak
 * source credentials.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@queuebox/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { configWarnings, loadConfig, parseConfig, parseConfigYaml, validateConfig } from '../src/index.ts';
import { anHttpSource } from './fixtures.ts';

const LONG = 'a-token-that-is-long-enough-0123';

describe('entries created only by environment variables', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'queuebox-config-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('name the variable as the origin of what they lack, not the file', async () => {
    // Prepare
    await writeFile(
      join(dir, 'queuebox.yaml'),
      'destinations:\n  d: { type: http, url: "https://x.example/h" }\nroutes:\n  - { match: "#", destination: d }\n',
    );

    // Act
    const error = await loadConfig({
      cwd: dir,
      env: {
        QUEUEBOX_DESTINATIONS__NEW__URL: 'https://n.example/h',
        QUEUEBOX_ROUTES__1__MATCH: 'orders.#',
      },
    }).catch((e: unknown) => e);

    // Assess
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).issues).toEqual([
      expect.objectContaining({ path: 'destinations.new.type', origin: 'QUEUEBOX_DESTINATIONS__NEW__URL' }),
      expect.objectContaining({ path: 'routes[1].destination', origin: 'QUEUEBOX_ROUTES__1__MATCH' }),
    ]);
  });
});

describe('messages', () => {
  it('say "a finite number" for .inf and .nan', () => {
    // Prepare
    const doc = parseConfigYaml(
      'outbox:\n  pollIntervalMs: .inf\n  batchSize: .nan\n  maxAttempts: -.inf\n',
      'q.yaml',
    );

    // Act
    const result = validateConfig(doc.value, doc.origins);

    // Assess
    expect(result.ok ? [] : result.issues).toEqual([
      {
        path: 'outbox.pollIntervalMs',
        message: 'must be a finite number, not infinity (.inf)',
        origin: 'q.yaml:2',
      },
      { path: 'outbox.batchSize', message: 'must be a finite number, not NaN (.nan)', origin: 'q.yaml:3' },
      {
        path: 'outbox.maxAttempts',
        message: 'must be a finite number, not -infinity (-.inf)',
        origin: 'q.yaml:4',
      },
    ]);
  });

  it('report a duplicate YAML key at its path, with both lines', () => {
    // Act
    const doc = parseConfigYaml(
      'sources:\n  a:\n    type: http\n    type: amqp\nroutes: []\nroutes: []\n',
      'queuebox.yaml',
    );

    // Assess
    expect(doc.issues).toEqual([
      {
        path: 'sources.a.type',
        message: 'YAML: the key "type" is set twice (first at queuebox.yaml:3); keep one',
        origin: 'queuebox.yaml:4',
      },
      {
        path: 'routes',
        message: 'YAML: the key "routes" is set twice (first at queuebox.yaml:5); keep one',
        origin: 'queuebox.yaml:6',
      },
    ]);
  });
});

describe('configWarnings: weak source credentials', () => {
  it('warns about a short bearer token and an empty or short basic password, without quoting them', () => {
    // Prepare
    const config = parseConfig({
      sources: {
        weak: anHttpSource({
          auth: { scheme: 'bearer', secrets: [LONG, 'a'] },
          idempotencyKey: { bodyHash: true },
        }),
        emptypw: anHttpSource({
          auth: { scheme: 'basic', secrets: ['ops:'] },
          idempotencyKey: { bodyHash: true },
        }),
        shortpw: anHttpSource({
          auth: { scheme: 'basic', secrets: ['ops:pw-1234'] },
          idempotencyKey: { bodyHash: true },
        }),
        strong: anHttpSource({
          auth: { scheme: 'basic', secrets: [`ops:${LONG}`] },
          idempotencyKey: { bodyHash: true },
        }),
      },
    });

    // Act
    const warnings = configWarnings(config);

    // Assess
    expect(warnings).toEqual([
      {
        path: 'sources.weak.auth.secrets[1]',
        message: expect.stringContaining('bearer token of 1 character'),
      },
      { path: 'sources.emptypw.auth.secrets[0]', message: expect.stringContaining('empty password') },
      {
        path: 'sources.shortpw.auth.secrets[0]',
        message: expect.stringContaining('password of 7 characters'),
      },
    ]);
    expect(JSON.stringify(warnings)).not.toContain('pw-1234');
  });

  it('warns about scheme none on a host other machines reach, not on a loopback one', () => {
    // Prepare
    const sources = { open: anHttpSource({ auth: { scheme: 'none' }, idempotencyKey: { bodyHash: true } }) };

    // Act
    const exposed = configWarnings(parseConfig({ http: { host: '0.0.0.0' }, sources }));
    const local = ['127.0.0.1', 'localhost', '::1', '[::1]'].flatMap((host) =>
      configWarnings(parseConfig({ http: { host }, sources })),
    );

    // Assess
    expect(exposed).toEqual([
      { path: 'sources.open.auth.scheme', message: expect.stringContaining('http.host is 0.0.0.0') },
    ]);
    expect(local).toEqual([]);
  });
});
