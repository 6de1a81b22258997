import {
  type GetSecretValueCommandInput,
  type GetSecretValueCommandOutput,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  createInMemorySecretResolver,
  createSecretsManagerResolver,
  parseConfig,
  parseReference,
  redactConfig,
  redactConnectionString,
  resolveReferences,
  SECRET_CACHE_MAX_AGE_SECONDS,
  type SecretResolver,
} from '../src/index.ts';
import { anHttpDestination, anHttpSource } from './fixtures.ts';

function countingResolver(secrets: Record<string, string>): SecretResolver & { calls: string[] } {
  const inner = createInMemorySecretResolver(secrets);
  const calls: string[] = [];
  return {
    calls,
    getSecret(name) {
      calls.push(name);
      return inner.getSecret(name);
    },
  };
}

describe('parseReference', () => {
  it('reads secret and env references and leaves other text alone', () => {
    expect(parseReference('secret://queuebox/admin#token')).toEqual({
      kind: 'secret',
      name: 'queuebox/admin',
      jsonKey: 'token',
    });
    expect(parseReference('secret://stripe')).toEqual({ kind: 'secret', name: 'stripe' });
    expect(parseReference('env://DATABASE_URL')).toEqual({ kind: 'env', name: 'DATABASE_URL' });
    expect(parseReference('https://example.com')).toBeUndefined();
  });
});

describe('resolveReferences', () => {
  it('replaces secret and env references, reads each secret once, and types the result by key', async () => {
    // Prepare
    const secrets = countingResolver({
      'queuebox/admin': '{"token":"adm1n","port":9000}',
      stripe: 'whsec_live',
    });
    const input = {
      admin: { token: 'secret://queuebox/admin#token' },
      http: { port: 'secret://queuebox/admin#port' },
      database: { url: 'env://DATABASE_URL' },
      sources: {
        stripe: anHttpSource({ auth: { scheme: 'stripe', secrets: ['secret://stripe', 'plain'] } }),
      },
    };

    // Act
    const result = await resolveReferences(input, {
      env: { DATABASE_URL: 'postgres://app:pw@db/app' },
      secrets,
    });

    // Assess
    expect(result.issues).toEqual([]);
    expect(result.value).toMatchObject({
      admin: { token: 'adm1n' },
      http: { port: 9000 },
      database: { url: 'postgres://app:pw@db/app' },
      sources: { stripe: { auth: { secrets: ['whsec_live', 'plain'] } } },
    });
    expect(secrets.calls.sort()).toEqual(['queuebox/admin', 'stripe']);
    expect([...result.references].sort()).toEqual([
      'admin.token',
      'database.url',
      'http.port',
      'sources.stripe.auth.secrets[0]',
    ]);
    expect(input.admin.token).toBe('secret://queuebox/admin#token');
  });

  it('reports every failure with path and origin, never the secret', async () => {
    // Prepare
    const secrets = createInMemorySecretResolver({ notjson: 'sup3rsecret', obj: '{"a":"x"}' });
    const input = {
      admin: { token: 'secret://missing' },
      database: { url: 'env://NOPE' },
      destinations: {
        d: anHttpDestination({
          headers: { 'X-A': 'secret://notjson#k', 'X-B': 'secret://obj#b', 'X-C': 'env://1x' },
        }),
      },
    };
    const origins = new Map([
      ['admin.token', 'queuebox.yaml:2'],
      ['database', 'queuebox.yaml:4'],
      ['destinations.d', 'QUEUEBOX_DESTINATIONS__D'],
    ]);

    // Act
    const result = await resolveReferences(input, { env: {}, secrets, origins });

    // Assess
    expect(result.issues.sort((a, b) => a.path.localeCompare(b.path))).toEqual([
      {
        path: 'admin.token',
        message: expect.stringContaining('secret://missing could not be read'),
        origin: 'queuebox.yaml:2',
      },
      {
        path: 'database.url',
        message: 'refers to the environment variable NOPE, which is not set',
        origin: 'queuebox.yaml:4',
      },
      {
        path: 'destinations.d.headers.X-A',
        message: 'secret://notjson is not a JSON object, so it has no key "k"',
        origin: 'QUEUEBOX_DESTINATIONS__D',
      },
      {
        path: 'destinations.d.headers.X-B',
        message: 'secret://obj has no text value at key "b"',
        origin: 'QUEUEBOX_DESTINATIONS__D',
      },
      {
        path: 'destinations.d.headers.X-C',
        message: expect.stringContaining('not a valid reference'),
        origin: 'QUEUEBOX_DESTINATIONS__D',
      },
    ]);
    expect(JSON.stringify(result.issues)).not.toContain('sup3rsecret');
  });
});

