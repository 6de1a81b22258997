import { createAdminRoutes } from '@queuebox/admin';
import { errorFields, errorResponse } from '@queuebox/core';
import { FUNCTION_ENV, METRICS } from '@queuebox/deploy-contract';
import { apiGatewayResultOf, checkHealth, type JsonAnswer, requestPathOf } from '@queuebox/use-cases';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { publishGauges } from './lambda-shell/gauges.ts';
import { beforeTimeout, createShell, lambda, MetricUnit, type ShellOptions } from './lambda-shell/lambda.ts';

/**
 * admin-http (API Gateway HTTP API): `GET /health` (open) is liveness only: 200 `{"status":"ok"}` without touching
 * the configuration or the database, so an uptime monitor polling it never keeps a pausable Aurora awake.
 * `GET /admin/health` (IAM) is the database check: 200 `{"status":"ok"}` when the database answers, 503
 * otherwise. The rest of `/admin/*` (IAM auth on the route, so no token here) is the operator API of
 * `@queuebox/admin`: stats, list, show, requeue, replay, purge. A requeue or replay wakes the tick that picks the
 * rows up. The routing and the wake after a write are `@queuebox/admin`'s `createAdminRoutes`; this file wires
 * the shell's store, logger, wake-ups and gauges into it.
 *
 * It never throws: every failure is answered (500, or 503 when the database is unavailable or silent), so Lambda's
 * `Errors` does not count it. Each 5xx answer therefore counts one `AdminFailures` (`{ service }`), the metric its
 * alarm reads, whichever path answered it (the database check, the store or configuration that did not load, a
 * route that failed, the database that went silent). Nothing is sent for the other answers.
 */
export function createHandler(options: ShellOptions = {}) {
  const shell = createShell(options);
  const wake = {
    outbox: shell.wakeUp(FUNCTION_ENV.outboxTickFunction),
    inbox: shell.wakeUp(FUNCTION_ENV.relayTickFunction),
  };

  async function health(): Promise<JsonAnswer> {
    let answer: Awaited<ReturnType<typeof checkHealth>>;
    try {
      answer = await checkHealth((await shell.cache.get()).store);
    } catch (error) {
      answer = { status: 503, body: { status: 'unavailable', error: 'store_unavailable' }, error };
    }
    if (answer.status !== 200) {
      shell.cache.fail(answer.error);
      shell.logger.warn('health check failed', { error: errorFields(answer.error) });
    }
    return answer;
  }

  const routes = createAdminRoutes({
    store: async () => (await shell.cache.get()).store,
    checkHealth: health,
    authorize: () => true,
    wake: (table) => wake[table].request(),
    // A requeue or purge moves DeadRows: the alarm hears it now, not at the next daily maintenance.
    afterWrite: (store, table) => publishGauges(shell.metrics, store, [table]),
    onAfterWriteError: (error) =>
      shell.logger.warn('gauges after an admin change failed', { error: errorFields(error) }),
    storeFailed: (error) => {
      shell.logger.error('QueueBox could not start', { error: errorFields(error) });
      return errorResponse(error);
    },
    onError: (error) => {
      shell.cache.fail(error);
      shell.logger.error('admin request failed', { error: errorFields(error) });
    },
    onAnswered: ({ method, path }, { status }) =>
      shell.logger.info('admin request', { method, path, status }),
  });

  return lambda(
    shell,
    async (event: APIGatewayProxyEventV2, context): Promise<APIGatewayProxyStructuredResultV2> => {
      const routed = routes.route({
        method: event.requestContext.http.method,
        // The raw query string: payload 2.0's queryStringParameters joins a repeated name's values with commas,
        // which would read `?topic=a&topic=b` as the one topic "a,b" instead of refusing it as the local server does.
        path: event.rawQueryString ? `${requestPathOf(event)}?${event.rawQueryString}` : requestPathOf(event),
        headers: event.headers ?? {},
        body:
          event.body === undefined
            ? null
            : Buffer.from(event.body, event.isBase64Encoded ? 'base64' : 'utf8'),
      });
      let result: APIGatewayProxyStructuredResultV2;
      try {
        result = apiGatewayResultOf(await beforeTimeout(routed, context));
      } catch (error) {
        // The database went silent: 503, and the store is replaced on the next invocation.
        shell.cache.fail(error);
        shell.logger.error('admin request failed', { error: errorFields(error) });
        result = apiGatewayResultOf(errorResponse(error));
      }
      if ((result.statusCode ?? 200) >= 500) {
        // Published at once, in a document of its own ({ service }): the gauges after a write publish theirs the
        // same way, so neither can take the other's dimensions, even from a write still running after a timeout.
        shell.metrics.addMetric(METRICS.adminFailures, MetricUnit.Count, 1);
        shell.metrics.publishStoredMetrics();
      }
      return result;
    },
    // The gauges and AdminFailures are published where they happen; there is nothing left to flush.
    { metrics: false },
  );
}

export const handler = createHandler();
