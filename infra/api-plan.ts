import type { QueueBoxConfig } from '@queuebox/config';
import type { ConfigIssue } from '@queuebox/core';
import type { FunctionName } from '@queuebox/deploy-contract';
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

/** Lambda's synchronous invocation payload limit (request), in bytes. */
export const LAMBDA_SYNC_PAYLOAD_BYTES = 6 * 1024 * 1024;

/**
 * Room left in the event for everything but the body: API Gateway HTTP APIs accept 10 KiB of request line and
 * headers, which the event repeats (escaped) beside the request context.
 */
export const EVENT_ENVELOPE_BYTES = 32 * 1024;

/**
 * The largest webhook body that reaches inbox-http on AWS. The body travels inside the JSON event: base64 when API
 * Gateway treats it as binary (4 bytes per 3), or as a JSON string, where every quote, backslash and line break of
 * a JSON body takes two bytes. The worse of the two (×2) must fit Lambda's 6 MiB with the envelope.
 */
export const MAX_WEBHOOK_BODY_BYTES = Math.floor((LAMBDA_SYNC_PAYLOAD_BYTES - EVENT_ENVELOPE_BYTES) / 2);

/** Refuses an `inbox.maxBodyBytes` that API Gateway + Lambda cannot carry (only when there are HTTP sources). */
export function planBodyLimit(config: QueueBoxConfig): ConfigIssue[] {
  if (sourcesOf(config, 'http').length === 0 || config.inbox.maxBodyBytes <= MAX_WEBHOOK_BODY_BYTES)
    return [];
  return [
    {
      path: 'inbox.maxBodyBytes',
      message: `is ${config.inbox.maxBodyBytes}, but on AWS a body above ${MAX_WEBHOOK_BODY_BYTES} bytes may not fit Lambda's 6 MiB event (base64 or escaped JSON, plus headers); API Gateway would answer 413 or 502 instead of QueueBox's 413. Use at most ${MAX_WEBHOOK_BODY_BYTES}`,
    },
  ];
}

/**
 * The HTTP API's own arguments: no CORS. Webhooks come from servers, not browsers, and the admin API is signed
 * with SigV4; SST's default (`cors: true`) would answer preflights for any origin.
 */
export const API_ARGS = { cors: false } as const;
