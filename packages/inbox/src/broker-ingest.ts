import { randomUUID } from 'node:crypto';
import type {
  BrokerIngestionPort,
  BrokerIngestResult,
  BrokerMessage,
  Clock,
  ConfigIssue,
  JsonValue,
  NewInboxMessage,
} from '@queuebox/core';
import {
  BASE64_HEADER_PREFIX,
  CONFIG_DEFAULTS,
  ConfigError,
  isStorableText,
  isStoreError,
  isStoreUnavailable,
  isValueRefused,
  QueueBoxError,
  storableHeaderText,
  systemClock,
} from '@queuebox/core';
import { describeError } from '@queuebox/transform';
import { parseJsonBody } from './body.ts';
import type { CompiledLocation, ExtractionPlan, FieldName, MessageFields } from './extract.ts';
import {
  BODY_HASH_KEY_PREFIX,
  bodyHashKey,
  ExtractionError,
  extractField,
  MAX_FIELD_LENGTHS,
  planSourceExtraction,
} from './extract.ts';

export { BODY_HASH_KEY_PREFIX };

import { keptHeaders, storableHeaders } from './headers.ts';
import type { SourceIngestionDeps } from './ingest.ts';
import type { SourceOptions } from './options.ts';
import { inboxMaxAttempts, sourceMode } from './options.ts';
import type { PoisonLimits } from './poison.ts';
import { createFailureTracker, failureKey, poisonLimits } from './poison.ts';
import type { CompiledTransform } from './transform.ts';
import { compileSourceTransform, runSourceTransform } from './transform.ts';

/** Dependencies of the broker ingestion; only `type: amqp | kafka | nats | sqs` sources are served. */
export interface BrokerIngestionDeps extends SourceIngestionDeps {
  /** Times the failures of a message (see `deadAfterMs`). Default the system clock. */
  readonly clock?: Clock;
}

/** The broker ingestion: one `ingest` per received message; the broker adapters see it as core's BrokerIngestionPort. */
export interface BrokerIngestion extends BrokerIngestionPort {
  /**
   * Stores one message of a broker source, or a dead row when it cannot become a pending one. Resolves only once
   * the row is committed, so the caller acknowledges the delivery after it resolves, and never when it rejects.
   * Rejects with core's `StoreUnavailableError` when the database is unreachable (requeue / do not commit the
   * offset / nak), with `UnknownBrokerSourceError` for a source that is not configured, and with any other failure
   * (a transform function that throws, a value the database refuses) until that message has failed the source's
   * `deadAfterFailures` times over `deadAfterMs`: then it resolves with a dead row holding the failure.
   */
  ingest(sourceName: string, message: BrokerMessage): Promise<BrokerIngestResult>;
  /** Resolves when every transform compiled; rejects with ConfigError otherwise. Call it at start-up to fail fast. */
  ready(): Promise<void>;
  /** The names of the broker sources served. */
  readonly sources: readonly string[];
}

/** `ingest` was called with a name that is no configured broker source. */
export class UnknownBrokerSourceError extends QueueBoxError {}

/** The header that `eventTypeFromHeader: true` reads on a broker source (for AMQP the `type` property wins). */
export const BROKER_EVENT_TYPE_HEADER = 'type';

interface BrokerRoute {
  readonly name: string;
  readonly source: SourceOptions;
  readonly plan: ExtractionPlan;
  readonly keep: ReadonlySet<string> | undefined;
  readonly transform: Promise<CompiledTransform> | undefined;
  readonly maxAttempts: number;
  readonly poison: PoisonLimits;
}

/**
 * A key that fits the idempotency-key column: longer transport ids, and ids no store can keep (U+0000, unpaired
 * surrogates), are replaced by their hash.
 */
function fitKey(key: string): string {
  return key.length <= MAX_FIELD_LENGTHS.idempotencyKey && isStorableText(key) ? key : bodyHashKey(key);
}

/**
 * The key used when the source's configured location gives none: the transport's message id, else the adapter's
 * default key (Kafka `topic:partition:offset@timestamp`, NATS `stream:sequence@stored`), else a fresh
 * `random:<uuid>`. Only an AMQP message published without a `message-id` gets the last one: nothing in it tells a
 * redelivery from a second publish of the same bytes, so each delivery is a message of its own (at least once: a
 * redelivery after the row was stored but before the broker heard the ack is stored again) rather than a second
 * publish of the same bytes being dropped as a duplicate.
 */
