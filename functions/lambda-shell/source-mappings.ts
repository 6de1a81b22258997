import type { EventSourceMappingConfiguration, LambdaClientConfig } from '@aws-sdk/client-lambda';
import { AWS_CLIENT_DEFAULTS } from '@queuebox/config';

// What source-check reads of the event source mappings of kafka-source and amqp-source, and how it tells one that
// cannot poll: a pure classifier, and the listing through the Lambda API (its client loaded on first use).

/** The fields of a mapping (Lambda's `EventSourceMappingConfiguration`) the check reads. */
export type SourceMapping = Pick<
  EventSourceMappingConfiguration,
  | 'UUID'
  | 'State'
  | 'StateTransitionReason'
  | 'LastProcessingResult'
  | 'EventSourceArn'
  | 'FunctionArn'
  | 'Topics'
  | 'Queues'
>;

/** The broker source functions whose mappings are checked. */
export type SourceFunction = 'kafka-source' | 'amqp-source';

/**
 * `StateTransitionReason` codes with which Lambda stops an Amazon MQ consumer on an unrecoverable error
 * (https://docs.aws.amazon.com/lambda/latest/dg/services-mq-errors.html, "Troubleshoot Amazon MQ event source mapping
 * errors"). Checked on every mapping: on any other it means no less.
 */
export const MQ_FAILURE_REASONS: readonly string[] = [
  'ESM_CONFIG_NOT_VALID',
  'EVENT_SOURCE_AUTHN_ERROR',
  'EVENT_SOURCE_AUTHZ_ERROR',
  'FUNCTION_CONFIG_NOT_VALID',
];

/**
 * States a mapping passes through while Lambda applies a change (the API's `State`: Creating, Enabling, Disabling,
 * Enabled, Disabled, Updating, Deleting): not judged until they settle, at the next check.
 */
const TRANSITIONAL_STATES: readonly string[] = ['Creating', 'Updating', 'Enabling', 'Deleting'];

/** What the check concludes of one mapping. */
export type MappingVerdict = { readonly problem: false } | { readonly problem: true; readonly why: string };

/**
 * Whether `mapping` of `fn` cannot poll. `plannedDisabled`: the topics (kafka-source) or queues (amqp-source) whose
 * mappings infra created disabled. In order:
 *
 * - a mapping created disabled and Disabled / Disabling is as asked: healthy (whatever result it last recorded);
 * - Creating / Updating / Enabling / Deleting: healthy, not judged until the change settles;
 * - `LastProcessingResult` beginning with `PROBLEM` (Kafka: "PROBLEM: SASL authentication failed", "PROBLEM: Cluster
 *   failed to authorize Lambda", …; https://docs.aws.amazon.com/lambda/latest/dg/with-kafka-troubleshoot.html):
 *   a problem;
 * - `StateTransitionReason` one of {@link MQ_FAILURE_REASONS}: a problem;
 * - Disabled / Disabling though infra created it enabled: a problem (Lambda or someone stopped it);
 * - anything else ("OK", "No records processed", no result yet): healthy.
 */
export function classifyMapping(
  mapping: SourceMapping,
  plannedDisabled: ReadonlySet<string> = new Set(),
): MappingVerdict {
  const state = mapping.State ?? '';
  const stopped = state === 'Disabled' || state === 'Disabling';
  const names = [...(mapping.Topics ?? []), ...(mapping.Queues ?? [])];
  const createdDisabled = names.length > 0 && names.every((name) => plannedDisabled.has(name));
  if (stopped && createdDisabled) return { problem: false };
  if (TRANSITIONAL_STATES.includes(state)) return { problem: false };
  const result = mapping.LastProcessingResult ?? '';
  if (result.startsWith('PROBLEM')) return { problem: true, why: result };
  const reason = mapping.StateTransitionReason ?? '';
  if (MQ_FAILURE_REASONS.includes(reason)) return { problem: true, why: reason };
  if (stopped) return { problem: true, why: `${state}, though infra created it enabled` };
  return { problem: false };
}

/** The broker kind of a mapping of `fn`, as infra/brokers-plan.ts names it. */
export function sourceKindOf(
  fn: SourceFunction,
  mapping: SourceMapping,
): 'msk' | 'self-managed-kafka' | 'amazon-mq' {
  if (fn === 'amqp-source') return 'amazon-mq';
  return mapping.EventSourceArn?.split(':')[2] === 'kafka' ? 'msk' : 'self-managed-kafka';
}

/**
 * Parses `DISABLED_SOURCE_MAPPINGS` (JSON `{ "kafka-source": [topic…], "amqp-source": [queue…] }`, set by infra):
 * the names per function; unset or unreadable: none (every Disabled mapping is then reported).
 */
export function plannedDisabledOf(text: string | undefined): Record<SourceFunction, ReadonlySet<string>> {
  let parsed: Record<string, unknown> = {};
  try {
    const value: unknown = text ? JSON.parse(text) : {};
    if (value && typeof value === 'object') parsed = value as Record<string, unknown>;
  } catch {
    parsed = {};
  }
  const names = (fn: SourceFunction) => {
    const list = parsed[fn];
    return new Set(Array.isArray(list) ? list.filter((n): n is string => typeof n === 'string') : []);
  };
  return { 'kafka-source': names('kafka-source'), 'amqp-source': names('amqp-source') };
}

/** Lists the event source mappings of one function. */
export interface MappingLister {
  list(functionName: string): Promise<SourceMapping[]>;
}

/**
 * A {@link MappingLister} over `ListEventSourceMappings` with `FunctionName`, following `NextMarker` until the last
 * page (the API answers at most 100 mappings a page;
 * https://docs.aws.amazon.com/lambda/latest/api/API_ListEventSourceMappings.html). `@aws-sdk/client-lambda` is
 * imported on the first call (the bundles import no AWS SDK client at their top: scripts/check-bundles.ts), with
 * `AWS_CLIENT_DEFAULTS` under `config`.
 */
export function createMappingLister(config: LambdaClientConfig = {}): MappingLister {
  let ready:
    | Promise<
        (functionName: string, marker?: string) => Promise<{ mappings: SourceMapping[]; next?: string }>
      >
    | undefined;
  return {
    async list(functionName) {
      ready ??= import('@aws-sdk/client-lambda').then(({ LambdaClient, ListEventSourceMappingsCommand }) => {
        const client = new LambdaClient({ ...AWS_CLIENT_DEFAULTS, ...config });
        return async (name: string, marker?: string) => {
          const page = await client.send(
            new ListEventSourceMappingsCommand({
              FunctionName: name,
              ...(marker === undefined ? {} : { Marker: marker }),
            }),
          );
          return {
            mappings: page.EventSourceMappings ?? [],
            ...(page.NextMarker ? { next: page.NextMarker } : {}),
          };
        };
      });
      const send = await ready;
      const mappings: SourceMapping[] = [];
      let marker: string | undefined;
      do {
        const page = await send(functionName, marker);
        mappings.push(...page.mappings);
        marker = page.next;
      } while (marker !== undefined);
      return mappings;
    },
  };
}
