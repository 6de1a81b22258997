import { createHash } from 'node:crypto';
import type { ConfigIssue, JsonPath, JsonValue } from '@queuebox/core';
import {
  CONFIG_DEFAULTS,
  isRawJsonNumber,
  isStorableText,
  parseJsonPath,
  QueueBoxError,
  readJsonPath,
} from '@queuebox/core';
import type { SchemeDefaults } from './auth/types.ts';
import type { FieldLocation, KeyLocation, SourceOptions } from './options.ts';

/** The fields a source extracts from each message. */
export type FieldName = 'idempotencyKey' | 'eventType' | 'aggregateId' | 'correlationId';

const FIELD_LABELS: Readonly<Record<FieldName, string>> = {
  idempotencyKey: 'idempotency key',
  eventType: 'event type',
  aggregateId: 'aggregate id',
  correlationId: 'correlation id',
};

/** A value could not be extracted as the source configures it. */
export class ExtractionError extends QueueBoxError {
  readonly field: FieldName;
  /** `missing`: no value found (only raised for required fields); `not_scalar`: found, but not a string or number. */
  readonly problem: 'missing' | 'not_scalar' | 'too_long' | 'unstorable';

  constructor(
    field: FieldName,
    problem: 'missing' | 'not_scalar' | 'too_long' | 'unstorable',
    message: string,
  ) {
    super(message, { context: { field, problem } });
    this.field = field;
    this.problem = problem;
  }
}

/** A compiled location: a parsed JSON path, a lower-cased header name, or the hash of the raw body. */
export type CompiledLocation =
  | { readonly path: JsonPath; readonly label: string }
  | { readonly header: string; readonly label: string }
  | { readonly bodyHash: true; readonly label: string };

/** Parses a configured location; throws JsonPathSyntaxError for a bad path. */
export function compileLocation(location: KeyLocation): CompiledLocation {
  if ('bodyHash' in location) return { bodyHash: true, label: 'the SHA-256 of the body' };
  if ('path' in location) return { path: parseJsonPath(location.path), label: location.path };
  return { header: location.header.toLowerCase(), label: `header ${location.header}` };
}

/** The prefix of a key derived from the body: `sha256:` and the hex SHA-256 of the raw bytes. */
export const BODY_HASH_KEY_PREFIX = 'sha256:';

/** `sha256:` + the hex SHA-256 of `bytes`: the key of `idempotencyKey: { bodyHash: true }` and of broker fallbacks. */
export function bodyHashKey(bytes: Uint8Array | string): string {
  return `${BODY_HASH_KEY_PREFIX}${createHash('sha256').update(bytes).digest('hex')}`;
}

/** What a message offers the locations: the parsed payload, the headers (lower-cased names), the raw body. */
export interface MessageFields {
  readonly payload: JsonValue;
  readonly headers: Readonly<Record<string, string>>;
  /** The raw body, for `bodyHash`; without it that location holds nothing. */
  readonly body?: Uint8Array;
}

function valueAt(location: CompiledLocation, message: MessageFields): JsonValue | undefined {
  if ('path' in location) return readJsonPath(message.payload, location.path);
  if ('header' in location) return message.headers[location.header];
  return message.body === undefined ? undefined : bodyHashKey(message.body);
}

/** Longest value of each field, in characters: the widths of the inbox columns (same on both databases). */
export const MAX_FIELD_LENGTHS: Readonly<Record<FieldName, number>> = {
  idempotencyKey: 600,
  eventType: 400,
  aggregateId: 450,
  correlationId: 200,
};

/**
 * Reads one field: the first location (in order) that holds a value wins. Strings are kept, finite numbers become
 * their decimal text (a number kept as its source text by `parseJsonText`: that text); `null`, absent values and empty strings count as missing. Objects, arrays and booleans are
 * refused, and so are values longer than the field's column (MAX_FIELD_LENGTHS).
 * @returns the value, or null when no location holds one
 */
export function extractField(
  field: FieldName,
  locations: readonly CompiledLocation[],
  message: MessageFields,
): string | null {
  for (const location of locations) {
    const value = valueAt(location, message);
    if (value === undefined || value === null || value === '') continue;
    let text: string;
    if (typeof value === 'string') text = value;
    else if (isRawJsonNumber(value)) text = value.rawJSON;
    else if (typeof value === 'number' && Number.isFinite(value)) text = String(value);
    else {
      throw new ExtractionError(
        field,
        'not_scalar',
        `The ${FIELD_LABELS[field]} at ${location.label} must be a string or a number`,
      );
    }
    if (!isStorableText(text)) {
      throw new ExtractionError(
        field,
        'unstorable',
        `The ${FIELD_LABELS[field]} at ${location.label} holds U+0000 or an unpaired surrogate, which no store keeps`,
      );
    }
    const limit = MAX_FIELD_LENGTHS[field];
    if (text.length > limit) {
      throw new ExtractionError(
        field,
        'too_long',
        `The ${FIELD_LABELS[field]} at ${location.label} is longer than ${limit} characters`,
      );
    }
    return text;
  }
  return null;
}

