// The size of each function's IAM role policy (permissions-plan.ts): the secret:// copies granted by one pattern of
// the stage's prefix, which matches no other stage's secrets, and a plan refused before a deploy would fail at
// PutRolePolicy (an outside audit: ~110 secret:// names, or fewer with AWS destinations, broke the deploy).
import { ConfigError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { collectReferences } from '../../infra/config.ts';
import {
  functionPolicyStatements,
  managedSecretsPattern,
  planPolicySizes,
  ROLE_INLINE_POLICIES_MAX_CHARS,
} from '../../infra/permissions-plan.ts';
import { planDeployment } from '../../infra/plan.ts';
import { planSecrets } from '../../infra/secrets-plan.ts';
import { aConfig, aConfigInput, aDeployConfig, anHttpSource } from './fixtures.ts';

const ACCOUNT = { partition: 'aws', region: 'eu-west-1', accountId: '123456789012' };
const SECRET_ARN = (name: string) => `arn:aws:secretsmanager:eu-west-1:123456789012:secret:${name}-AbCdEf`;

/** Whether IAM's resource pattern matches `arn` (`*` any run of characters, `/` included; `?` one character). */
function iamMatches(pattern: string, arn: string): boolean {
  const regex = pattern
    .split('')
    .map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c.replace(/[.+^${}()|[\]\\]/g, '\\$&')))
    .join('');
  return new RegExp(`^${regex}$`).test(arn);
}

/** `count` HTTP destinations, each signing with its own `secret://hook-NNN#whsec`. */
function hooks(count: number): Record<string, unknown> {
  return Object.fromEntries(
    Array.from({ length: count }, (_, i) => {
      const name = `hook-${String(i).padStart(3, '0')}`;
      return [
        name,
        {
          type: 'http',
          url: `https://${name}.example.com/queuebox`,
          signing: { scheme: 'standard-webhooks', secrets: [`secret://${name}#whsec`] },
        },
      ];
    }),
  );
}

/** `count` SQS destinations with realistic queue names. */
function queues(count: number): Record<string, unknown> {
  return Object.fromEntries(
    Array.from({ length: count }, (_, i) => {
      const name = `sqs-${String(i).padStart(3, '0')}`;
      return [
        name,
        {
          type: 'sqs',
          queueUrl: `https://sqs.eu-west-1.amazonaws.com/123456789012/queuebox-orders-outbound-${name}`,
        },
      ];
    }),
  );
}

describe('the secret:// copies in the role policies', () => {
  it('are granted by one pattern of the stage prefix, whatever their number, matching no other stage', () => {
    // Prepare: 150 secret:// names, past the ~110 at which the audit's deploy failed
    const input = aConfigInput({
      destinations: hooks(150),
      routes: [{ match: '#', destination: 'hook-000' }],
    });
    const plan = planDeployment(aDeployConfig(input), { app: 'queuebox', stage: 'prod', env: {} });

    // Act
    const statements = functionPolicyStatements('outbox-tick', plan, {
      account: ACCOUNT,
      functionArns: {},
      managedSecretArns: plan.secrets.managed.map((m) => SECRET_ARN(m.secretsManagerName)),
      databaseSecretArn: SECRET_ARN('queuebox-prod-DatabaseProxySecret-abcdefgh'),
    });

    // Assess
    expect(plan.secrets.managed).toHaveLength(151);
    const resources = statements.find((s) => s.Sid === 'ReadConfigurationSecrets')?.Resource ?? [];
    expect(resources).toEqual([
      SECRET_ARN('queuebox-prod-DatabaseProxySecret-abcdefgh'),
      'arn:aws:secretsmanager:eu-west-1:123456789012:secret:queuebox/prod/*',
    ]);
    const [, pattern = ''] = resources;
    for (const m of plan.secrets.managed)
      expect(iamMatches(pattern, SECRET_ARN(m.secretsManagerName))).toBe(true);
    for (const other of [
      'queuebox/prod-eu/hook-000',
      'queuebox/production/hook-000',
      'queuebox/dev/hook-000',
      'queuebox/prod',
      'orders/prod/hook-000',
      'queuebox-prod/hook-000',
    ]) {
      expect(iamMatches(pattern, SECRET_ARN(other)), other).toBe(false);
    }
    expect(planPolicySizes(plan).sizes['outbox-tick']).toBeLessThan(3000);
  });

  it('are listed by ARN when the prefix could be another stage’s too', () => {
    // Prepare
    const references = collectReferences(aConfigInput());
    const { secrets: shared } = planSecrets(references, aConfig(), 'queuebox/prod/eu');
    const { secrets: wildcard } = planSecrets(references, aConfig(), 'queuebox/pr*');
    const { secrets: own } = planSecrets(references, aConfig(), 'queuebox/prod');

    // Act
    const patterns = [shared, wildcard, own].map((s) => managedSecretsPattern(s, ACCOUNT));

    // Assess
    expect(patterns).toEqual([
      undefined,
      undefined,
      'arn:aws:secretsmanager:eu-west-1:123456789012:secret:queuebox/prod/*',
    ]);
  });
});

