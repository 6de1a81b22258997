/**
 * No secret text in what `config check` and start-up failures print (operator audit, finding 7): a database password
 * holding whitespace was printed whole, and an unquoted `token: *SuperSecretToken123` failed with
 * `YAML: Unresolved alias …: SuperSecretToken123`.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@queuebox/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  loadConfig,
  parseConfig,
  parseConfigYaml,
  redactConfig,
  redactConnectionString,
} from '../src/index.ts';

const SECRET = 'SuperSecretToken123';

describe('redactConnectionString with characters a URL should have encoded', () => {
  it.each([
    ['a space', 'postgres://postgres:ab cd@127.0.0.1:5432/test', 'postgres://***@127.0.0.1:5432/test'],
    ['a tab', 'postgres://postgres:ab\tcd@127.0.0.1:5432/test', 'postgres://***@127.0.0.1:5432/test'],
    ['a slash and a #', 'postgres://u:p/x#y@db/app?sslmode=require', 'postgres://***@db/app?sslmode=***'],
    ['an @', 'amqp://u:p@ss@rabbit:5672', 'amqp://***@rabbit:5672'],
    ['leading whitespace', ' postgres://u:hunter2@db/app', ' postgres://***@db/app'],
    ['a ? (cannot be split: hidden after the scheme)', 'postgres://u:p?ss@db/app', 'postgres://***'],
  ])('hides a password with %s', (_label, url, expected) => {
    expect(redactConnectionString(url)).toBe(expected);
  });

  it('still shows what is not a credential', () => {
    expect(redactConnectionString('postgres://u:p@db:5432/app')).toBe('postgres://***@db:5432/app');
    expect(redactConnectionString('https://hooks.example/in?token=abc&x=1')).toBe(
      'https://hooks.example/in?token=***&x=***',
    );
    expect(redactConnectionString('https://hooks.example/in')).toBe('https://hooks.example/in');
  });

  it("hides the long path segments and the fragment of a destination's URL (Slack, Discord), not other names", () => {
    const webhookUrl = true;
    expect(
      redactConnectionString('https://hooks.slack.com/services/T0001/B0001/XXXXXXXXXXXXXXXXXXXXXXXX', {
        webhookUrl,
      }),
    ).toBe('https://hooks.slack.com/services/T0001/B0001/***');
    expect(
      redactConnectionString(
        'https://discord.com/api/webhooks/123456789012345678/abcdefghijklmnopqrstuvwxyz0123456789?wait=true',
        { webhookUrl },
      ),
    ).toBe('https://discord.com/api/webhooks/***/***?wait=***');
    expect(redactConnectionString('https://example.com/hook#sk_live_0123456789', { webhookUrl })).toBe(
      'https://example.com/hook#***',
    );
    expect(redactConnectionString('http://u:p@billing.internal/v2/invoices', { webhookUrl })).toBe(
      'http://***@billing.internal/v2/invoices',
    );
    // Elsewhere a long segment is a name an operator checks (an SQS queue, a database).
    expect(
      redactConnectionString('https://sqs.eu-west-1.amazonaws.com/123456789012/orders-events-production'),
    ).toBe('https://sqs.eu-west-1.amazonaws.com/123456789012/orders-events-production');
    expect(redactConnectionString('postgres://u:p@db:5432/orders_production_database')).toBe(
      'postgres://***@db:5432/orders_production_database',
    );
  });

  it('hides it in what config check prints', () => {
    // Prepare
    const config = parseConfig({ database: { url: 'postgres://postgres:ab cd@127.0.0.1:5432/test' } });

    // Act
    const printed = JSON.stringify(redactConfig(config));

    // Assess
    expect(printed).not.toContain('ab cd');
    expect(printed).toContain('postgres://***@127.0.0.1:5432/test');
  });

  it("hides a Slack destination URL's secret segment in what config check prints, and shows an SQS queue's name", () => {
    // Prepare
    const config = parseConfig({
      destinations: {
        slack: { type: 'http', url: 'https://hooks.slack.com/services/T0001/B0001/XXXXXXXXXXXXXXXXXXXXXXXX' },
      },
      sources: {
        jobs: {
          type: 'sqs',
          queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/orders-events-production',
        },
      },
    });

    // Act
    const printed = JSON.stringify(redactConfig(config));

    // Assess
    expect(printed).not.toContain('XXXXXXXXXXXXXXXXXXXXXXXX');
    expect(printed).toContain('https://hooks.slack.com/services/T0001/B0001/***');
    expect(printed).toContain('/123456789012/orders-events-production');
  });
});

describe('YAML errors never quote the file', () => {
  it.each([
    ['an unquoted value starting with *', `admin:\n  token: *${SECRET}\n`, 'admin.token'],
    ['an alias in a list', `sources:\n  - a\n  - *${SECRET}\n`, 'sources[1]'],
    ['a merge of an unknown anchor', `destinations:\n  a:\n    <<: *${SECRET}\n`, 'destinations.a'],
  ])('reports %s at its key without the alias name', (_label, text, path) => {
    // Act
    const doc = parseConfigYaml(text, 'queuebox.yaml');

    // Assess
    expect(doc.issues).toEqual([
      { path, message: expect.stringContaining('starts with "*" is an alias'), origin: expect.any(String) },
    ]);
    expect(JSON.stringify(doc.issues)).not.toContain(SECRET);
  });

  it.each([
    ['a bad escape', `admin:\n  token: "Sec\\xZZ${SECRET}"\n`],
    ['an unknown tag', `admin:\n  token: !${SECRET} x\n`],
    ['a verbatim tag', `admin:\n  token: !<${SECRET}> x\n`],
    ['a named tag handle', `admin:\n  token: !a!${SECRET} x\n`],
    ['a block scalar header', `admin:\n  token: |${SECRET}\n    x\n`],
  ])('reports %s without the offending text', (_label, text) => {
    // Act
    const doc = parseConfigYaml(text, 'queuebox.yaml');

    // Assess
    expect(doc.issues.length).toBeGreaterThan(0);
    expect(JSON.stringify(doc.issues)).not.toMatch(/SuperSecret|ZZ/);
  });

  describe('through loadConfig', () => {
    let dir: string;
    beforeEach(async () => {
      dir = await mkdtemp(join(tmpdir(), 'queuebox-config-'));
    });
    afterEach(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    it('throws a ConfigError whose message holds no secret', async () => {
      // Prepare
      await writeFile(join(dir, 'queuebox.yaml'), `admin:\n  token: *${SECRET}\n`);

      // Act
      const error = await loadConfig({ cwd: dir, env: {} }).catch((e: unknown) => e);

      // Assess
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).message).toContain('admin.token');
      expect((error as ConfigError).message).not.toContain(SECRET);
    });
  });
});
