import { createLogThrottle, errorFields, errorResponse } from '@queuebox/core';
import { FUNCTION_ENV, METRICS } from '@queuebox/deploy-contract';
import { UNAVAILABLE_HEADERS } from '@queuebox/inbox';
import { apiGatewayResultOf, ingestRequestOf } from '@queuebox/use-cases';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import {
  ANSWER_MARGIN_MS,
  beforeTimeout,
  createShell,
  lambda,
  MetricUnit,
  type ShellOptions,
} from './lambda-shell/lambda.ts';

/**
 * inbox-http (API Gateway HTTP API, payload format 2.0, `POST {inbox.basePath}/{source}`): authenticates, extracts,
 * transforms and stores through the ingestion; answers 202 / 200 duplicate / 4xx / 503 as docs/design.md §5 says.
 * After storing a push row it wakes relay-tick (debounced).
 *
 * It never throws: every failure is answered (500, or 503: `store_unavailable` when the database is unavailable or
 * silent, `timeout` when the invocation ran out of time before any store call) so the sender retries, and the
 * invocation succeeds, so Lambda's `Errors` does not count it. Each 5xx answer therefore counts one
 * `IngestFailures` (the metric its alarm reads), also when the configuration or the store could not be loaded:
 * Powertools Metrics exists before the configuration does. Throwing there instead would make API Gateway answer
 * 502, which senders retry alike, but would lose QueueBox's JSON body and the 503 that says "the database".
 */
export function createHandler(options: ShellOptions = {}) {
  const shell = createShell(options);
  const wakeRelay = shell.wakeUp(FUNCTION_ENV.relayTickFunction);
  // Refusals and failures, which a sender (or an outage) repeats at any rate: one line per kind a minute in this
  // container, then a count of the rest (each is counted by the metrics). Accepted webhooks keep a line each.
  const throttle = createLogThrottle();
  /** A 5xx answer: counted (the alarm reads it), logged with its cause, and answered as QueueBox's JSON error. */
  const failed = (message: string, error: unknown, fields: Readonly<Record<string, unknown>> = {}) => {
    const response = errorResponse(error);
    shell.metrics.addMetric(METRICS.ingestFailures, MetricUnit.Count, 1);
    throttle.line(`${message}:${response.status}`, (extra) =>
      shell.logger.error(message, {
        ...fields,
        status: response.status,
        error: errorFields(error),
        ...extra,
      }),
    );
    // A 503 asks its sender to wait a few seconds, as the ingestion's own 503s do.
    return apiGatewayResultOf(
      response.status === 503 ? { ...response, headers: UNAVAILABLE_HEADERS } : response,
    );
  };
  return lambda(
    shell,
    async (event: APIGatewayProxyEventV2, context): Promise<APIGatewayProxyStructuredResultV2> => {
      let services: Awaited<ReturnType<typeof shell.cache.get>>['services'];
      try {
        ({ services } = await beforeTimeout(shell.cache.get(), context));
      } catch (error) {
        // A build that did not finish in time (a store connecting to a silent database) is started afresh next time;
        // a configuration that does not load (an unset env:// secret) answers 500 until it is fixed.
        shell.cache.fail(error);
        return failed('QueueBox could not start', error);
      }
      let answer: Awaited<ReturnType<typeof services.ingestion.handle>>;
      try {
        const { ingestion } = services;
        answer = await beforeTimeout(
          ingestion.handle(ingestRequestOf(event)),
          context,
          ANSWER_MARGIN_MS,
          () => (ingestion.pendingStores ?? 1) > 0,
        );
      } catch (error) {
        // The database went silent: answer 503 (the sender retries; a row stored after all makes that retry a
        // duplicate) and replace the store on the next invocation. Time that ran out before any store call (a slow
        // transform) is a 503 `timeout` that keeps the store. Anything else is a bug: 500.
        shell.cache.fail(error);
        return failed('inbox request failed', error);
      }
      const fields = { source: answer.source, status: answer.status, outcome: answer.outcome };
      if (answer.outcome === 'accepted') shell.metrics.addMetric(METRICS.accepted, MetricUnit.Count, 1);
      else if (answer.outcome === 'duplicate')
        shell.metrics.addMetric(METRICS.duplicate, MetricUnit.Count, 1);
      else if (answer.status < 500) shell.metrics.addMetric(METRICS.rejected, MetricUnit.Count, 1);
      else shell.metrics.addMetric(METRICS.ingestFailures, MetricUnit.Count, 1);
      // The error itself, so that refused credentials (a rotated password) also reload the configuration.
      if (answer.outcome === 'store_unavailable' && !shell.cache.fail(answer.error)) {
        shell.cache.markBroken(answer.outcome);
      }
      if (answer.status >= 500) {
        throttle.line(`failed:${answer.source}:${answer.outcome}`, (extra) =>
          shell.logger.error('inbox request failed', {
            ...fields,
            error: errorFields(answer.error),
            ...extra,
          }),
        );
      } else if (answer.status >= 400) {
        // A 401's reason (timestamp out of tolerance, no signature matches, a missing header) for the log only.
        throttle.line(`refused:${answer.source}:${answer.status}:${answer.refusal?.reason ?? ''}`, (extra) =>
          shell.logger.info('inbox request', { ...fields, ...answer.refusal, ...extra }),
        );
      } else shell.logger.info('inbox request', { ...fields, id: answer.stored?.id });
      if (answer.stored?.wakeRelay) await wakeRelay.request();
      return apiGatewayResultOf(answer);
    },
  );
}

export const handler = createHandler();
