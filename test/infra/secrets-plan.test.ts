import { describe, expect, it } from 'vitest';
import { collectReferences } from '../../infra/config.ts';
import { planEnvironment, planSecrets, sstSecretName } from '../../infra/secrets-plan.ts';
import { aConfig, aConfigInput, anHttpSource, MQ_SECRET } from './fixtures.ts';

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
    expect(ok).toEqual({ variables: { PARTNER_TOKEN: 't0ken' }, issues: [] });
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