export function fallbackIdempotencyKey(message: BrokerMessage): string {
  if (message.messageId) return fitKey(message.messageId);
  if (message.defaultIdempotencyKey) return fitKey(message.defaultIdempotencyKey);
  return `random:${randomUUID()}`;
}

/**
 * Header names lower-cased; names that differ only in case keep the last value. A name or value no store can keep
 * (U+0000, an unpaired surrogate) becomes `base64:` + the base64 of its UTF-8 bytes (core's `storableHeaderText`),
 * so one poison header never fails the message, nor the batch it came in. A name a source already wrote as
 * `base64:` + base64 (its bytes were not UTF-8) keeps its case: base64 is case-sensitive, and lower-cased, the names
 * of the bytes 78 FF (`eP8=`) and 7A 9F (`ep8=`) were one, and one value was lost (outside encodings audit).
 */
function lowerCaseHeaders(headers: Readonly<Record<string, string>>): Record<string, string> {
  const lowered: Record<string, string> = Object.create(null);
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value !== 'string') continue;
    const key = name.startsWith(BASE64_HEADER_PREFIX) ? name : name.toLowerCase();
    lowered[storableHeaderText(key)] = storableHeaderText(value);
  }
  return lowered;
}

/**
 * What a dead row of a body that is not JSON keeps of it (the payload column holds JSON): the text as a JSON
 * string when the bytes are UTF-8 without NUL characters (PostgreSQL's jsonb refuses `\u0000`), else
 * `{ "base64": "…" }`. The row is the only copy of the message (no dead-letter exchange), so nothing is dropped.
 */
export function undecodableBodyPayload(body: Uint8Array, text: string | null): JsonValue {
  if (text !== null && !text.includes('\u0000')) return text;
  return base64Payload(body);
}

function base64Payload(body: Uint8Array): JsonValue {
  return { base64: Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('base64') };
}

/** Longest error text a dead row's reason quotes. */
const MAX_ERROR_TEXT = 1000;

function errorText(error: unknown): string {
  const text = describeError(error);
  return text.length <= MAX_ERROR_TEXT ? text : `${text.slice(0, MAX_ERROR_TEXT)}…`;
}

function compileRoutes(deps: BrokerIngestionDeps): {
  routes: Map<string, BrokerRoute>;
  issues: ConfigIssue[];
} {
  const routes = new Map<string, BrokerRoute>();
  const issues: ConfigIssue[] = [];
  for (const [name, source] of Object.entries(deps.sources)) {
    if (source.type === 'http') continue;
    const at = `sources.${name}`;
    // `true` means the `type` header here (for AMQP the `type` property, see ingest), not HTTP's X-Event-Type;
    // no idempotency default: the transport's id takes over, see fallbackIdempotencyKey.
    const planned: SourceOptions =
      source.eventTypeFromHeader === true
        ? { ...source, eventTypeFromHeader: BROKER_EVENT_TYPE_HEADER }
        : source;
    const plan = planSourceExtraction(planned, { idempotencyKey: [] }, at, issues);
    if (plan === undefined) continue;
    const transform = compileSourceTransform(source, deps, at, issues);
    routes.set(name, {
      name,
      source,
      plan,
      keep: keptHeaders(source),
      transform,
      maxAttempts: inboxMaxAttempts(source, deps.inbox, deps.outbox),
      poison: poisonLimits(source),
    });
  }
  return { routes, issues };
}

/** Reads an optional field; a value of the wrong kind or length is a reason for a dead row. */
function optionalField(
  field: FieldName,
  locations: readonly CompiledLocation[],
  message: MessageFields,
): { value: string | null } | { problem: string } {
  try {
    return { value: extractField(field, locations, message) };
  } catch (error) {
    if (error instanceof ExtractionError) return { problem: error.message };
    throw error;
  }
}

