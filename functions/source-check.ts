import { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import middy from '@middy/core';
import { FUNCTION_ENV, METRIC_NAMESPACE, METRICS } from '@queuebox/deploy-contract';
import {
  classifyMapping,
  createMappingLister,
  type MappingLister,
  plannedDisabledOf,
  type SourceFunction,
  sourceKindOf,
} from './lambda-shell/source-mappings.ts';

/** Options of {@link createHandler}; tests inject what they observe, the deployment takes the defaults. */
export interface SourceCheckOptions {
  /** Default: a Powertools Logger configured by `POWERTOOLS_*` variables. */
  readonly logger?: Logger;
  /** Default: Powertools Metrics, namespace `POWERTOOLS_METRICS_NAMESPACE` or `QueueBox`. */
  readonly metrics?: Metrics;
  /** Default: `createMappingLister()` (`@aws-sdk/client-lambda`, loaded on first use). */
  readonly lister?: MappingLister;
  /** Where the function names and the mappings created disabled are read. Default `process.env`. */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

const TARGETS: readonly { readonly fn: SourceFunction; readonly variable: string }[] = [
  { fn: 'kafka-source', variable: FUNCTION_ENV.kafkaSourceFunction },
  { fn: 'amqp-source', variable: FUNCTION_ENV.amqpSourceFunction },
];

/**
 * source-check (EventBridge schedule, every `aws.functions.sourceCheck.rateMinutes`, only in installs with Kafka or
 * AMQP sources): lists the event source mappings of kafka-source and amqp-source (`ListEventSourceMappings` by
 * `FunctionName`, every page) and reports each that cannot poll ({@link classifyMapping}): one ERROR line per mapping,
 * and `SourceProblems` (dimension `{ service }`, never sent at 0), which the `<service>-source-problems` alarm reads.
 * Such a mapping (a rotated SASL/SCRAM secret, brokers out of reach, a deleted topic, Amazon MQ refusing Lambda)
 * invokes nothing, so no other QueueBox metric and no Lambda `Errors` move while messages wait in the broker.
 *
 * It never loads the configuration nor opens the database: it reads no secret and does not wake a paused Aurora. A
 * listing that fails (the API throttled, the permission missing) fails the invocation, which the function's errors
 * alarm reads.
 */
export function createHandler(options: SourceCheckOptions = {}) {
  const env = options.env ?? process.env;
  const logger = options.logger ?? new Logger();
  const metrics =
    options.metrics ?? new Metrics({ namespace: env[FUNCTION_ENV.metricsNamespace] || METRIC_NAMESPACE });
  const lister = options.lister ?? createMappingLister();
  const disabled = plannedDisabledOf(env[FUNCTION_ENV.disabledSourceMappings]);
  return middy(async (event: unknown) => {
    let checked = 0;
    let problems = 0;
    for (const { fn, variable } of TARGETS) {
      const functionName = env[variable];
      if (!functionName) continue;
      for (const mapping of await lister.list(functionName)) {
        checked += 1;
        const verdict = classifyMapping(mapping, disabled[fn]);
        if (!verdict.problem) continue;
        problems += 1;
        logger.error('event source mapping cannot poll: its broker messages are not consumed', {
          uuid: mapping.UUID,
          sourceKind: sourceKindOf(fn, mapping),
          function: functionName,
          state: mapping.State,
          stateTransitionReason: mapping.StateTransitionReason,
          lastProcessingResult: mapping.LastProcessingResult,
          eventSourceArn: mapping.EventSourceArn,
          ...(mapping.Topics ? { topics: mapping.Topics } : {}),
          ...(mapping.Queues ? { queues: mapping.Queues } : {}),
          why: verdict.why,
        });
      }
    }
    if (problems > 0) {
      metrics.addMetric(METRICS.sourceProblems, MetricUnit.Count, problems);
      metrics.publishStoredMetrics();
    }
    logger.info('source check', { trigger: triggerOf(event), checked, problems });
    return { checked, problems };
  }).use(injectLambdaContext(logger));
}

/** What started the run, for its log line: infra's `{ trigger }` or an EventBridge Scheduled Event. */
function triggerOf(event: unknown): string {
  if (event && typeof event === 'object') {
    if ('trigger' in event && typeof event.trigger === 'string') return event.trigger;
    if ('detail-type' in event) return 'schedule';
  }
  return 'unknown';
}

export const handler = createHandler();