describe('redactConfig', () => {
  it('hides referenced values, credential keys and connection-string passwords', async () => {
    // Prepare
    const resolved = await resolveReferences(
      {
        database: { url: 'env://DATABASE_URL' },
        admin: { token: 'plain-token-of-16+' },
        sources: { s: anHttpSource({ auth: { scheme: 'bearer', secrets: ['t1', 't2'] } }) },
        destinations: {
          d: anHttpDestination({
            url: 'env://HOOK_URL',
            headers: { Authorization: 'Bearer x', 'X-Api-Key': 'k', 'X-Tenant': 'acme' },
            signing: { scheme: 'standard-webhooks', secrets: ['whsec_YSBzaWduaW5nIGtleSBvZiAyNCBieXRlcw=='] },
          }),
        },
      },
      {
        env: { DATABASE_URL: 'postgres://app:pw@db/app', HOOK_URL: 'https://hooks.example/t0k3n' },
        secrets: createInMemorySecretResolver({}),
      },
    );
    const config = parseConfig(resolved.value, undefined, { references: resolved.references });

    // Act
    const redacted = redactConfig(config);

    // Assess
    expect(redacted.database.url).toBe('***');
    expect(redacted.admin.token).toBe('***');
    expect(redacted.sources.s).toMatchObject({ auth: { scheme: 'bearer', secrets: ['***', '***'] } });
    expect(redacted.destinations.d).toMatchObject({
      url: '***',
      headers: { Authorization: '***', 'X-Api-Key': '***', 'X-Tenant': '***' },
      signing: { scheme: 'standard-webhooks', secrets: ['***'] },
    });
    expect(redacted.outbox.maxAttempts).toBe(10);
    expect(config.admin.token).toBe('plain-token-of-16+');
  });

  it('masks connection-string passwords that came in as plain text', () => {
    // Prepare
    const config = parseConfig({ database: { url: 'postgres://app:pw@db:5432/app' } });

    // Act
    const redacted = redactConfig(config);

    // Assess
    expect(redacted.database.url).toBe('postgres://***@db:5432/app');
    expect(redactConnectionString('Server=db;User Id=sa;Password=x;')).toBe(
      'Server=db;User Id=sa;Password=***;',
    );
  });

  it('hides NATS token URLs, query-string tokens and every destination header value (issue 13)', () => {
    // Prepare: plain values, no references, under keys that name no credential.
    const config = parseConfig({
      sources: {
        feed: {
          type: 'nats',
          servers: ['nats://s3cr3t-token@nats.internal:4222'],
          stream: 'FEED',
        },
      },
      destinations: {
        hook: {
          type: 'http',
          url: 'https://hooks.example/in?token=q5-token&tenant=acme',
          headers: {
            Cookie: 'session=c00kie',
            'X-Tenant-Key': 'tenant-k3y',
            'X-Custom-Auth': 'Custom c4',
            Accept: 'x',
          },
        },
      },
    });

    // Act
    const printed = JSON.stringify(redactConfig(config));

    // Assess
    for (const secret of ['s3cr3t-token', 'q5-token', 'c00kie', 'tenant-k3y', 'c4'])
      expect(printed).not.toContain(secret);
    expect(printed).toContain('nats://***@nats.internal:4222');
    expect(printed).toContain('https://hooks.example/in?token=***&tenant=***');
  });
});