/** How a source finds each field; compiled once per source. */
export interface ExtractionPlan {
  readonly idempotencyKey: readonly CompiledLocation[];
  readonly eventType: readonly CompiledLocation[];
  readonly aggregateId: readonly CompiledLocation[];
  readonly correlationId: readonly CompiledLocation[];
}

/** The fields of one message. */
export interface ExtractedFields {
  readonly idempotencyKey: string;
  readonly eventType: string | null;
  readonly aggregateId: string | null;
  readonly correlationId: string | null;
}

/** Extracts every field; the idempotency key is required (ExtractionError `missing` without it). */
export function extractFields(plan: ExtractionPlan, message: MessageFields): ExtractedFields {
  const idempotencyKey = extractField('idempotencyKey', plan.idempotencyKey, message);
  if (idempotencyKey === null) {
    const where = plan.idempotencyKey.map((l) => l.label).join(' or ');
    throw new ExtractionError('idempotencyKey', 'missing', `The message has no idempotency key (${where})`);
  }
  return {
    idempotencyKey,
    eventType: extractField('eventType', plan.eventType, message),
    aggregateId: extractField('aggregateId', plan.aggregateId, message),
    correlationId: extractField('correlationId', plan.correlationId, message),
  };
}

/**
 * How `source` finds each field (throws JsonPathSyntaxError for a bad path):
 * - idempotency key: `idempotencyKey`, else the scheme's natural key, else the `Idempotency-Key` header;
 * - event type: `eventTypePath`, else `eventTypeFromHeader` (a header name, or `true` for the scheme's event header
 *   or else `X-Event-Type`), else the scheme's natural event type, else none;
 * - aggregate id: `aggregateIdPath`, else `aggregateIdHeader`, else none;
 * - correlation id: `correlationIdPath`, else the `correlationIdHeader` header (default `X-Correlation-Id`).
 */
export function planExtraction(source: SourceOptions, defaults: SchemeDefaults = {}): ExtractionPlan {
  const idempotencyKey: readonly KeyLocation[] = source.idempotencyKey
    ? [source.idempotencyKey]
    : (defaults.idempotencyKey ?? [{ header: CONFIG_DEFAULTS.source.idempotencyKeyHeader }]);
  const schemeEventType: readonly FieldLocation[] =
    defaults.eventType === undefined
      ? []
      : Array.isArray(defaults.eventType)
        ? (defaults.eventType as readonly FieldLocation[])
        : [defaults.eventType as FieldLocation];
  let eventType: readonly FieldLocation[];
  if (source.eventTypePath !== undefined) eventType = [{ path: source.eventTypePath }];
  else if (typeof source.eventTypeFromHeader === 'string')
    eventType = [{ header: source.eventTypeFromHeader }];
  else if (source.eventTypeFromHeader === true) {
    const headers = schemeEventType.filter((location) => 'header' in location);
    eventType = headers.length > 0 ? headers : [{ header: CONFIG_DEFAULTS.source.eventTypeHeader }];
  } else eventType = schemeEventType;
  let aggregateId: FieldLocation | undefined;
  if (source.aggregateIdPath !== undefined) aggregateId = { path: source.aggregateIdPath };
  else if (source.aggregateIdHeader !== undefined) aggregateId = { header: source.aggregateIdHeader };
  const correlationId: FieldLocation =
    source.correlationIdPath !== undefined
      ? { path: source.correlationIdPath }
      : { header: source.correlationIdHeader ?? CONFIG_DEFAULTS.source.correlationIdHeader };
  return {
    idempotencyKey: idempotencyKey.map(compileLocation),
    eventType: eventType.map(compileLocation),
    aggregateId: aggregateId ? [compileLocation(aggregateId)] : [],
    correlationId: [compileLocation(correlationId)],
  };
}

/**
 * `planExtraction` for the source at `at` (`sources.<name>`), collecting a bad JSON path as a configuration issue
 * instead of throwing, so a service reports every problem at once. Undefined when the plan failed.
 */
export function planSourceExtraction(
  source: SourceOptions,
  defaults: SchemeDefaults | undefined,
  at: string,
  issues: ConfigIssue[],
): ExtractionPlan | undefined {
  try {
    return planExtraction(source, defaults);
  } catch (error) {
    issues.push({ path: at, message: (error as Error).message });
    return undefined;
  }
}