/**
 * Creates the ingestion of broker sources (`type: amqp | kafka | nats | sqs`), shared by the Lambda event adapters and
 * the long-lived consumers of the local runtime. For each message, in order (the seed's "path of an inbox
 * message" and "Inbox states"):
 *
 * 1. Headers: names lower-cased; hop-by-hop names and credentials (`authorization`, `cookie`, …) are not stored.
 * 2. Body: UTF-8 JSON. Anything else → a **dead** row: payload = the body text as a JSON string, or
 *    `{ "base64": … }` when it is not UTF-8 text (see `undecodableBodyPayload`).
 * 3. Idempotency key: the configured `idempotencyKey` (`path` or `header`); when it is not configured, or the
 *    message holds none there, the transport's message id, else the adapter's default key (Kafka
 *    `topic:partition:offset@timestamp`, NATS `stream:sequence@stored`), else a fresh `random:<uuid>`
 *    (`fallbackIdempotencyKey`) — a broker message cannot be refused like an HTTP request, and a dead row needs a
 *    key too.
 * 4. Event type: `eventTypePath`, or `eventTypeFromHeader` (a header name; `true` = the AMQP `type` property, else
 *    the `type` header). Aggregate id: `aggregateIdPath` / `aggregateIdHeader`. Correlation id:
 *    `correlationIdPath`, else the `correlationIdHeader` header (default `X-Correlation-Id`), else the
 *    transport's correlation id. A configured value that is not a string or number, or too long for its column →
 *    a dead row saying so.
 * 5. Transform (before the duplicate check): a rejection → a **dead** row with the original payload and the reason.
 *    A transform whose result JSON cannot hold exactly, or is larger than both `inbox.maxBodyBytes` and the
 *    message, is a rejection too.
 * 6. Store: a new pending row, or `duplicate` for a known (source, key). A dead row is written by one
 *    `storeDead` statement (one transaction); a repeat of it is a `duplicate`.
 * 7. A failure other than a database outage (a transform function that throws rather than rejects, a transform
 *    still running at its time limit, `transformTimeoutMs`, which load beside it may have caused, a value the
 *    database refuses) rejects, so the adapter tries the message again, until the message has failed the source's
 *    `deadAfterFailures` times (default 10) and its first failure is `deadAfterMs` old (default 5 minutes): that try
 *    stores it as a **dead** row with the original payload and the last failure, so one message no try can store
 *    holds up no other (a Kafka partition, a queue's prefetch, a NATS consumer). Should the database refuse that
 *    row too, the body is kept as `{ "base64": … }`. Failures are counted per process (see `FailureTracker`). A
 *    message the broker says it delivers for the last time (`lastDelivery`: a JetStream `max_deliver` reached) is
 *    stored dead at its first such failure, since the broker would drop it unstored.
 *
 * The caller acknowledges the broker delivery only after `ingest` resolved. Throws ConfigError when a source's
 * JSON paths or transform function name are unusable.
 */