/** What planDeployment throws for `input` (stage prod), or undefined when it plans. */
function refusalOf(input: Record<string, unknown>): unknown {
  try {
    planDeployment(aDeployConfig(input), { app: 'queuebox', stage: 'prod', env: {} });
    return undefined;
  } catch (error) {
    return error;
  }
}

describe('planDeployment and IAM’s 10,240 characters per role', () => {
  it('refuses a policy over the limit, naming the function, its size and what to do', () => {
    // Prepare: outbox-tick publishes to 150 queues, each granted by ARN
    const input = aConfigInput({
      destinations: { ...(aConfigInput().destinations as object), ...queues(150) },
    });

    // Act
    const error = refusalOf(input);

    // Assess
    expect(error).toBeInstanceOf(ConfigError);
    const issues = (error as ConfigError).issues;
    expect(issues.map((i) => i.path)).toEqual(['aws.functions.outboxTick']);
    expect(issues[0]?.message).toMatch(
      /^the IAM role policy of outbox-tick would be (1[1-9]|[2-9]\d),\d{3} characters .* over the 10,240 IAM allows all inline policies of a role: the deploy would fail at PutRolePolicy\. It publishes to 150 SQS queue\(s\).*send to fewer/,
    );
  });

  it('counts external secrets at their longest ARN and points at secret://name#key', () => {
    // Prepare: 100 secrets listed in aws.secrets.external, each granted by name
    const names = Array.from({ length: 100 }, (_, i) => `shared/partner-token-${String(i).padStart(3, '0')}`);
    const input = aConfigInput({
      sources: {
        stripe: anHttpSource({ auth: { scheme: 'bearer', secrets: names.map((n) => `secret://${n}`) } }),
      },
      aws: { secrets: { external: names } },
    });

    // Act
    const error = refusalOf(input);

    // Assess: every function reads every secret, so every function's policy is over
    expect(error).toBeInstanceOf(ConfigError);
    const issues = (error as ConfigError).issues;
    expect(issues.length).toBeGreaterThan(1);
    for (const issue of issues) {
      expect(issue.path).toMatch(/^aws\.functions\./);
      expect(issue.message).toContain('It reads 100 secret(s) each granted by ARN');
      expect(issue.message).toContain('secret://name#key');
    }
  });

  it('plans the largest policy the audit measured, with long app and stage names', () => {
    // Prepare: 76 secret:// names and 20 AWS destinations, as the audit's configuration
    const input = aConfigInput({
      destinations: { ...hooks(76), ...queues(20) },
      routes: [{ match: '#', destination: 'hook-000' }],
    });

    // Act
    const plan = planDeployment(aDeployConfig(input), {
      app: 'orders-queuebox-platform',
      stage: 'production-eu-central',
      env: {},
    });

    // Assess
    const sizes = Object.values(planPolicySizes(plan).sizes);
    expect(Math.max(...sizes)).toBeLessThan(ROLE_INLINE_POLICIES_MAX_CHARS / 2);
  });
});
