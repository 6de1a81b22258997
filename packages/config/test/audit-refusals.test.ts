/**
 * Values the operator audit found accepted by `config check` but broken at run time: shell-style `${VAR}` taken
 * literally as a secret, integers without an upper bound, admin and bearer tokens that can never authenticate, and an
 * `inbox.basePath` that hides the server's own routes.
 */
import type { ConfigIssue } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import {
  type ConfigOrigins,
  configJsonSchema,
  createInMemorySecretResolver,
  parseConfigYaml,
  resolveReferences,
  validateConfig,
} from '../src/index.ts';
import { anHttpDestination, anHttpSource } from './fixtures.ts';

/** `${NAME}`, written without a template placeholder. */
const shell = (name: string) => `\${${name}}`;

/** The longest delay a Node.js timer keeps (2^31 − 1 ms); a longer one fires after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

function issuesOf(input: unknown, origins?: ConfigOrigins): ConfigIssue[] {
  const result = validateConfig(input, origins);
  return result.ok ? [] : result.issues;
}

function issueAt(path: string, text: string) {
  return expect.objectContaining({ path, message: expect.stringContaining(text) });
}

describe('shell-style variables (never substituted)', () => {
  it('refuses it in the admin token and in source secrets, naming the variable and env://NAME', () => {
    // Prepare: the audited file.
    const doc = parseConfigYaml(
      `admin:
  token: \${QUEUEBOX_ADMIN_TOKEN_VALUE}
sources:
  hooks:
    type: http
    auth: { scheme: bearer, secrets: ["\${HOOKS_TOKEN}"] }
    idempotencyKey: { bodyHash: true }
    topic: "{{ source }}"
`,
      'queuebox.yaml',
    );

    // Act
    const issues = issuesOf(doc.value, doc.origins);

    // Assess
    expect(doc.issues).toEqual([]);
    expect(issues).toEqual([
      {
        path: 'admin.token',
        message: expect.stringContaining(shell('QUEUEBOX_ADMIN_TOKEN_VALUE')),
        origin: 'queuebox.yaml:2',
      },
      {
        path: 'sources.hooks.auth.secrets[0]',
        message: expect.stringContaining('write env://HOOKS_TOKEN'),
        origin: 'queuebox.yaml:6',
      },
    ]);
  });

  it('refuses it anywhere inside a longer value (a URL, a header), and leaves $ alone otherwise', () => {
    // Act
    const issues = issuesOf({
      database: { url: `postgres://app:${shell('DB_PASSWORD')}@db/app` },
      destinations: {
        d: anHttpDestination({ headers: { 'X-Api-Key': `k-${shell('API_KEY')}` } }),
        e: anHttpDestination({
          headers: { 'X-Price': '$5', 'X-Other': `\${not a name}`, 'X-Lone': '$HOME' },
        }),
      },
    });

    // Assess
    expect(issues).toEqual([
      issueAt('database.url', 'env://DB_PASSWORD'),
      issueAt('destinations.d.headers.X-Api-Key', 'env://API_KEY'),
    ]);
  });

  it('does not quote a referenced value that holds a shell variable', async () => {
    // Prepare
    const resolved = await resolveReferences(
      { admin: { token: 'env://ADMIN_TOKEN' } },
      {
        env: { ADMIN_TOKEN: `abc${shell('SECRET_PART')}defghijklmnop` },
        secrets: createInMemorySecretResolver({}),
      },
    );

    // Act
    const result = validateConfig(resolved.value, undefined, { references: resolved.references });

    // Assess
    const issues = result.ok ? [] : result.issues;
    expect(issues).toEqual([issueAt('admin.token', 'never substituted')]);
    expect(JSON.stringify(issues)).not.toContain('SECRET_PART');
  });
});

describe('upper bounds of whole numbers', () => {
  /** Every integer position of the JSON Schema, with its path, maximum and description. */
  function integers(): { path: string; maximum: unknown; description: unknown }[] {
    const found: { path: string; maximum: unknown; description: unknown }[] = [];
    const walk = (node: unknown, path: string): void => {
      if (typeof node !== 'object' || node === null) return;
      const n = node as Record<string, unknown>;
      if (n.type === 'integer') found.push({ path, maximum: n.maximum, description: n.description });
      for (const [key, child] of Object.entries(n)) {
        if (key === 'properties') {
          for (const [name, property] of Object.entries(child as Record<string, unknown>)) {
            walk(property, `${path}.${name}`);
          }
        } else if (key === 'additionalProperties') walk(child, `${path}.*`);
        else if (key === 'items') walk(child, `${path}[]`);
        else if (key === 'anyOf' || key === 'oneOf' || key === 'allOf') {
          for (const option of child as unknown[]) walk(option, path);
        }
      }
    };
    walk(configJsonSchema(), '');
    return found;
  }

  it('gives every integer key a maximum a timer can hold, and says it in the description', () => {
    // Act
    const all = integers();

    // Assess
    expect(all.length).toBeGreaterThan(40);
    for (const { path, maximum, description } of all) {
      expect(maximum, path).toBeTypeOf('number');
      expect(maximum as number, path).toBeLessThanOrEqual(MAX_TIMER_MS);
      if (typeof description === 'string') expect(description, path).toContain(`at most ${maximum}`);
    }
  });

  it.each([
    ['outbox.pollIntervalMs', { outbox: { pollIntervalMs: 2_000_000_000 } }, 'at most 86400000 ms (24 h)'],
    ['inbox.relay.pollIntervalMs', { inbox: { relay: { pollIntervalMs: 2_000_000_000 } } }, '86400000 ms'],
    ['outbox.maxAttempts', { outbox: { maxAttempts: 3_000_000_000 } }, 'at most 1000000'],
    ['inbox.relay.maxAttempts', { inbox: { relay: { maxAttempts: 3_000_000_000 } } }, 'at most 1000000'],
    ['sources.s.maxAttempts', { sources: { s: anHttpSource({ maxAttempts: 2 ** 31 }) } }, 'at most 1000000'],
    [
      'destinations.d.maxAttempts',
      { destinations: { d: anHttpDestination({ maxAttempts: 2 ** 31 }) } },
      'at most 1000000',
    ],
    [
      'retention.keepDeadHours',
      { retention: { keepDeadHours: 100_000_000 } },
      'at most 876000 h (100 years)',
    ],
    ['retention.keepSentHours', { retention: { keepSentHours: 100_000_000 } }, 'at most 876000 h'],
    ['outbox.claimTimeoutMs', { outbox: { claimTimeoutMs: 2 ** 40 } }, 'at most 86400000 ms'],
    ['outbox.backoff.maxMs', { outbox: { backoff: { maxMs: 2 ** 40 } } }, 'at most 604800000 ms (7 days)'],
    ['http.maxConnections', { http: { maxConnections: 10_000_000 } }, 'at most 100000'],
    [
      'aws.alarms.oldestPendingAgeSeconds',
      { aws: { alarms: { oldestPendingAgeSeconds: 10 ** 12 } } },
      'at most 2592000 s (30 days)',
    ],
  ])('refuses an audited value of %s', (path, input, text) => {
    expect(issuesOf(input)).toEqual(expect.arrayContaining([issueAt(path, text)]));
  });

  it('accepts the largest values', () => {
    expect(
      issuesOf({
        outbox: { pollIntervalMs: 86_400_000, maxAttempts: 1_000_000 },
        inbox: { relay: { pollIntervalMs: 86_400_000 } },
        retention: { keepSentHours: 876_000, keepDeadHours: 876_000 },
      }),
    ).toEqual([]);
  });
});

