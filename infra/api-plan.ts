import type { QueueBoxConfig } from '@queuebox/config';
import type { FunctionName } from './contract.ts';
import { sourcesOf } from './functions-plan.ts';

// The API Gateway routes and the webhook outputs. Pure.

/** One API Gateway route. */
export interface RoutePlan {
  /** `METHOD /path` as API Gateway HTTP APIs write it. */
  readonly route: string;
  readonly function: FunctionName;
  readonly auth: 'none' | 'iam';
}

/** A stack output with the full webhook URL of one HTTP source. */
export interface WebhookPlan {
  readonly source: string;
  /** Path under the API's URL, e.g. `/inbox/stripe`. */
  readonly path: string;
  /** Stack output name, `webhook-<source>`. */
  readonly output: string;
}

/** The API's routes and the webhook outputs, one per HTTP source. */
export function planRoutes(config: QueueBoxConfig): { routes: RoutePlan[]; webhooks: WebhookPlan[] } {
  const basePath = config.inbox.basePath;
  const http = sourcesOf(config, 'http');
  const routes: RoutePlan[] = [];
  if (http.length > 0)
    routes.push({ route: `POST ${basePath}/{source}`, function: 'inbox-http', auth: 'none' });
  routes.push({ route: 'ANY /admin/{proxy+}', function: 'admin-http', auth: 'iam' });
  routes.push({ route: 'GET /health', function: 'admin-http', auth: 'none' });
  const webhooks = http
    .map(([name, source]) => ({
      source: name,
      path: `${basePath}/${source.path}`,
      output: `webhook-${name}`,
    }))
    .sort((a, b) => a.source.localeCompare(b.source));
  return { routes, webhooks };
}

/** The full URL of a route path on an API whose base URL may or may not end with `/`. */
export function webhookUrl(apiUrl: string, path: string): string {
  return `${apiUrl.replace(/\/+$/, '')}${path}`;
}
