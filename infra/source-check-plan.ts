import { FUNCTION_ENV, type FunctionName } from '@queuebox/deploy-contract';
import type { BrokerTriggerPlan } from './brokers-plan.ts';
import type { FunctionPlan } from './functions-plan.ts';

// What source-check is given: the broker source functions whose event source mappings it lists, and the mappings
// infra created disabled. Pure.

/** A function whose mappings source-check lists, and the variable carrying its deployed name. */
export interface SourceCheckTarget {
  readonly function: Extract<FunctionName, 'kafka-source' | 'amqp-source'>;
  readonly env: string;
}

/** source-check's inputs; absent from the plan when source-check is not planned. */
export interface SourceCheckPlan {
  readonly targets: readonly SourceCheckTarget[];
  /**
   * The value of `DISABLED_SOURCE_MAPPINGS`: JSON of the topics (kafka-source) and queues (amqp-source) whose
   * mappings infra creates disabled, so a Disabled state there is what was asked for. Topics are unique among the
   * Kafka sources and queues among the AMQP sources (brokers-plan.ts refuses a second), so each names one mapping.
   */
  readonly disabledMappings: string;
}

/**
 * source-check's targets (kafka-source, amqp-source, those planned) and the mappings planned disabled, or
 * `undefined` when source-check is not planned (no Kafka or AMQP source: the default install).
 */
export function planSourceCheck(
  functions: readonly FunctionPlan[],
  triggers: readonly BrokerTriggerPlan[],
): SourceCheckPlan | undefined {
  const present = new Set(functions.map((f) => f.name));
  if (!present.has('source-check')) return undefined;
  const targets: SourceCheckTarget[] = [];
  if (present.has('kafka-source'))
    targets.push({ function: 'kafka-source', env: FUNCTION_ENV.kafkaSourceFunction });
  if (present.has('amqp-source'))
    targets.push({ function: 'amqp-source', env: FUNCTION_ENV.amqpSourceFunction });
  const disabled: Record<string, string[]> = {};
  for (const t of triggers) {
    if (t.enabled || t.kind === 'sqs') continue;
    const name = t.kind === 'amazon-mq' ? t.queue : t.topic;
    disabled[t.function] = [...(disabled[t.function] ?? []), name];
  }
  return { targets, disabledMappings: JSON.stringify(disabled) };
}