describe('admin.token and bearer secrets that could never authenticate', () => {
  it.each([
    ['a space', 'correct horse battery staple'],
    ['non-ASCII letters', 'pässwörd-admin-token-ü'],
    ['a tab', 'tab\tseparated-admin-token'],
  ])('refuses an admin token with %s, without quoting it', (_label, token) => {
    // Act
    const issues = issuesOf({ admin: { token, protectMetrics: true } });

    // Assess
    expect(issues).toEqual([issueAt('admin.token', 'visible ASCII characters without spaces')]);
    expect(JSON.stringify(issues)).not.toContain(token);
  });

  it('accepts visible ASCII punctuation (RFC 6750 b64token and more)', () => {
    expect(issuesOf({ admin: { token: 'abc-._~+/DEF0123456789==' } })).toEqual([]);
    expect(issuesOf({ admin: { token: 'p!a#s$s%w&o*r(d)-16+chars' } })).toEqual([]);
  });

  it('refuses a bearer source secret with whitespace, and accepts non-ASCII (the inbox reads headers as UTF-8)', () => {
    // Act
    const issues = issuesOf({
      sources: {
        spaced: anHttpSource({ auth: { scheme: 'bearer', secrets: ['two words-token-value'] } }),
        utf8: anHttpSource({ auth: { scheme: 'bearer', secrets: ['jeton-secret-été-0123456789'] } }),
      },
    });

    // Assess
    expect(issues).toEqual([issueAt('sources.spaced.auth.secrets[0]', 'must not contain spaces')]);
  });
});

describe('inbox.basePath over the server’s own routes', () => {
  it.each([
    ['/admin', '/admin'],
    ['/health', '/health'],
    ['/metrics', '/metrics'],
    ['/admin/inbox', '/admin'],
    ['/health/x', '/health'],
    ['/_demo', '/_demo/receiver'],
  ])('refuses %s, which hides %s', (basePath, hidden) => {
    expect(issuesOf({ inbox: { basePath } })).toEqual([issueAt('inbox.basePath', `would hide ${hidden}`)]);
  });

  it.each(['/inbox', '/hooks', '/adm', '/healthz', '/metrics2', '/api/admin'])('accepts %s', (basePath) => {
    expect(issuesOf({ inbox: { basePath } })).toEqual([]);
  });
});
