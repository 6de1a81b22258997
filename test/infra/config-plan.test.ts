import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInMemorySecretResolver, loadConfig, parseConfig } from '@queuebox/config';
import { describe, expect, it } from 'vitest';
import { collectReferences } from '../../infra/config.ts';
import { functionConfigDocument } from '../../infra/config-plan.ts';
import { planDatabase } from '../../infra/database-plan.ts';
import { planSecrets } from '../../infra/secrets-plan.ts';
import { aConfigInput } from './fixtures.ts';

/** A Standard Webhooks signing secret long enough to pass validation (at least 24 bytes decoded). */
const BILLING_SIGNING_SECRET = 'whsec_2JlfwjtXCrAFGl47kya2ZpG7+G0bsJSzMg7Z3Ci3OWg';

describe('functionConfigDocument', () => {
  it('ships a file that loadConfig reads back with the secrets infra manages and the database infra chose', async () => {
    // Prepare
    const input = aConfigInput({
      database: {
        provider: 'postgres',
        url: 'env://DATABASE_URL',
        // The local runtime's wake-up listener (no function listens): not shipped.
        listenUrl: 'postgres://qb:pw@db.internal:5432/queuebox',
        schema: 'app_queue',
        dataDir: '.x',
      },
    });
    // Functions in the VPC: a connection through the URL secret infra writes.
    const database = planDatabase(parseConfig(input), undefined, 'queuebox/prod', true);
    const { secrets } = planSecrets(collectReferences(input), parseConfig(input), 'queuebox/prod');
    const dir = await mkdtemp(join(tmpdir(), 'queuebox-infra-'));
    try {
      await writeFile(join(dir, 'queuebox.yaml'), functionConfigDocument(input, database, secrets));
      const resolver = createInMemorySecretResolver({
        'queuebox/prod/database': JSON.stringify({ url: 'postgres://qb:pw@aurora.internal:5432/queuebox' }),
        'queuebox/prod/stripe': JSON.stringify({ webhook: 'whsec_stripe' }),
        'queuebox/prod/billing': JSON.stringify({ whsec: BILLING_SIGNING_SECRET }),
      });

      // Act
      const config = await loadConfig({ cwd: dir, env: {}, secrets: resolver });

      // Assess
      expect(config.database).toMatchObject({
        provider: 'postgres',
        url: 'postgres://qb:pw@aurora.internal:5432/queuebox',
        schema: 'app_queue',
      });
      expect(config.database.listenUrl).toBeUndefined();
      expect(config.sources.stripe?.type === 'http' && config.sources.stripe.auth).toEqual({
        scheme: 'stripe',
        secrets: ['whsec_stripe'],
        toleranceSec: 300,
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('functionConfigDocument with the Data API', () => {
  it('ships database.dataApi whose ARNs the functions read from the variables infra sets', async () => {
    // Prepare
    const input = aConfigInput({
      database: {
        provider: 'postgres',
        url: 'env://DATABASE_URL',
        // Shipped next to dataApi, it would make every function refuse to start.
        listenUrl: 'postgres://qb:pw@db.internal:5432/queuebox',
        schema: 'app_queue',
      },
    });
    const database = planDatabase(parseConfig(input), undefined, 'queuebox/prod');
    const { secrets } = planSecrets(collectReferences(input), parseConfig(input), 'queuebox/prod');
    const dir = await mkdtemp(join(tmpdir(), 'queuebox-infra-'));
    try {
      await writeFile(join(dir, 'queuebox.yaml'), functionConfigDocument(input, database, secrets));
      const env = {
        DATABASE_CLUSTER_ARN: 'arn:aws:rds:us-east-1:123456789012:cluster:queuebox-prod-databasecluster-x',
        DATABASE_SECRET_ARN: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:queuebox-prod-db-AbCdEf',
      };
      const resolver = createInMemorySecretResolver({
        'queuebox/prod/stripe': JSON.stringify({ webhook: 'whsec_stripe' }),
        'queuebox/prod/billing': JSON.stringify({ whsec: BILLING_SIGNING_SECRET }),
      });

      // Act
      const config = await loadConfig({ cwd: dir, env, secrets: resolver });

      // Assess
      expect(config.database).toMatchObject({
        provider: 'postgres',
        schema: 'app_queue',
        dataApi: {
          resourceArn: env.DATABASE_CLUSTER_ARN,
          secretArn: env.DATABASE_SECRET_ARN,
          database: 'queuebox',
        },
      });
      expect(config.database.url).toBeUndefined();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
