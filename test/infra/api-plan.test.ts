import { parseConfig } from '@queuebox/config';
import { describe, expect, it } from 'vitest';
import { planRoutes, webhookUrl } from '../../infra/api-plan.ts';
import { aConfig, aKafkaSource, anHttpSource } from './fixtures.ts';

describe('planRoutes', () => {
  it('routes POST {basePath}/{source} to inbox-http and gives each HTTP source a webhook output', () => {
    // Prepare
    const config = aConfig({
      inbox: { basePath: '/hooks/v1' },
      sources: {
        stripe: anHttpSource(),
        partner: anHttpSource({ path: 'p-7' }),
        clicks: aKafkaSource(),
      },
    });

    // Act
    const { routes, webhooks } = planRoutes(config);

    // Assess
    expect(routes).toEqual([
      { route: 'POST /hooks/v1/{source}', function: 'inbox-http', auth: 'none' },
      { route: 'ANY /admin/{proxy+}', function: 'admin-http', auth: 'iam' },
      { route: 'GET /health', function: 'admin-http', auth: 'none' },
    ]);
    expect(webhooks).toEqual([
      { source: 'partner', path: '/hooks/v1/p-7', output: 'webhook-partner' },
      { source: 'stripe', path: '/hooks/v1/stripe', output: 'webhook-stripe' },
    ]);
  });

  it('has no inbox route without HTTP sources', () => {
    // Act
    const { routes, webhooks } = planRoutes(parseConfig({ sources: { clicks: aKafkaSource() } }));

    // Assess
    expect(routes.map((r) => r.route)).toEqual(['ANY /admin/{proxy+}', 'GET /health']);
    expect(webhooks).toEqual([]);
  });

  it('joins the API URL and a path with exactly one slash', () => {
    expect(webhookUrl('https://abc.execute-api.eu-west-1.amazonaws.com', '/inbox/stripe')).toBe(
      'https://abc.execute-api.eu-west-1.amazonaws.com/inbox/stripe',
    );
    expect(webhookUrl('https://api.example.com/qb/', '/inbox/stripe')).toBe(
      'https://api.example.com/qb/inbox/stripe',
    );
  });
});
