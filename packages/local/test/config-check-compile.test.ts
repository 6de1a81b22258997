/**
 * `queuebox config check` refuses what the runtime would refuse at start (operator audit, finding 4): it compiles
 * sources, routes, destinations and transforms as the runtime does, and reads a SQL Server URL as the store does,
 * without connecting to anything, and reports every problem at once. It never prints a secret (finding 7).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EXIT, runCli } from '../src/commands.ts';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'queuebox-check-'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function check(yaml: string, ...flags: string[]): Promise<{ code: number; out: string; err: string }> {
  await writeFile(join(dir, 'queuebox.yaml'), yaml);
  let out = '';
  let err = '';
  const code = await runCli(['config', 'check', ...flags], {
    out: (text) => {
      out += text;
    },
    err: (text) => {
      err += text;
    },
    env: {},
    cwd: dir,
  });
  return { code, out, err };
}

const BEARER = 'auth: { scheme: bearer, secrets: ["hooks-bearer-token-123456"] }';

describe('queuebox config check compiles what the runtime compiles', () => {
  it('reports every transform problem at once: source and route JSONata, unknown functions, a broker source', async () => {
    // Act
    const { code, out } = await check(
      `sources:
  hooks:
    type: http
    ${BEARER}
    idempotencyKey: { header: Idempotency-Key }
    eventTypePath: $.type
    topic: "hooks.{{ eventType }}"
    transform: { jsonata: "$merge([$, {'a': }" }
  other:
    type: http
    ${BEARER}
    idempotencyKey: { header: Idempotency-Key }
    topic: "{{ source }}"
    transform: { function: not-registered }
  queue:
    type: amqp
    url: amqp://127.0.0.1
    queue: q
    transform: { jsonata: "(((" }
destinations:
  d:
    type: http
    url: http://127.0.0.1:9/x
    transform: { function: no-such-function }
routes:
  - { match: "hooks.#", destination: d, transform: { jsonata: "a.[" } }
`,
      '--json',
    );

    // Assess
    expect(code).toBe(EXIT.failure);
    const answer = JSON.parse(out) as { ok: boolean; issues: { path: string; origin?: string }[] };
    expect(answer.ok).toBe(false);
    expect(answer.issues.map((i) => i.path).sort()).toEqual([
      'destinations.d.transform.function',
      'routes[0].transform.jsonata',
      'sources.hooks.transform',
      'sources.other.transform',
      'sources.queue.transform',
    ]);
    expect(answer.issues.find((i) => i.path === 'sources.hooks.transform')?.origin).toBe('queuebox.yaml:8');
  });

  it('refuses a SQL Server URL with an unknown parameter, as migrate does, without quoting its password', async () => {
    // Act
    const { code, err } = await check(
      'database:\n  url: "sqlserver://sa:Str0ngPassw0rd@127.0.0.1:1433/app?encrpyt=false"\n',
    );

    // Assess
    expect(code).toBe(EXIT.failure);
    expect(err).toContain('database.url: unknown URL parameter encrpyt');
    expect(err).not.toContain('Str0ngPassw0rd');
  });

  it('accepts a good SQL Server URL without connecting to its server', async () => {
    // Act: a host that never answers; a connection attempt would take mssql's 15 s.
    const started = Date.now();
    const { code, err } = await check(
      'database:\n  url: "sqlserver://sa:Str0ngPassw0rd@10.255.255.1:1433/app?encrypt=false"\n',
    );

    // Assess
    expect(code, err).toBe(EXIT.ok);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('still accepts a configuration that compiles', async () => {
    const { code, err } = await check(
      `sources:
  hooks:
    type: http
    ${BEARER}
    idempotencyKey: { header: Idempotency-Key }
    topic: "{{ source }}"
    transform: { jsonata: "$merge([$, {'a': 1}])" }
destinations:
  d: { type: http, url: "http://127.0.0.1:9/x" }
routes:
  - { match: "#", destination: d, transform: { jsonata: "data" } }
`,
    );
    expect(code, err).toBe(EXIT.ok);
    expect(err).toContain('The configuration is valid.');
  });
});

describe('queuebox config check never prints a secret', () => {
  it.each([
    ['a space', 'ab cd-secret'],
    ['a tab', 'ab\tcd-secret'],
  ])('hides a database password with %s', async (_label, password) => {
    // Act
    const { code, out } = await check(
      `database:\n  url: ${JSON.stringify(`postgres://postgres:${password}@127.0.0.1:5432/test`)}\n`,
    );

    // Assess
    expect(code).toBe(EXIT.ok);
    expect(out).toContain('postgres://***@127.0.0.1:5432/test');
    expect(out).not.toContain('cd-secret');
  });

  it('names the key of an unquoted *value without quoting it', async () => {
    // Act
    const { code, out, err } = await check('admin:\n  token: *SuperSecretToken123\n');

    // Assess
    expect(code).toBe(EXIT.failure);
    expect(err).toContain('admin.token');
    expect(`${out}${err}`).not.toContain('SuperSecretToken123');
  });
});

describe('queuebox config check warns about a destination maxAttempts no row reaches', () => {
  it('prints the warning before "The configuration is valid", and lists it with --json', async () => {
    // Prepare
    const yaml = `outbox: { maxAttempts: 10 }
destinations:
  billing: { type: http, url: "http://127.0.0.1:9/x", maxAttempts: 40 }
routes:
  - { match: "#", destination: billing }
`;

    // Act
    const text = await check(yaml);
    const json = await check(yaml, '--json');

    // Assess
    expect(text.code).toBe(EXIT.ok);
    expect(text.err).toMatch(
      /^warning: destinations\.billing\.maxAttempts 40 is above outbox\.maxAttempts 10: a destination can only lower a row's max_attempts, never raise it[^\n]*raise outbox\.maxAttempts \(or set inbox\.relay\.maxAttempts\) instead[^\n]*\nThe configuration is valid\.\n$/,
    );
    expect(JSON.parse(json.out).warnings).toEqual([
      {
        path: 'destinations.billing.maxAttempts',
        message: expect.stringContaining('40 is above outbox.maxAttempts 10'),
      },
    ]);
  });
});
