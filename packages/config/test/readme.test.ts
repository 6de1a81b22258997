import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import {
  createInMemorySecretResolver,
  type HttpSourceConfig,
  parseConfig,
  parseConfigYaml,
  resolveReferences,
} from '../src/index.ts';

async function readmeExample(): Promise<string> {
  const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8');
  const blocks = [...readme.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1] ?? '');
  if (blocks.length !== 1) throw new Error(`expected one yaml block in README.md, found ${blocks.length}`);
  return blocks[0] ?? '';
}

describe('the annotated example in README.md', () => {
  it('is a valid configuration once its references resolve', async () => {
    // Prepare
    const doc = parseConfigYaml(await readmeExample(), 'README.md');
    const resolved = await resolveReferences(doc.value, {
      env: { DATABASE_URL: 'postgres://app:pw@db/app', PARTNER_SECRET: 'p', AMQP_URL: 'amqp://127.0.0.1' },
      secrets: createInMemorySecretResolver({
        'queuebox/admin': '{"token":"an-admin-token-of-16+"}',
        stripe: '{"webhook":"whsec_1"}',
        billing: '{"apiKey":"k","whsec":"whsec_YSBzaWduaW5nIGtleSBvZiAyNCBieXRlcw=="}',
      }),
      origins: doc.origins,
    });

    // Act
    const config = parseConfig(resolved.value, doc.origins);

    // Assess
    expect(doc.issues).toEqual([]);
    expect(resolved.issues).toEqual([]);
    expect(Object.keys(config.sources)).toEqual([
      'stripe',
      'partner',
      'internal',
      'orders-in',
      'clicks',
      'audit',
      'jobs-in',
    ]);
    expect(Object.keys(config.destinations)).toEqual([
      'billing',
      'rabbit',
      'events',
      'fanout',
      'work',
      'notify',
      'bus',
    ]);
    expect((config.sources.partner as HttpSourceConfig).auth).toMatchObject({
      scheme: 'hmac',
      header: 'X-Signature',
    });
    expect(config.routes).toHaveLength(7);
  });
});
