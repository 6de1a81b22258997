/**
 * Findings of the outside configuration audit: webhook secrets with a trailing line break, empty header
 * credentials, routes no source topic can reach (and routes no topic can reach), section variables that dropped the
 * file's keys, two variables for one key, source names YAML reads as numbers, and `.` / `..` source paths.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, type ConfigIssue } from '@queuebox/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  configWarnings,
  createInMemorySecretResolver,
  loadConfig,
  overlayEnv,
  parseConfig,
  parseConfigYaml,
  validateConfig,
} from '../src/index.ts';
import { aConfigInput, anHttpDestination, anHttpSource } from './fixtures.ts';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'queuebox-config-audit-'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function issuesOf(
  yaml: string,
  env: Record<string, string> = {},
  secrets: Record<string, string> = {},
): Promise<readonly ConfigIssue[]> {
  await writeFile(join(dir, 'queuebox.yaml'), yaml);
  const error = await loadConfig({ cwd: dir, env, secrets: createInMemorySecretResolver(secrets) }).then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof ConfigError)) throw new Error(`expected a ConfigError, got ${String(error)}`);
  return error.issues;
}

const SECRET = 'whsec_testsecret0123456789abcdef';
const LINE_BREAK_HINT = '(a secret stored with a trailing line break?)';

const sourceYaml = (auth: string) => `sources:
  stripe:
    type: http
    auth: ${auth}
    idempotencyKey: { path: $.id }
    topic: "stripe.{{ eventType }}"
destinations:
  billing: { type: http, url: https://billing.example/hooks }
routes:
  - { match: "stripe.#", destination: billing }
`;

describe('source secrets with surrounding whitespace or control characters (audit 1)', () => {
  it.each([
    ['stripe', {}],
    ['github', {}],
    ['shopify', {}],
    ['slack', {}],
    ['hmac', { header: 'X-Signature' }],
  ])(
    'refuses a %s secret with a trailing line break, naming the key and never the secret',
    (scheme, extra) => {
      // Act
      const result = validateConfig(
        aConfigInput({
          sources: {
            stripe: anHttpSource({ auth: { scheme, secrets: ['fine-secret', `${SECRET}\n`], ...extra } }),
          },
        }),
      );

      // Assess
      expect(result.ok).toBe(false);
      const issues = result.ok ? [] : result.issues;
      expect(issues).toEqual([
        { path: 'sources.stripe.auth.secrets[1]', message: expect.stringContaining(LINE_BREAK_HINT) },
      ]);
      expect(JSON.stringify(issues)).not.toContain('testsecret');
    },
  );

  it.each([
    ['a leading space', ` ${SECRET}`],
    ['a trailing tab', `${SECRET}\t`],
    ['a carriage return and line feed', `${SECRET}\r\n`],
    ['a control character inside', `whsec_test\u0000secret`],
  ])('refuses a secret with %s', (_what, secret) => {
    const result = validateConfig(
      aConfigInput({ sources: { stripe: anHttpSource({ auth: { scheme: 'stripe', secrets: [secret] } }) } }),
    );

    expect(result.ok ? [] : result.issues.map((i) => i.path)).toEqual(['sources.stripe.auth.secrets[0]']);
  });

  it('refuses a basic credential with a trailing line break and says so for a bearer token', () => {
    const basic = validateConfig(
      aConfigInput({
        sources: {
          stripe: anHttpSource({ auth: { scheme: 'basic', secrets: ['user:a-long-password-0123456789\n'] } }),
        },
      }),
    );
    const bearer = validateConfig(
      aConfigInput({
        sources: {
          stripe: anHttpSource({ auth: { scheme: 'bearer', secrets: ['token-0123456789abcdef\n'] } }),
        },
      }),
    );

    expect(basic.ok ? [] : basic.issues).toEqual([
      { path: 'sources.stripe.auth.secrets[0]', message: expect.stringContaining(LINE_BREAK_HINT) },
    ]);
    expect(bearer.ok ? [] : bearer.issues).toEqual([
      { path: 'sources.stripe.auth.secrets[0]', message: expect.stringContaining(LINE_BREAK_HINT) },
    ]);
  });

  it('still takes a secret with inner spaces, and an unresolved reference (checked once resolved)', () => {
    expect(() =>
      parseConfig(
        aConfigInput({
          sources: {
            stripe: anHttpSource({
              auth: { scheme: 'hmac', header: 'X-Sig', secrets: ['correct horse battery staple', 'env://X'] },
            }),
          },
        }),
      ),
    ).not.toThrow();
  });

  it('refuses the value of an env:// reference with a trailing line break, with the file line as origin', async () => {
    // Act
    const issues = await issuesOf(sourceYaml('{ scheme: stripe, secrets: [env://STRIPE_WEBHOOK_SECRET] }'), {
      STRIPE_WEBHOOK_SECRET: `${SECRET}\n`,
    });

    // Assess
    expect(issues).toEqual([
      {
        path: 'sources.stripe.auth.secrets[0]',
        message: expect.stringContaining(LINE_BREAK_HINT),
        origin: 'queuebox.yaml:4',
      },
    ]);
    expect(JSON.stringify(issues)).not.toContain('testsecret');
  });

  it('refuses the value of a secret:// reference (as `create-secret --secret-string file://…` stores it)', async () => {
    const issues = await issuesOf(
      sourceYaml('{ scheme: github, secrets: [secret://hooks#github] }'),
      {},
      { hooks: JSON.stringify({ github: `${SECRET}\n` }) },
    );

    expect(issues).toEqual([
      {
        path: 'sources.stripe.auth.secrets[0]',
        message: expect.stringContaining(LINE_BREAK_HINT),
        origin: 'queuebox.yaml:4',
      },
    ]);
  });

  it('refuses a secret set by a QUEUEBOX_ variable, naming the variable', async () => {
    const issues = await issuesOf(sourceYaml('{ scheme: stripe, secrets: [placeholder] }'), {
      QUEUEBOX_SOURCES__STRIPE__AUTH__SECRETS__0: `${SECRET}\n`,
    });

    expect(issues).toEqual([
      {
        path: 'sources.stripe.auth.secrets[0]',
        message: expect.stringContaining(LINE_BREAK_HINT),
        origin: 'QUEUEBOX_SOURCES__STRIPE__AUTH__SECRETS__0',
      },
    ]);
  });
});

describe('destination header credentials that resolve to empty text (audit 1)', () => {
  const yaml = `destinations:
  d:
    type: http
    url: https://x.example/h
    headers: { Authorization: env://AUTHZ, X-Api-Key: "secret://api#key", X-Plain: "" }
routes:
  - { match: "#", destination: d }
`;

  it('refuses an env:// or secret:// header value that is empty, naming the reference', async () => {
    // Act
    const issues = await issuesOf(yaml, { AUTHZ: '' }, { api: JSON.stringify({ key: '' }) });

    // Assess
    expect(issues).toEqual([
      {
        path: 'destinations.d.headers.Authorization',
        message: expect.stringMatching(/env:\/\/AUTHZ.*empty/),
        origin: 'queuebox.yaml:5',
      },
      {
        path: 'destinations.d.headers.X-Api-Key',
        message: expect.stringMatching(/secret:\/\/api#key.*empty/),
        origin: 'queuebox.yaml:5',
      },
    ]);
  });

  it('takes them when set', async () => {
    await writeFile(join(dir, 'queuebox.yaml'), yaml);
    const config = await loadConfig({
      cwd: dir,
      env: { AUTHZ: 'Bearer x' },
      secrets: createInMemorySecretResolver({ api: JSON.stringify({ key: 'k' }) }),
    });

    expect(config.destinations.d?.type === 'http' && config.destinations.d.headers).toEqual({
      Authorization: 'Bearer x',
      'X-Api-Key': 'k',
      'X-Plain': '',
    });
  });
});

describe('route warnings (audit 2)', () => {
  const two = { a: anHttpDestination(), b: anHttpDestination() };

  it('warns about a push source whose topic no route can match, and names the letter case', () => {
    // Prepare
    const config = parseConfig({
      sources: { stripe: anHttpSource({ topic: 'Stripe.{{ eventType }}' }) },
      destinations: two,
      routes: [{ match: 'stripe.#', destination: 'a' }],
    });

    // Act
    const warnings = configWarnings(config);

    // Assess
    expect(warnings).toEqual([
      { path: 'sources.stripe.topic', message: expect.stringContaining('no route') },
    ]);
    expect(warnings[0]?.message).toMatch(/case/);
    expect(warnings[0]?.message).toContain('stripe.#');
  });

  it('warns about a source topic no route matches without a case hint when case is not the reason', () => {
    const config = parseConfig({
      sources: { stripe: anHttpSource({ topic: 'stripe.{{ eventType }}' }) },
      destinations: two,
      routes: [{ match: 'orders.#', destination: 'a' }],
    });

    const warnings = configWarnings(config);

    expect(warnings).toEqual([
      { path: 'sources.stripe.topic', message: expect.stringContaining('no route') },
    ]);
    expect(warnings[0]?.message).not.toMatch(/case/);
  });

  it.each([
    ['{{ eventType }}', 'payments.refund'],
    ['{{ eventType }}', '#'],
    ['{{ source }}.{{ eventType }}', 'stripe.*.*'],
    ['stripe.{{ eventType }}', '*.charge.#'],
    ['stripe.{{ eventType }}', 'stripe'],
    ['stripe-{{ eventType }}.x', 'stripe-charge.#'],
  ])('says nothing of a source with topic %s and a route %s, which it can reach', (topic, match) => {
    const config = parseConfig({
      sources: { stripe: anHttpSource({ topic }) },
      destinations: two,
      routes: [{ match, destination: 'a' }],
    });

    expect(configWarnings(config)).toEqual([]);
  });

  it('says nothing of a pull source', () => {
    const config = parseConfig({
      sources: { stripe: anHttpSource({ mode: 'pull', topic: 'Stripe.{{ eventType }}' }) },
      destinations: two,
      routes: [{ match: 'stripe.#', destination: 'a' }],
    });

    expect(configWarnings(config)).toEqual([]);
  });

  it.each([
    ['#', 'payments.#'],
    ['payments.*', 'payments.refund'],
    ['payments.refund', 'payments.refund'],
    ['payments.#', 'payments.*.x'],
    ['*.#', 'a.#'],
    ['#.refund', 'payments.*.refund'],
  ])('warns that a route after %s can never be chosen: %s', (first, second) => {
    const config = parseConfig({
      destinations: two,
      routes: [
        { match: first, destination: 'a' },
        { match: second, destination: 'b' },
      ],
    });

    const warnings = configWarnings(config);

    expect(warnings).toEqual([
      {
        path: 'routes[1].match',
        message: expect.stringContaining(`routes[0] ("${first}")`),
      },
    ]);
    expect(warnings[0]?.message).toContain('first matching route wins');
  });

  it.each([
    ['payments.refund', 'payments.*'],
    ['payments.*', 'payments.#'],
    ['payments.*', 'payments'],
    ['a.*.c', 'a.#.c'],
    ['*.#', '#'],
    ['Payments.#', 'payments.#'],
  ])('says nothing of a route %s before %s, which still matches other topics', (first, second) => {
    const config = parseConfig({
      destinations: two,
      routes: [
        { match: first, destination: 'a' },
        { match: second, destination: 'b' },
      ],
    });

    expect(configWarnings(config)).toEqual([]);
  });

  it('warns about a NATS-style ">" segment, suggesting "#"', () => {
    const config = parseConfig({ destinations: two, routes: [{ match: 'orders.>', destination: 'a' }] });

    const warnings = configWarnings(config);

    expect(warnings).toEqual([{ path: 'routes[0].match', message: expect.stringContaining('"#"') }]);
    expect(warnings[0]?.message).toContain('">"');
  });

  it('gives all three for the audit file (e2e_route.yaml)', () => {
    const config = parseConfig({
      sources: { stripe: anHttpSource({ topic: 'Stripe.{{ eventType }}' }) },
      destinations: { sink: anHttpDestination(), 'nats-style': anHttpDestination() },
      routes: [
        { match: 'stripe.#', destination: 'sink' },
        { match: 'orders.>', destination: 'nats-style' },
        { match: 'stripe.charge', destination: 'sink' },
      ],
    });

    expect(configWarnings(config).map((w) => w.path)).toEqual([
      'sources.stripe.topic',
      'routes[1].match',
      'routes[2].match',
    ]);
  });
});

describe('a mapping-valued QUEUEBOX_ variable (audit 3)', () => {
  it('is merged into the mapping of the file, key by key, and keeps the origins of the keys it leaves', () => {
    // Prepare
    const base = {
      inbox: { basePath: '/hooks', relay: { enabled: false, maxAttempts: 50, pollIntervalMs: 7 } },
    };
    const origins = new Map([
      ['inbox', 'queuebox.yaml:1'],
      ['inbox.basePath', 'queuebox.yaml:2'],
      ['inbox.relay', 'queuebox.yaml:3'],
      ['inbox.relay.enabled', 'queuebox.yaml:4'],
      ['inbox.relay.maxAttempts', 'queuebox.yaml:5'],
      ['inbox.relay.pollIntervalMs', 'queuebox.yaml:6'],
    ]);

    // Act
    const { value, issues } = overlayEnv(
      base,
      {
        QUEUEBOX_INBOX__RELAY: '{ batchSize: 50, maxattempts: 3 }',
        QUEUEBOX_INBOX: '{ relay: { enabled: true } }',
      },
      origins,
    );

    // Assess
    expect(issues).toEqual([]);
    expect(value).toEqual({
      inbox: {
        basePath: '/hooks',
        relay: { enabled: true, maxAttempts: 3, pollIntervalMs: 7, batchSize: 50 },
      },
    });
    expect(origins.get('inbox.basePath')).toBe('queuebox.yaml:2');
    expect(origins.get('inbox.relay.pollIntervalMs')).toBe('queuebox.yaml:6');
    expect(origins.get('inbox.relay.enabled')).toBe('QUEUEBOX_INBOX');
    expect(origins.get('inbox.relay.maxAttempts')).toBe('QUEUEBOX_INBOX__RELAY');
    expect(origins.get('inbox.relay.batchSize')).toBe('QUEUEBOX_INBOX__RELAY');
  });

  it('replaces lists and values, and a mapping of another type or scheme', () => {
    const base = {
      routes: [{ match: 'a.#', destination: 'd' }],
      sources: { s: { type: 'http', auth: { scheme: 'stripe', secrets: ['x'], toleranceSec: 60 } } },
    };

    const { value } = overlayEnv(
      base,
      {
        QUEUEBOX_ROUTES: '[{ match: "b.#", destination: d }]',
        QUEUEBOX_SOURCES__S__AUTH: '{ scheme: bearer, secrets: [y] }',
      },
      new Map(),
    );

    expect(value).toEqual({
      routes: [{ match: 'b.#', destination: 'd' }],
      sources: { s: { type: 'http', auth: { scheme: 'bearer', secrets: ['y'] } } },
    });
  });

  it('replaces a mapping of names whole (sources, destinations, headers), so a variable can still say what the set is', () => {
    // Prepare: a development source without auth and a debug header in the file
    const base = {
      sources: {
        'dev-open': { type: 'http', auth: { scheme: 'none' } },
        stripe: { type: 'http', auth: { scheme: 'stripe', secrets: ['x'] } },
      },
      destinations: {
        hook: { type: 'http', url: 'https://h.example/', headers: { 'x-debug-token': 'dev' } },
      },
    };

    // Act: merged (review), dev-open stayed open and the debug header was still sent
    const { value } = overlayEnv(
      base,
      {
        QUEUEBOX_SOURCES: '{ stripe: { type: http, auth: { scheme: stripe, secrets: [y] } } }',
        QUEUEBOX_DESTINATIONS__HOOK: '{ headers: { authorization: prod }, timeoutMs: 5000 }',
      },
      new Map(),
    );

    // Assess: the names are the variable's; the fixed keys of one destination still merge
    expect(value).toEqual({
      sources: { stripe: { type: 'http', auth: { scheme: 'stripe', secrets: ['y'] } } },
      destinations: {
        hook: {
          type: 'http',
          url: 'https://h.example/',
          headers: { authorization: 'prod' },
          timeoutMs: 5000,
        },
      },
    });
  });

  it('keeps the file keys of the audit file relay.yaml through loadConfig', async () => {
    await writeFile(
      join(dir, 'queuebox.yaml'),
      'inbox:\n  relay:\n    enabled: false\n    maxAttempts: 50\n',
    );

    const config = await loadConfig({ cwd: dir, env: { QUEUEBOX_INBOX__RELAY: '{ batchSize: 50 }' } });

    expect(config.inbox.relay).toMatchObject({ enabled: false, maxAttempts: 50, batchSize: 50 });
  });
});

describe('two QUEUEBOX_ variables for one key (audit 4)', () => {
  it.each([
    ['QUEUEBOX_OUTBOX__MAXATTEMPTS', 'QUEUEBOX_OUTBOX__MAX_ATTEMPTS'],
    ['QUEUEBOX_OUTBOX__MAXATTEMPTS', 'queuebox_outbox__maxattempts'],
  ])('refuses %s beside %s, naming both', (one, other) => {
    // Act
    const { issues } = overlayEnv({}, { [one]: '5', [other]: '7' }, new Map());

    // Assess
    expect(issues).toHaveLength(1);
    expect(issues[0]?.path).toBe('outbox.maxAttempts');
    expect(issues[0]?.message).toContain(one);
    expect(issues[0]?.message).toContain(other);
  });

  it('refuses two spellings of one source name', () => {
    const { issues } = overlayEnv(
      { sources: { 'orders-in': { type: 'amqp' } } },
      { QUEUEBOX_SOURCES__ORDERS_IN__QUEUE: 'a', QUEUEBOX_SOURCES__orders_in__QUEUE: 'b' },
      new Map(),
    );

    expect(issues.map((i) => i.path)).toEqual(['sources.orders-in.queue']);
  });

  it('still lets a key variable refine a section variable', () => {
    const { issues, value } = overlayEnv(
      {},
      { QUEUEBOX_OUTBOX: '{ maxAttempts: 3, batchSize: 9 }', QUEUEBOX_OUTBOX__MAXATTEMPTS: '5' },
      new Map(),
    );

    expect(issues).toEqual([]);
    expect(value).toEqual({ outbox: { maxAttempts: 5, batchSize: 9 } });
  });
});

describe('source and destination names YAML reads as numbers (audit 5)', () => {
  it.each([
    ['0042', 'sources', 2],
    ['1e3', 'sources', 2],
    ['0x1f', 'destinations', 9],
    ['true', 'sources', 2],
  ])('refuses the name %s under %s, naming file and line and asking for quotes', (key, section, line) => {
    // Prepare
    const text = `sources:\n  ${section === 'sources' ? key : 'stripe'}:\n    type: http\n    auth: { scheme: none }\n    eventTypePath: $.t\n    idempotencyKey: { path: $.id }\n\ndestinations:\n  ${section === 'destinations' ? key : 'd'}: { type: http, url: https://x.example/h }\n`;

    // Act
    const doc = parseConfigYaml(text, 'queuebox.yaml');

    // Assess
    const issue = doc.issues.find((i) => i.message.includes('quote'));
    expect(issue).toBeDefined();
    expect(issue?.origin).toBe(`queuebox.yaml:${line}`);
    expect(issue?.message).toContain(`"${key}"`);
    expect(issue?.path.startsWith(`${section}.`)).toBe(true);
  });

  it('refuses the audit file numkey.yaml through loadConfig', async () => {
    const issues = await issuesOf(
      '# partner account 0042 posts to /inbox/0042\nsources:\n  0042:\n    type: http\n    auth: { scheme: bearer, secrets: [0123456789abcdef0123456789abcdef] }\n    eventTypePath: $.type\n    idempotencyKey: { path: $.id }\n',
    );

    expect(issues).toEqual([
      { path: 'sources.42', message: expect.stringContaining('"0042"'), origin: 'queuebox.yaml:3' },
    ]);
  });

  it('takes quoted names', () => {
    const doc = parseConfigYaml(
      'sources:\n  "0042": { type: http }\ndestinations:\n  \'1e3\': { type: http }\n',
      'queuebox.yaml',
    );

    expect(doc.issues).toEqual([]);
    expect(Object.keys((doc.value as { sources: object }).sources)).toEqual(['0042']);
  });
});

describe('a source path "." or ".." (audit 6)', () => {
  it.each(['.', '..'])('refuses path %s', (path) => {
    const result = validateConfig(aConfigInput({ sources: { stripe: anHttpSource({ path }) } }));

    expect(result.ok ? [] : result.issues).toEqual([
      { path: 'sources.stripe.path', message: expect.stringContaining('"."') },
    ]);
  });

  it.each(['...', '.well-known', 'a.b', 'v1..2'])('takes path %s', (path) => {
    expect(validateConfig(aConfigInput({ sources: { stripe: anHttpSource({ path }) } })).ok).toBe(true);
  });
});

describe('database.schema names PostgreSQL reserves (multi-install audit)', () => {
  it.each(['pg_x', 'information_schema'])('refuses %s, and still takes PG_x, public and Queuebox', (name) => {
    const refused = validateConfig({ database: { schema: name } });
    expect(refused.ok).toBe(false);
    if (!refused.ok) {
      expect(refused.issues).toEqual([
        expect.objectContaining({
          path: 'database.schema',
          message: expect.stringMatching(/pg_dump leaves it out/),
        }),
      ]);
    }
    for (const fine of ['PG_x', 'public', 'Queuebox'])
      expect(validateConfig({ database: { schema: fine } }).ok).toBe(true);
  });
});