/**
 * A real SDK client whose GetSecretValue is answered by `answer` in the client's own middleware stack, before any
 * request is built: no network, no credentials.
 */
function aSecretsManagerClient(
  answer: (secretId: string) => GetSecretValueCommandOutput,
): SecretsManagerClient {
  const client = new SecretsManagerClient({ region: 'eu-west-1' });
  client.middlewareStack.add(
    () => async (args) => ({
      output: answer((args.input as GetSecretValueCommandInput).SecretId ?? ''),
      response: {},
    }),
    { step: 'initialize', name: 'answerGetSecretValue' },
  );
  return client;
}

describe('createSecretsManagerResolver', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('asks GetSecretValue once per name and caches the answer', async () => {
    // Prepare
    const asked: string[] = [];
    const client = aSecretsManagerClient((id) => {
      asked.push(id);
      return { SecretString: `value-of-${id}`, $metadata: {} };
    });
    const resolver = createSecretsManagerResolver({ client });

    // Act
    const first = await resolver.getSecret('a');
    const again = await resolver.getSecret('a');
    const other = await resolver.getSecret('b');

    // Assess
    expect([first, again, other]).toEqual(['value-of-a', 'value-of-a', 'value-of-b']);
    expect(asked).toEqual(['a', 'b']);
  });

  it('reads a secret again once its value is older than maxAgeSeconds, so a rotation is seen', async () => {
    // Prepare
    let now = 0;
    let version = 1;
    const client = aSecretsManagerClient((id) => ({ SecretString: `${id}-v${version}`, $metadata: {} }));
    const resolver = createSecretsManagerResolver({ client, maxAgeSeconds: 1, now: () => now });

    // Act
    const first = await resolver.getSecret('db');
    version = 2;
    now = 1000;
    const cached = await resolver.getSecret('db');
    now = 1001;
    const rotated = await resolver.getSecret('db');

    // Assess
    expect([first, cached, rotated]).toEqual(['db-v1', 'db-v1', 'db-v2']);
  });

  it('reads a secret anew when asked for a fresh value, and caches what it read', async () => {
    // Prepare
    let version = 1;
    const client = aSecretsManagerClient((id) => ({ SecretString: `${id}-v${version}`, $metadata: {} }));
    const resolver = createSecretsManagerResolver({ client });

    // Act
    const first = await resolver.getSecret('db');
    version = 2;
    const cached = await resolver.getSecret('db');
    const fresh = await resolver.getSecret('db', { fresh: true });
    version = 3;
    const afterFresh = await resolver.getSecret('db');

    // Assess
    expect([first, cached, fresh, afterFresh]).toEqual(['db-v1', 'db-v1', 'db-v2', 'db-v2']);
  });

  it('passes freshSecrets on to the resolver, once per secret name', async () => {
    // Prepare
    const asked: (boolean | undefined)[] = [];
    const secrets = {
      getSecret: async (_name: string, read?: { readonly fresh?: boolean }) => {
        asked.push(read?.fresh);
        return '{"url":"postgres://db/x","token":"t"}';
      },
    };
    const input = { database: { url: 'secret://db#url' }, admin: { token: 'secret://db#token' } };

    // Act
    await resolveReferences(input, { env: {}, secrets });
    await resolveReferences(input, { env: {}, secrets, freshSecrets: true });

    // Assess
    expect(asked).toEqual([undefined, true]);
  });

  it('keeps a secret 5 minutes by default, then sees its rotation', async () => {
    // Prepare
    let now = 0;
    let version = 1;
    const client = aSecretsManagerClient((id) => ({ SecretString: `${id}-v${version}`, $metadata: {} }));
    const resolver = createSecretsManagerResolver({ client, now: () => now });

    // Act
    const first = await resolver.getSecret('db');
    version = 2;
    now = SECRET_CACHE_MAX_AGE_SECONDS * 1000 - 1;
    const cached = await resolver.getSecret('db');
    now = SECRET_CACHE_MAX_AGE_SECONDS * 1000 + 1;
    const rotated = await resolver.getSecret('db');

    // Assess
    expect(SECRET_CACHE_MAX_AGE_SECONDS).toBe(300);
    expect([first, cached, rotated]).toEqual(['db-v1', 'db-v1', 'db-v2']);
  });

  it('keeps a secret maxAgeSeconds by the monotonic clock, whatever steps the wall clock makes', async () => {
    // Prepare: the wall clock (Date) is faked and stepped; the monotonic clock is the injected one.
    vi.useFakeTimers({ toFake: ['Date'], now: Date.parse('2026-12-07T05:00:00Z') });
    let now = 0;
    let version = 1;
    const client = aSecretsManagerClient((id) => ({ SecretString: `${id}-v${version}`, $metadata: {} }));
    const resolver = createSecretsManagerResolver({ client, now: () => now });

    // Act: the wall clock steps back an hour (NTP), then 5 minutes pass
    const first = await resolver.getSecret('db');
    version = 2;
    vi.setSystemTime(Date.now() - 3_600_000);
    now = SECRET_CACHE_MAX_AGE_SECONDS * 1000 - 1;
    const cached = await resolver.getSecret('db');
    now = SECRET_CACHE_MAX_AGE_SECONDS * 1000 + 1;
    const rotated = await resolver.getSecret('db');

    // Assess: read again after 5 minutes, not an hour and 5 minutes (as before, on Date.now)
    expect([first, cached, rotated]).toEqual(['db-v1', 'db-v1', 'db-v2']);
  });

  it('keeps a secret by performance.now by default, not by the wall clock', async () => {
    // Prepare: only Date is faked (performance.now runs on); maxAgeSeconds 0.2
    vi.useFakeTimers({ toFake: ['Date'], now: Date.parse('2026-12-07T05:00:00Z') });
    let version = 1;
    const client = aSecretsManagerClient((id) => ({ SecretString: `${id}-v${version}`, $metadata: {} }));
    const resolver = createSecretsManagerResolver({ client, maxAgeSeconds: 0.2 });

    // Act: the wall clock steps back an hour, then 0.3 s pass
    await resolver.getSecret('db');
    version = 2;
    vi.setSystemTime(Date.now() - 3_600_000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const rotated = await resolver.getSecret('db');

    // Assess
    expect(rotated).toBe('db-v2');
  });

  it('reads a binary secret as UTF-8 text', async () => {
    // Prepare
    const client = aSecretsManagerClient(() => ({
      SecretBinary: new TextEncoder().encode('binary-é'),
      $metadata: {},
    }));
    const resolver = createSecretsManagerResolver({ client });

    // Act
    const value = await resolver.getSecret('bin');

    // Assess
    expect(value).toBe('binary-é');
  });

  it('answers no value for an empty secret, and caches nothing with maxAgeSeconds 0', async () => {
    // Prepare
    let calls = 0;
    const client = aSecretsManagerClient((id) => {
      calls++;
      return id === 'empty' ? { SecretString: '', $metadata: {} } : { SecretString: 'v', $metadata: {} };
    });
    const resolver = createSecretsManagerResolver({ client, maxAgeSeconds: 0 });

    // Act
    const empty = await resolver.getSecret('empty').catch((e: Error) => e.message);
    await resolver.getSecret('a');
    await resolver.getSecret('a');

    // Assess
    expect(empty).toBe('Secret empty has no value');
    expect(calls).toBe(3);
  });

  it('does not cache a failed read', async () => {
    // Prepare
    let calls = 0;
    const client = aSecretsManagerClient(() => {
      calls++;
      if (calls === 1) throw new Error('throttled');
      return { SecretString: 'ok', $metadata: {} };
    });
    const resolver = createSecretsManagerResolver({ client });

    // Act
    const failure = await resolver.getSecret('a').catch((e: Error) => e.message);
    const retry = await resolver.getSecret('a');

    // Assess
    expect(failure).toBe('throttled');
    expect(retry).toBe('ok');
    expect(calls).toBe(2);
  });
});
