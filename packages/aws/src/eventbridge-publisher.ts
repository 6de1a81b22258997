import type { EventBridgeClient, PutEventsRequestEntry } from '@aws-sdk/client-eventbridge';
import type { ConfigIssue, OutgoingMessage, Publisher } from '@queuebox/core';
import { ConfigError, renderTemplate } from '@queuebox/core';
import { utf8Length } from './attributes.ts';
import { type AwsClientOptions, lazySdkClient, regionOfArn, sdkClientConfig } from './aws-client.ts';
import { describeAwsError, isPermanentAwsError } from './aws-errors.ts';
import { createBatchPublisher, type EntryResult } from './batch-publisher.ts';

/**
 * EventBridge's limit on the entries of one `PutEvents` (Source + DetailType + Detail, as EventBridge counts), which
 * they must stay below: the SDK (`@aws-sdk/client-eventbridge`, PutEvents) says "the total entry size must be less
 * than 1MB" (1,048,576 bytes, as its former "256KB" was 262,144).
 */
export const EVENTBRIDGE_ENTRIES_SIZE_LIMIT = 1_048_576;
/** The default `maxEventBytes`: the largest event (and request) below {@link EVENTBRIDGE_ENTRIES_SIZE_LIMIT}. */
export const EVENTBRIDGE_MAX_ENTRY_BYTES = EVENTBRIDGE_ENTRIES_SIZE_LIMIT - 1;
/** The longest `DetailType` (`PutEventsRequestEntry.DetailType`: "Maximum length of 128"), in characters. */
export const EVENTBRIDGE_MAX_DETAIL_TYPE_LENGTH = 128;
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
  /**
   * Largest event (Source + DetailType + Detail in UTF-8 bytes, as EventBridge counts), also the most bytes of one
   * request's events together; a larger row is answered `dead` without a request. Default 1048575: AWS wants the
   * entries "less than 1MB".
   */
  readonly maxEventBytes?: number;
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

/**
 * Per-entry error codes that say the entry itself can never be put. `PutEventsResultEntry.ErrorCode` lists as
 * non-retryable AccessDeniedException, InvalidAccountIdException, InvalidArgument, MalformedDetail,
 * RedactionFailure, NotAuthorizedForSourceException and NotAuthorizedForDetailTypeException; the three about
 * permissions retry here all the same: a policy can be fixed while the row waits (its attempts and backoff bound
 * the wait), the way a missing bus is. Throttling, internal failures and unknown codes retry.
 */
const PERMANENT_ENTRY_CODES: ReadonlySet<string> = new Set([
  'MalformedDetail',
  'InvalidArgument',
  'InvalidArgumentException',
  'InvalidAccountIdException',
  'RedactionFailure',
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
 * core's `Publisher` for an EventBridge bus, through `PutEvents` (10 entries, `maxEventBytes` per request).
 *
 * Each row: `Source` = `source`, `DetailType` = the `detailType` template, `Detail` = the JSON payload, which must
 * be a JSON object (EventBridge refuses anything else: such a row is answered `dead`), `EventBusName` = `eventBus`.
 * Headers are not sent: an event has no attributes (a transform can move them into the payload). An entry over
 * `maxEventBytes` (Source + DetailType + Detail, as EventBridge counts) or with an empty DetailType or one over 128
 * characters is answered `dead` unsent; per-entry results settle each row alone by position (an `EventId` →
 * sent; `MalformedDetail`, `InvalidArgument`, `InvalidAccountIdException`, `RedactionFailure` → dead; other codes,
 * and a result with neither an `EventId` nor an `ErrorCode` → retry). Throws `ConfigError` for a reserved or empty
 * `source` or a `maxEventBytes` that is not an integer from 1 to 1048575.
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
  const maxEventBytes = options.maxEventBytes ?? EVENTBRIDGE_MAX_ENTRY_BYTES;
  if (!Number.isInteger(maxEventBytes) || maxEventBytes < 1 || maxEventBytes > EVENTBRIDGE_MAX_ENTRY_BYTES) {
    issues.push({
      path: `destinations.${name}.maxEventBytes`,
      message: `must be an integer from 1 to ${EVENTBRIDGE_MAX_ENTRY_BYTES} (EventBridge wants the entries of a request "less than 1MB")`,
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
    maxBatchBytes: maxEventBytes,
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
      const detailTypeLength = [...detailType].length;
      if (detailTypeLength > EVENTBRIDGE_MAX_DETAIL_TYPE_LENGTH) {
        return {
          dead: `the detailType template of "${name}" rendered a DetailType of ${detailTypeLength} characters; EventBridge accepts at most ${EVENTBRIDGE_MAX_DETAIL_TYPE_LENGTH}, so it can never be sent`,
        };
      }
      const detail = JSON.stringify(payload);
      const bytes = utf8Length(options.source) + utf8Length(detailType) + utf8Length(detail);
      if (bytes > maxEventBytes) {
        return {
          dead: `the event is ${bytes} bytes (Source + DetailType + Detail); EventBridge destination "${name}" accepts at most ${maxEventBytes} bytes per event, so it can never be sent`,
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
    async send(entries, signal) {
      const {
        sdk: { PutEventsCommand },
        client: events,
      } = await aws.get();
      const answer = await events.send(new PutEventsCommand({ Entries: entries.map((e) => e.entry) }), {
        abortSignal: signal,
      });
      // PutEvents answers by position: the n-th result belongs to the n-th entry.
      const results = new Map<string, EntryResult>();
      entries.forEach((entry, index) => {
        const result = answer.Entries?.[index];
        if (result === undefined) return;
        if (result.ErrorCode) results.set(entry.id, eventBridgeEntryResult(result));
        // Only an EventId says the event was put; a result with neither is no answer (→ retry).
        else if (result.EventId) results.set(entry.id, { ok: true });
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