export function createBrokerIngestion(deps: BrokerIngestionDeps): BrokerIngestion {
  const { routes, issues } = compileRoutes(deps);
  if (issues.length > 0) throw new ConfigError(issues);
  const relayEnabled = deps.inbox?.relay?.enabled ?? true;
  const maxBodyBytes = deps.inbox?.maxBodyBytes ?? CONFIG_DEFAULTS.inbox.maxBodyBytes;
  const clock = deps.clock ?? systemClock;
  const failures = createFailureTracker();

  async function ingest(sourceName: string, message: BrokerMessage): Promise<BrokerIngestResult> {
    const route = routes.get(sourceName);
    if (route === undefined) {
      throw new UnknownBrokerSourceError(`No broker source is named ${JSON.stringify(sourceName)}`, {
        context: { source: sourceName },
      });
    }
    const received = lowerCaseHeaders(message.headers);
    let headers = storableHeaders(received, [], route.keep);
    // Extraction sees the transport's properties too; only application headers are stored.
    const lookup: Record<string, string> = { ...received };
    if (route.source.eventTypeFromHeader === true && message.type)
      lookup[BROKER_EVENT_TYPE_HEADER] = message.type;

    const base = {
      source: route.name,
      headers,
      maxAttempts: route.maxAttempts,
    };
    const dead = async (
      payload: JsonValue,
      idempotencyKey: string,
      reason: string,
      fields: Partial<Pick<NewInboxMessage, 'eventType' | 'aggregateId' | 'correlationId'>> = {},
    ): Promise<BrokerIngestResult> => {
      const result = await deps.store.storeDead({ ...base, ...fields, idempotencyKey, payload }, reason);
      return result.status === 'stored'
        ? { status: 'dead', id: result.id, reason, wakeRelay: false }
        : { status: 'duplicate', id: result.id, wakeRelay: false };
    };

    const parsed = parseJsonBody(message.body);
    // Paths read nothing from a body that does not parse (payload null); header locations still work there.
    const problems: string[] = [];
    const read = (field: FieldName, locations: readonly CompiledLocation[]): string | null => {
      const outcome = optionalField(field, locations, {
        payload: parsed.ok ? parsed.payload : null,
        headers: lookup,
        body: message.body,
      });
      if ('problem' in outcome) {
        problems.push(outcome.problem);
        return null;
      }
      return outcome.value;
    };
    const idempotencyKey =
      read('idempotencyKey', route.plan.idempotencyKey) ?? fallbackIdempotencyKey(message);
    const eventType = read('eventType', route.plan.eventType);
    const aggregateId = read('aggregateId', route.plan.aggregateId);
    const correlationId =
      read('correlationId', route.plan.correlationId) ??
      (message.correlationId &&
      message.correlationId.length <= MAX_FIELD_LENGTHS.correlationId &&
      isStorableText(message.correlationId)
        ? message.correlationId
        : null);
    const fields = { eventType, aggregateId, correlationId };

    const store = async (): Promise<BrokerIngestResult> => {
      if (!parsed.ok) {
        const stored = undecodableBodyPayload(message.body, parsed.text);
        const as = typeof stored === 'string' ? 'stored as text' : 'stored as base64';
        return dead(stored, idempotencyKey, `${parsed.reason} (${as})`, fields);
      }
      let payload = parsed.payload;
      if (problems.length > 0) return dead(payload, idempotencyKey, problems.join('; '), fields);

      if (route.transform) {
        const input = { source: route.name, payload, headers, eventType, idempotencyKey };
        // A broker message may be larger than inbox.maxBodyBytes (an HTTP body's limit); its result may be as large.
        const maxPayloadBytes = Math.max(maxBodyBytes, message.body.byteLength);
        const outcome = await runSourceTransform(await route.transform, input, { maxPayloadBytes });
        if ('reject' in outcome) {
          return dead(
            payload,
            idempotencyKey,
            `The transform rejected the message: ${outcome.reject}`,
            fields,
          );
        }
        ({ payload, headers } = outcome);
      }

      const result = await deps.store.store({ ...base, ...fields, headers, idempotencyKey, payload });
      if (result.status === 'duplicate') return { status: 'duplicate', id: result.id, wakeRelay: false };
      return {
        status: 'stored',
        id: result.id,
        wakeRelay: sourceMode(route.source) === 'push' && relayEnabled,
      };
    };

    const key = () => failureKey(route.name, idempotencyKey, message.body);
    try {
      const result = await store();
      if (failures.size > 0) failures.forget(key());
      return result;
    } catch (error) {
      // An outage is no fault of the message: the adapter holds it, or gives it back, and tries again.
      if (isStoreUnavailable(error)) throw error;
      // Nor is a statement the database refused for the moment rather than for this row's values (a lock or
      // statement timeout, a deadlock, a full disk, a read-only server): not counted, unless the broker will not
      // deliver the message again.
      const momentary = isStoreError(error) && !isValueRefused(error);
      if (momentary && message.lastDelivery !== true) throw error;
      const record = momentary
        ? { count: 1, firstAt: clock.now(), exhausted: false }
        : failures.fail(key(), clock.now(), route.poison);
      if (!record.exhausted && message.lastDelivery !== true) throw error;
      const last = record.exhausted ? '' : ", at the broker's last delivery of it";
      const times = record.count === 1 ? 'once' : `${record.count} times`;
      const reason = `The ingestion failed ${times} since ${new Date(record.firstAt).toISOString()} (not a database outage${last}), last with: ${errorText(error)}`;
      const original = parsed.ok ? parsed.payload : undecodableBodyPayload(message.body, parsed.text);
      let result: BrokerIngestResult;
      try {
        result = await dead(original, idempotencyKey, reason, fields);
      } catch (refused) {
        // Only a refusal of the row's values makes the base64 copy worth storing; anything else is tried again.
        if (!isValueRefused(refused)) throw refused;
        // The database refused the row itself: keep what surely fits, the body's bytes as base64.
        result = await dead(
          base64Payload(message.body),
          idempotencyKey,
          `${reason}; the message is kept as base64, as the database refused it: ${errorText(refused)}`,
        );
      }
      if (failures.size > 0) failures.forget(key());
      return result;
    }
  }

  return {
    ingest,
    async ready() {
      await Promise.all([...routes.values()].map((r) => r.transform));
    },
    sources: [...routes.keys()],
  };
}
