import type { EventBridgeClient, PutEventsRequestEntry } from '@aws-sdk/client-eventbridge';
import type { ConfigIssue, OutgoingMessage, Publisher } from '@queuebox/core';
import { ConfigError, renderTemplate } from '@queuebox/core';
import { utf8Length } from './attributes.ts';
import { type AwsClientOptions, lazySdkClient, regionOfArn, sdkClientConfig } from './aws-client.ts';
import { describeAwsError, isPermanentAwsError } from './aws-errors.ts';
import { createBatchPublisher, type EntryResult } from './batch-publisher.ts';

/** EventBridge's limit on one `PutEvents` entry and on all entries of a request: 256 KiB. */
export const EVENTBRIDGE_MAX_ENTRY_BYTES = 262_144;
/** Entries of one `PutEvents`. */
export const EVENTBRIDGE_MAX_BATCH_ENTRIES = 10;

/** `destinations.<name>` of `type: eventbridge` (the validated configuration fits as it is). */
export interface EventBridgeDestinationOptions extends AwsClientOptions {
  readonly type?: 'eventbridge';
  /** The event bus: its name or ARN. Default `default`. */
  readonly eventBus?: string;
  /** The events' `Source`, e.g. `com.example.orders` (EventBridge reserves `aws.`). */
  readonly source: string;
  /** `DetailType` template with `{{ topic }}` and `{{ key }}`. Default `{{ topic }}`. */
  readonly detailType?: string;
}

/** Options of the publisher: the destination plus tuning. */
export interface EventBridgePublisherOptions extends EventBridgeDestinationOptions {
  /** The destination's name, for messages. Default `eventbridge`. */
  readonly name?: string;
  /** `PutEvents` requests in flight at once. Default 8. */
  readonly maxConcurrentRequests?: number;
  /** A client to use instead of one built from the options (tests). It is not destroyed by `close`. */
  readonly client?: EventBridgeClient;
}

/** Per-entry error codes that say the entry itself is wrong; other codes (throttling, internal, authz) retry. */
const PERMANENT_ENTRY_CODES: ReadonlySet<string> = new Set([
  'MalformedDetail',
  'InvalidArgument',
  'InvalidArgumentException',
  'ValidationException',
]);

const PERMANENT_REQUEST_CODES: ReadonlySet<string> = new Set(['ValidationException', 'InvalidArgument']);

/** A per-entry failure of `PutEvents`. */
export function eventBridgeEntryResult(failure: {
  readonly ErrorCode?: string;
  readonly ErrorMessage?: string;
}): EntryResult {
  const code = failure.ErrorCode ?? 'UnknownError';
  return {
    ok: false,
    retryable: !PERMANENT_ENTRY_CODES.has(code),
    error: failure.ErrorMessage && failure.ErrorMessage !== code ? `${code}: ${failure.ErrorMessage}` : code,
  };
}

/**
 * core's `Publisher` for an EventBridge bus, through `PutEvents` (10 entries, 256 KiB per request).
 *
 * Each row: `Source` = `source`, `DetailType` = the `detailType` template, `Detail` = the JSON payload, which must
 * be a JSON object (EventBridge refuses anything else: such a row goes dead at once), `EventBusName` = `eventBus`.
 * Headers are not sent: an event has no attributes (a transform can move them into the payload). An entry over
 * 256 KiB (Source + DetailType + Detail, as EventBridge counts) or an empty DetailType goes dead without a request;
 * per-entry results settle each row alone (`MalformedDetail`, `InvalidArgument` → dead; others → retry).
 */
export function createEventBridgePublisher(options: EventBridgePublisherOptions): Publisher {
  const name = options.name ?? 'eventbridge';
  const eventBus = options.eventBus ?? 'default';
  const template = options.detailType ?? '{{ topic }}';
  const issues: ConfigIssue[] = [];
  if (options.source === '' || /^aws\./i.test(options.source)) {
    issues.push({
      path: `destinations.${name}.source`,
      message: 'must be a non-empty event source that does not start with "aws." (reserved by AWS)',
    });
  }
  if (issues.length > 0) throw new ConfigError(issues);
  const aws = lazySdkClient(
    () => import('@aws-sdk/client-eventbridge'),
    ({ EventBridgeClient }) => new EventBridgeClient(sdkClientConfig(options, regionOfArn(eventBus))),
    options.client,
  );

  return createBatchPublisher<PutEventsRequestEntry>({
    name,
    service: 'EventBridge',
    maxEntries: EVENTBRIDGE_MAX_BATCH_ENTRIES,
    maxBatchBytes: EVENTBRIDGE_MAX_ENTRY_BYTES,
    maxConcurrentRequests: options.maxConcurrentRequests ?? 8,
    prepare(message: OutgoingMessage) {
      const payload = message.payload;
      if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
        const kind = payload === null ? 'null' : Array.isArray(payload) ? 'an array' : `a ${typeof payload}`;
        return {
          dead: `the payload is ${kind}; EventBridge destination "${name}" needs a JSON object as the event's Detail`,
        };
      }
      const detailType = renderTemplate(template, { topic: message.topic, key: message.key });
      if (detailType === '') {
        return { dead: `the detailType template of "${name}" rendered an empty DetailType` };
      }
      const detail = JSON.stringify(payload);
      const bytes = utf8Length(options.source) + utf8Length(detailType) + utf8Length(detail);
      if (bytes > EVENTBRIDGE_MAX_ENTRY_BYTES) {
        return {
          dead: `the event is ${bytes} bytes (Source + DetailType + Detail); EventBridge destination "${name}" accepts at most ${EVENTBRIDGE_MAX_ENTRY_BYTES} bytes per event, so it can never be sent`,
        };
      }
      return {
        bytes,
        build: () => ({
          EventBusName: eventBus,
          Source: options.source,
          DetailType: detailType,
          Detail: detail,
        }),
      };
    },
    async send(entries) {
      const {
        sdk: { PutEventsCommand },
        client: events,
      } = await aws.get();
      const answer = await events.send(new PutEventsCommand({ Entries: entries.map((e) => e.entry) }));
      // PutEvents answers by position: the n-th result belongs to the n-th entry.
      const results = new Map<string, EntryResult>();
      entries.forEach((entry, index) => {
        const result = answer.Entries?.[index];
        if (result === undefined) return;
        results.set(entry.id, result.ErrorCode ? eventBridgeEntryResult(result) : { ok: true });
      });
      return results;
    },
    classify: (error) => ({
      retryable: !isPermanentAwsError(error, PERMANENT_REQUEST_CODES),
      error: describeAwsError(error),
    }),
    async close() {
      await aws.close();
    },
  });
}
