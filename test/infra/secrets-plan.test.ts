import { ConfigError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { collectReferences } from '../../infra/config.ts';
import { planDeployment } from '../../infra/plan.ts';
import {
  environmentBytes,
  LAMBDA_ENVIRONMENT_MAX_BYTES,
  planEnvironment,
  planEnvironmentSizes,
  planSecrets,
  sstSecretName,
} from '../../infra/secrets-plan.ts';
import { aConfig, aConfigInput, aDeployConfig, anHttpSource, MQ_SECRET } from './fixtures.ts';

describe('planSecrets', () => {
  it('makes an sst.Secret per referenced key and renames the references per stage', () => {
    // Prepare
    const input = aConfigInput({ admin: { token: 'secret://queuebox/admin#token' } });

    // Act
    const { secrets, issues } = planSecrets(collectReferences(input), aConfig(), 'queuebox/prod');

    // Assess
    expect(issues).toEqual([]);
    expect(secrets.managed).toEqual([
      {
        name: 'billing',
        secretsManagerName: 'queuebox/prod/billing',
        keys: [{ key: 'whsec', sstName: 'BillingWhsec' }],
      },
      {
        name: 'queuebox/admin',
        secretsManagerName: 'queuebox/prod/queuebox/admin',
        keys: [{ key: 'token', sstName: 'QueueboxAdminToken' }],
      },
      {
        name: 'stripe',
        secretsManagerName: 'queuebox/prod/stripe',
        keys: [{ key: 'webhook', sstName: 'StripeWebhook' }],
      },
    ]);
    expect(secrets.rewrites.get('secret://stripe#webhook')).toBe('secret://queuebox/prod/stripe#webhook');
  });

  it('leaves ARNs, listed external names and the database section alone', () => {
    // Prepare
    const input = aConfigInput({
      database: { url: 'secret://legacy-db#url' },
      sources: {
        stripe: anHttpSource({
          auth: { scheme: 'bearer', secrets: [`secret://${MQ_SECRET}`, 'secret://shared-token'] },
        }),
      },
    });

    // Act
    const { secrets } = planSecrets(
      collectReferences(input),
      aConfig({ aws: { secrets: { external: ['shared-token'] } } }),
      'queuebox/dev',
    );

    // Assess
    expect(secrets.external).toEqual([MQ_SECRET, 'shared-token']);
    expect(secrets.managed.map((m) => m.name)).toEqual(['billing']);
  });

  it('refuses one secret used both whole and by key, and names that collide as sst.Secret names', () => {
    // Prepare
    const input = {
      admin: { token: 'secret://stripe' },
      sources: {
        stripe: anHttpSource(),
        other: anHttpSource({ auth: { scheme: 'bearer', secrets: ['secret://a-b', 'secret://a_b'] } }),
      },
    };

    // Act
    const { issues } = planSecrets(collectReferences(input), aConfig(), 'qb/dev');

    // Assess
    expect(issues.map((i) => i.message)).toEqual([
      'secret://a-b and secret://a_b would both be set as AB; rename one',
      'secret://stripe is used both whole and with #key; use one form for a secret',
    ]);
  });

  it('refuses secret://database beside Aurora: its copy would take the name of the secret of the database URL', () => {
    // Prepare
    const input = aConfigInput({ admin: { token: 'secret://database#admin' } });
    const existing = aConfig({ aws: { database: { secretArn: MQ_SECRET } } });

    // Act
    const aurora = planSecrets(collectReferences(input), aConfig(), 'qb/prod');
    const own = planSecrets(collectReferences(input), existing, 'qb/prod');

    // Assess
    expect(aurora.issues).toEqual([
      {
        path: 'admin.token',
        message:
          "secret://database would be stored as qb/prod/database, the name of the secret that holds the Aurora database's URL; rename it",
      },
    ]);
    // With an existing database no such secret is made.
    expect(own.issues).toEqual([]);
  });

  it('turns names into sst.Secret names that start with a capital letter', () => {
    expect(sstSecretName('stripe', 'webhook')).toBe('StripeWebhook');
    expect(sstSecretName('prod/partner_api')).toBe('ProdPartnerApi');
    expect(sstSecretName('1password')).toBe('S1password');
  });
});

describe('planEnvironment', () => {
  it('passes env:// values from the deploying shell on to the functions', () => {
    // Prepare
    const input = aConfigInput({
      database: { url: 'env://DATABASE_URL' },
      sources: { partner: anHttpSource({ auth: { scheme: 'bearer', secrets: ['env://PARTNER_TOKEN'] } }) },
    });

    // Act
    const ok = planEnvironment(collectReferences(input), { PARTNER_TOKEN: 't0ken' });
    const missing = planEnvironment(collectReferences(input), {});

    // Assess: database.url is infra's own business
    expect(ok).toEqual({
      variables: { PARTNER_TOKEN: 't0ken' },
      issues: [],
      paths: { PARTNER_TOKEN: 'sources.partner.auth.secrets.0' },
    });
    expect(missing.issues).toEqual([
      {
        path: 'sources.partner.auth.secrets.0',
        message:
          'refers to PARTNER_TOKEN, which is not set where sst deploy runs (infra passes it to the functions)',
      },
    ]);
  });

  it('refuses variables Lambda reserves', () => {
    // Prepare
    const input = {
      sources: { p: anHttpSource({ auth: { scheme: 'bearer', secrets: ['env://AWS_REGION'] } }) },
    };

    // Act
    const { issues } = planEnvironment(collectReferences(input), { AWS_REGION: 'eu-west-1' });

    // Assess
    expect(issues[0]?.message).toMatch(/AWS_REGION, which Lambda reserves/);
  });
});

describe('planDeployment and Lambda’s 4 KB of environment variables', () => {
  /** The default install with `env://` variables in HTTP destination headers, planned for stage prod. */
  const planWith = (env: Record<string, string>) => {
    const destinations = Object.fromEntries(
      Object.keys(env).map((name, i) => [
        `hook-${i}`,
        { type: 'http', url: `https://h${i}.example.com/x`, headers: { authorization: `env://${name}` } },
      ]),
    );
    const input = aConfigInput({
      destinations: { ...(aConfigInput().destinations as object), ...destinations },
    });
    return () => planDeployment(aDeployConfig(input), { app: 'queuebox', stage: 'prod', env });
  };
  const issuesOf = (plan: () => unknown): ConfigError['issues'] => {
    try {
      plan();
    } catch (error) {
      if (error instanceof ConfigError) return error.issues;
      throw error;
    }
    return [];
  };

  it('refuses env:// variables past 4,096 bytes, at the first reference, pointing at secret://', () => {
    // Prepare: the audit's sweep, 60 bearer tokens of 47 characters
    const env = Object.fromEntries(
      Array.from({ length: 60 }, (_, i) => [`HOOK_${i}_TOKEN`, `Bearer ${'x'.repeat(40)}`]),
    );

    // Act
    const issues = issuesOf(planWith(env));

    // Assess
    expect(issues).toHaveLength(1);
    expect(issues[0]?.path).toBe('destinations.hook-0.headers.authorization');
    expect(issues[0]?.message).toMatch(
      /^the environment variables of outbox-tick, relay-tick, .* would be up to 4,\d{3} bytes .* over Lambda's 4 KB \(4,096 bytes\).* The 60 env:\/\/ variable\(s\) .* write secret:\/\/name#key for them instead/,
    );
  });

  it('counts the variables set only at deploy: Data API ARNs, wake-up targets, the schedule group and role, SST’s own', () => {
    // Prepare: one variable sized so that what the plan holds is 3,300 bytes, then 3,900: both under 4,096
    const base = environmentBytes(planWith({ BIG_TOKEN: 'x' })().environment);
    const sized = (bytes: number) => planWith({ BIG_TOKEN: 'x'.repeat(1 + bytes - base) });

    // Act
    const fits = sized(3300)();
    const over = issuesOf(sized(3900));

    // Assess
    expect(environmentBytes(fits.environment)).toBe(3300);
    const sizes = planEnvironmentSizes(fits, {}).sizes;
    // relay-tick gets the most: the Data API's two ARNs, outbox-tick's name, the schedule group and role, SST's three
    expect((sizes['relay-tick'] ?? 0) - 3300).toBeGreaterThan(600);
    expect(Math.max(...Object.values(sizes))).toBeLessThanOrEqual(LAMBDA_ENVIRONMENT_MAX_BYTES);
    expect(over.map((i) => i.path)).toEqual(['destinations.hook-0.headers.authorization']);
    expect(over[0]?.message).toMatch(/relay-tick/);
  });
});
