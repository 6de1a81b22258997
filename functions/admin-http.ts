import { type AdminHandler, createAdminHandler } from '@queuebox/admin';
import type { Store } from '@queuebox/core';
import { FUNCTION_ENV } from '@queuebox/deploy-contract';
import { errorResponse } from '@queuebox/inbox';
import { apiGatewayResultOf, checkHealth, type JsonAnswer, requestPathOf } from '@queuebox/use-cases';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { publishGauges } from './lambda-shell/gauges.ts';
import { createShell, errorFields, lambda, type ShellOptions } from './lambda-shell/lambda.ts';

/**
 * admin-http (API Gateway HTTP API): `GET /health` (open) is liveness only: 200 `{"status":"ok"}` without touching
 * the configuration or the database, so an uptime monitor polling it never keeps a pausable Aurora awake.
 * `GET /admin/health` (IAM) is the database check: 200 `{"status":"ok"}` when the database answers, 503
 * otherwise. The rest of `/admin/*` (IAM auth on the route, so no token here) is the operator API of
 * `@queuebox/admin`: stats, list, show, requeue, replay, purge. A requeue or replay wakes the tick that picks the
 * rows up.
 */
export function createHandler(options: ShellOptions = {}) {
  const shell = createShell(options);
  const wake = {
    outbox: shell.wakeUp(FUNCTION_ENV.outboxTickFunction),
    inbox: shell.wakeUp(FUNCTION_ENV.relayTickFunction),
  };
  const admins = new WeakMap<Store, AdminHandler>();
  const adminOf = (store: Store) => {
    let admin = admins.get(store);
    if (!admin) {
      admin = createAdminHandler({
        store,
        authorize: () => true,
        onError: (error) => {
          shell.cache.fail(error);
          shell.logger.error('admin request failed', { error: errorFields(error) });
        },
      });
      admins.set(store, admin);
    }
    return admin;
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

  async function admin(event: APIGatewayProxyEventV2, path: string): Promise<JsonAnswer> {
    let store: Store;
    try {
      ({ store } = await shell.cache.get());
    } catch (error) {
      shell.logger.error('QueueBox could not start', { error: errorFields(error) });
      return errorResponse(error);
    }
    const method = event.requestContext.http.method;
    const body =
      event.body === undefined ? null : Buffer.from(event.body, event.isBase64Encoded ? 'base64' : 'utf8');
    const answer = await adminOf(store).handle({
      method,
      path,
      query: event.queryStringParameters ?? {},
      headers: event.headers ?? {},
      body,
    });
    const table = path.split('/')[2];
    if (method.toUpperCase() === 'POST' && answer.status < 300 && (table === 'outbox' || table === 'inbox')) {
      await wake[table].request();
      // A requeue or purge moves DeadRows: the alarm hears it now, not at the next daily maintenance.
      await publishGauges(shell.metrics, store, [table]).catch((error: unknown) => {
        shell.logger.warn('gauges after an admin change failed', { error: errorFields(error) });
      });
    }
    shell.logger.info('admin request', { method, path, status: answer.status });
    return answer;
  }

  return lambda(
    shell,
    async (event: APIGatewayProxyEventV2): Promise<APIGatewayProxyStructuredResultV2> => {
      const path = requestPathOf(event);
      if (path === '/health' || path === '/admin/health') {
        const method = event.requestContext.http.method.toUpperCase();
        if (method !== 'GET' && method !== 'HEAD') {
          return apiGatewayResultOf({
            status: 405,
            body: { error: 'method_not_allowed', message: 'Use GET' },
            headers: { allow: 'GET' },
          });
        }
        return apiGatewayResultOf(
          path === '/health' ? { status: 200, body: { status: 'ok' } } : await health(),
        );
      }
      if (path === '/admin' || path.startsWith('/admin/'))
        return apiGatewayResultOf(await admin(event, path));
      return apiGatewayResultOf({
        status: 404,
        body: { error: 'not_found', message: 'Nothing is served at this path' },
      });
    },
    { metrics: false },
  );
}

export const handler = createHandler();
