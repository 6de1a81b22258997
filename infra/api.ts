import { API_ARGS } from './api-plan.ts';
import { InfraPlanError } from './errors.ts';
import type { Functions } from './functions.ts';
import type { DeployPlan } from './plan.ts';
import { webhookOutputs } from './webhooks.ts';

// API Gateway HTTP API: `POST {inbox.basePath}/{source}` → inbox-http (the function answers 404 for an unknown
// source), `ANY /admin/{proxy+}` → admin-http behind IAM auth (SigV4-signed requests), `GET /health` →
// admin-http. Other methods on the inbox path get API Gateway's own 404.

/** The API and its outputs. */
export interface Api {
  readonly api: sst.aws.ApiGatewayV2;
  readonly url: $util.Output<string>;
  /** `webhook-<source>` → full webhook URL, one per HTTP source. */
  readonly webhooks: Record<string, $util.Output<string>>;
}

/** Creates the HTTP API and its routes. */
export function createApi(plan: Pick<DeployPlan, 'routes' | 'webhooks'>, functions: Functions): Api {
  const api = new sst.aws.ApiGatewayV2('Api', { ...API_ARGS });
  for (const route of plan.routes) {
    const fn = functions[route.function];
    if (!fn)
      throw new InfraPlanError(`the route ${route.route} needs ${route.function}, which was not created`);
    api.route(route.route, fn.arn, route.auth === 'iam' ? { auth: { iam: true } } : {});
  }
  return { api, url: api.url, webhooks: webhookOutputs(api.url, plan.webhooks) };
}
