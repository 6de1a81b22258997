import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@queuebox/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  createInMemorySecretResolver,
  type HttpSourceConfig,
  loadConfig,
  parseConfigYaml,
  provenanceOf,
  redactConfig,
} from '../src/index.ts';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'queuebox-config-'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function failure(promise: Promise<unknown>): Promise<ConfigError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof ConfigError)) throw new Error(`expected a ConfigError, got ${String(error)}`);
  return error;
}

const STRIPE_YAML = `# QueueBox
database:
  schema: app_queue
outbox:
  maxAttempts: 3
sources:
  stripe:
    type: http
    auth: { scheme: stripe, secrets: [secret://stripe#webhook] }
    idempotencyKey: { path: $.id }
    eventTypePath: $.type
    topic: "stripe.{{ eventType }}"
destinations:
  billing: { type: http, url: https://billing.example/hooks }
routes:
  - { match: "stripe.#", destination: billing }
`;

describe('loadConfig', () => {
  it('reads queuebox.yaml from cwd, overlays the environment and resolves references', async () => {
    // Prepare
    await writeFile(join(dir, 'queuebox.yaml'), STRIPE_YAML);
    const env = {
      QUEUEBOX_OUTBOX__MAXATTEMPTS: '5',
      QUEUEBOX_DATABASE__URL: 'env://DATABASE_URL',
      DATABASE_URL: 'postgres://app:pw@127.0.0.1:5432/test',
    };
    const secrets = createInMemorySecretResolver({ stripe: '{"webhook":"whsec_abc"}' });

    // Act
    const config = await loadConfig({ cwd: dir, env, secrets });

    // Assess
    expect(config.outbox.maxAttempts).toBe(5);
    expect(config.database).toMatchObject({
      provider: 'postgres',
      url: 'postgres://app:pw@127.0.0.1:5432/test',
      schema: 'app_queue',
    });
    expect((config.sources.stripe as HttpSourceConfig).auth).toMatchObject({ secrets: ['whsec_abc'] });
    expect(provenanceOf(config)?.origins.get('outbox.maxAttempts')).toBe('QUEUEBOX_OUTBOX__MAXATTEMPTS');
    expect(provenanceOf(config)?.origins.get('database.schema')).toBe('queuebox.yaml:3');
    expect(redactConfig(config).database.url).toBe('***');
    expect(redactConfig(config).sources.stripe).toMatchObject({ auth: { secrets: ['***'] } });
  });

  it('gives all defaults plus the environment when the default file is missing', async () => {
    // Act
    const config = await loadConfig({ cwd: dir, env: { QUEUEBOX_HTTP__PORT: '0' } });

    // Assess
    expect(config.http.port).toBe(0);
    expect(config.database.provider).toBe('pglite');
  });

  it('reads the file named by QUEUEBOX_CONFIG, relative to cwd', async () => {
    // Prepare
    await mkdir(join(dir, 'conf'));
    await writeFile(join(dir, 'conf', 'local.yaml'), 'logLevel: debug\n');

    // Act
    const config = await loadConfig({ cwd: dir, env: { QUEUEBOX_CONFIG: 'conf/local.yaml' } });

    // Assess
    expect(config.logLevel).toBe('debug');
  });

  it('prefers options.file over QUEUEBOX_CONFIG', async () => {
    // Prepare
    await writeFile(join(dir, 'a.yaml'), 'logLevel: warn\n');
    await writeFile(join(dir, 'b.yaml'), 'logLevel: error\n');

    // Act
    const config = await loadConfig({ cwd: dir, file: 'a.yaml', env: { QUEUEBOX_CONFIG: 'b.yaml' } });

    // Assess
    expect(config.logLevel).toBe('warn');
  });

  it.each([
    [{ file: 'nope.yaml', env: {} }, 'nope.yaml'],
    [{ env: { QUEUEBOX_CONFIG: 'gone.yaml' } }, 'QUEUEBOX_CONFIG'],
  ])('refuses a missing explicit file (%j)', async (options, origin) => {
    // Act
    const error = await failure(loadConfig({ cwd: dir, ...options }));

    // Assess
    expect(error.issues).toEqual([{ path: '', message: expect.stringContaining('does not exist'), origin }]);
  });

  it('reports every problem of file, environment and references, each with its line or variable', async () => {
    // Prepare
    await writeFile(
      join(dir, 'queuebox.yaml'),
      [
        'outbox:',
        '  maxAttempt: 3', // line 2: unknown key
        'sources:',
        '  orders:',
        '    type: amqp',
        '    url: amqp://127.0.0.1',
        '    queue: orders',
        '    topic: "orders.{{ eventType }}"', // line 8: the seed's refusal
        'admin:',
        '  token: secret://queuebox/admin#token', // line 10: missing secret
        'routes:',
        '  - match: "orders.#"',
        '    destination: events', // line 13: no such destination
      ].join('\n'),
    );
    const env = { QUEUEBOX_INBOX__BASEPATH: 'inbox/', QUEUEBOX_HTTP__PORT: 'eighty' };

    // Act
    const error = await failure(loadConfig({ cwd: dir, env, secrets: createInMemorySecretResolver({}) }));

    // Assess
    expect(error.issues).toEqual(
      expect.arrayContaining([
        {
          path: 'outbox.maxAttempt',
          message: 'unknown key "maxAttempt" (did you mean "maxAttempts"?)',
          origin: 'queuebox.yaml:2',
        },
        {
          path: 'sources.orders.topic',
          message: expect.stringContaining('{{ eventType }}'),
          origin: 'queuebox.yaml:8',
        },
        {
          path: 'admin.token',
          message: expect.stringContaining('could not be read'),
          origin: 'queuebox.yaml:10',
        },
        {
          path: 'routes[0].destination',
          message: expect.stringContaining('"events"'),
          origin: 'queuebox.yaml:13',
        },
        {
          path: 'inbox.basePath',
          message: expect.stringContaining('must start with "/"'),
          origin: 'QUEUEBOX_INBOX__BASEPATH',
        },
        { path: 'http.port', message: 'must be a number, not text', origin: 'QUEUEBOX_HTTP__PORT' },
      ]),
    );
    expect(error.issues).toHaveLength(6);
    expect(error.message).toContain('outbox.maxAttempt: unknown key');
  });

  it('reports a duplicate YAML key at its own path and line', async () => {
    // Prepare
    await writeFile(join(dir, 'queuebox.yaml'), 'outbox:\n  maxAttempts: 3\n  maxAttempts: 4\n');

    // Act
    const error = await failure(loadConfig({ cwd: dir, env: {} }));

    // Assess
    expect(error.issues).toEqual([
      {
        path: 'outbox.maxAttempts',
        message: 'YAML: the key "maxAttempts" is set twice (first at queuebox.yaml:2); keep one',
        origin: 'queuebox.yaml:3',
      },
    ]);
  });

  it('reports YAML syntax errors with their line', async () => {
    // Prepare
    await writeFile(join(dir, 'queuebox.yaml'), 'outbox:\n  maxAttempts: [3\n');

    // Act
    const error = await failure(loadConfig({ cwd: dir, env: {} }));

    // Assess
    expect(error.issues).toEqual([
      expect.objectContaining({
        path: '',
        message: expect.stringContaining('YAML'),
        origin: expect.stringMatching(/^queuebox\.yaml:\d+$/),
      }),
    ]);
  });
});

describe('parseConfigYaml', () => {
  it('records the line of every key and list item', () => {
    // Act
    const doc = parseConfigYaml(STRIPE_YAML, 'q.yaml');

    // Assess
    expect(doc.issues).toEqual([]);
    expect(doc.origins.get('outbox.maxAttempts')).toBe('q.yaml:5');
    expect(doc.origins.get('sources.stripe.auth.secrets[0]')).toBe('q.yaml:9');
    expect(doc.origins.get('routes[0]')).toBe('q.yaml:16');
  });

  it('treats an empty file as no settings and refuses a file that is not a mapping', () => {
    expect(parseConfigYaml('', 'e.yaml').value).toEqual({});
    expect(parseConfigYaml('- a\n- b\n', 'l.yaml').issues).toEqual([
      { path: '', message: expect.stringContaining('mapping'), origin: 'l.yaml' },
    ]);
  });
});
