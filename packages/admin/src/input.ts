/**
 * Reading and checking what an operator sends: states by their literal, ids, cursors, limits, ages and JSON
 * bodies. Every refusal is an `HttpError` 400 with a stable code; nothing here touches the store.
 */
import {
  ADMIN_LIST_MAX_LIMIT,
  ADMIN_MAX_BATCH_SIZE,
  HttpError,
  isStorableText,
  type MessageState,
  STATE_LITERALS,
  type StoredState,
  type Table,
} from '@queuebox/core';

/** Default rows of a list page. */
export const DEFAULT_LIST_LIMIT = 50;

/** Default rows of one purge batch (the `retention.batchSize` default). */
export const DEFAULT_PURGE_BATCH_SIZE = 1000;

/** Most ids one requeue request may name. */
export const MAX_REQUEUE_IDS = 1000;

/** Longest topic or source an operator may filter on (the width of the topic column). */
const MAX_NAME_LENGTH = 400;

/** A bigint identity as text, as the stores hand them out. */
const ROW_ID = /^[1-9][0-9]{0,18}$/;
const MAX_BIGINT = 9223372036854775807n;

/** The word an operator uses for rows whose state literal this version does not know. */
export const FAILED_WORD = 'failed';

/** A 400 with a stable code. */
export function badRequest(code: string, message: string): HttpError {
  return new HttpError(400, code, message);
}

/** Whether `value` can name a row (a positive 64-bit integer in decimal). */
export function isRowId(value: unknown): value is string {
  return typeof value === 'string' && ROW_ID.test(value) && BigInt(value) <= MAX_BIGINT;
}

/** The words `?state=` accepts for `table`: its literals and `failed`. */
export function stateWords(table: Table): string[] {
  return [...Object.values(STATE_LITERALS[table]), FAILED_WORD];
}

/**
 * The state a word names on `table`: the table's literal (`pending`, `processing`, `sent` / `processed`, `dead`)
 * or `failed` (rows with a literal this version does not know). Case does not matter. Throws 400 `invalid_state`.
 */
export function parseState(table: Table, word: string): MessageState {
  const lower = word.trim().toLowerCase();
  if (lower === FAILED_WORD) return 'Failed';
  const literals = STATE_LITERALS[table];
  for (const state of Object.keys(literals) as StoredState[]) {
    if (literals[state] === lower) return state;
  }
  throw badRequest('invalid_state', `state must be one of ${stateWords(table).join(', ')}`);
}

/** The word for `state` on `table`: its literal, or `failed`. */
export function stateWord(table: Table, state: MessageState): string {
  return state === 'Failed' ? FAILED_WORD : STATE_LITERALS[table][state];
}

/**
 * The state a purge deletes: `sent` or `processed` (either word, on either table: finished rows) or `dead`.
 * Throws 400 `invalid_state`.
 */
export function parsePurgeState(word: unknown): 'Sent' | 'Dead' {
  const lower = typeof word === 'string' ? word.trim().toLowerCase() : '';
  if (lower === 'sent' || lower === 'processed') return 'Sent';
  if (lower === 'dead') return 'Dead';
  throw badRequest('invalid_state', 'A purge deletes rows in state sent (processed on the inbox) or dead');
}

/** A table name. Throws 400 `invalid_table`. */
export function parseTable(word: unknown): Table {
  if (word === 'outbox' || word === 'inbox') return word;
  throw badRequest('invalid_table', 'table must be outbox or inbox');
}

/** A row id from a path or a body. Throws 400 `invalid_id`. */
export function parseRowId(value: unknown): string {
  if (isRowId(value)) return value;
  throw badRequest('invalid_id', 'A row id is a positive whole number');
}

/** A list cursor (the `nextCursor` of a previous page). Throws 400 `invalid_cursor`. */
export function parseCursor(value: string): string {
  if (isRowId(value)) return value;
  throw badRequest('invalid_cursor', 'cursor must be the nextCursor of a previous page');
}

/** A page size, 1…`ADMIN_LIST_MAX_LIMIT` (500). Throws 400 `invalid_limit`. */
export function parseLimit(value: string): number {
  const n = /^[0-9]{1,6}$/.test(value) ? Number(value) : Number.NaN;
  if (n >= 1 && n <= ADMIN_LIST_MAX_LIMIT) return n;
  throw badRequest('invalid_limit', `limit must be a whole number from 1 to ${ADMIN_LIST_MAX_LIMIT}`);
}

/**
 * A topic or source name to filter on. Throws 400 `invalid_<what>`, also for a text no store can hold (U+0000, an
 * unpaired surrogate): PostgreSQL refuses it as a parameter, which was a 500 and, on AWS, an AdminFailures alarm.
 */
export function parseName(what: 'topic' | 'source', value: unknown): string {
  if (typeof value === 'string' && value.length > 0 && value.length <= MAX_NAME_LENGTH) {
    if (isStorableText(value)) return value;
    throw badRequest(`invalid_${what}`, `${what} must not hold U+0000 or an unpaired surrogate`);
  }
  throw badRequest(`invalid_${what}`, `${what} must be a text of 1 to ${MAX_NAME_LENGTH} characters`);
}

/** A batch size, 1…`ADMIN_MAX_BATCH_SIZE` (10,000). Throws 400 `invalid_batch_size`. */
export function parseBatchSize(value: unknown): number {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= ADMIN_MAX_BATCH_SIZE) {
    return value;
  }
  throw badRequest(
    'invalid_batch_size',
    `batchSize must be a whole number from 1 to ${ADMIN_MAX_BATCH_SIZE}`,
  );
}

/**
 * The youngest rows a purge deletes: one hour. A slip such as `olderThanMs: 0` would otherwise delete dead rows an
 * operator is still reading (a dead inbox row is the only copy of its message). Retention's own ages are hours.
 */
export const PURGE_MIN_AGE_MS = 3_600_000;

/**
 * The oldest age a purge takes: 100 years (36,500 days), the longest retention the configuration allows. A purge
 * deletes rows older than now() − age, which must stay a timestamp the database can hold: an age of millions of days
 * failed in the database (`timestamp out of range`, a 500) instead of being refused here.
 */
export const PURGE_MAX_AGE_MS = 36_500 * 86_400_000;

/** A purge age in milliseconds, from PURGE_MIN_AGE_MS to PURGE_MAX_AGE_MS. Throws 400 `invalid_age`. */
export function parseAgeMs(value: unknown): number {
  if (
    typeof value === 'number' &&
    Number.isInteger(value) &&
    value >= PURGE_MIN_AGE_MS &&
    value <= PURGE_MAX_AGE_MS
  ) {
    return value;
  }
  throw badRequest(
    'invalid_age',
    `olderThanMs must be a whole number of milliseconds from ${PURGE_MIN_AGE_MS} (one hour) to ${PURGE_MAX_AGE_MS} (100 years)`,
  );
}

/** A list of row ids, 1…`MAX_REQUEUE_IDS`. Throws 400 `invalid_ids`. */
export function parseIds(value: unknown): string[] {
  if (Array.isArray(value) && value.length >= 1 && value.length <= MAX_REQUEUE_IDS && value.every(isRowId)) {
    return [...new Set(value)];
  }
  throw badRequest('invalid_ids', `ids must be a list of 1 to ${MAX_REQUEUE_IDS} row ids`);
}

/** Whether `value` is a plain JSON object. */
function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The JSON object of a request body: bytes or text are parsed, an empty body is `{}`. Throws 400 `invalid_json`
 * for text that is not JSON and `invalid_body` for JSON that is not an object or names a field not in `allowed`.
 */
export function parseBody(
  body: Uint8Array | string | null | undefined,
  allowed: readonly string[],
): Record<string, unknown> {
  const text = typeof body === 'string' ? body : body ? new TextDecoder().decode(body) : '';
  if (text.trim() === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw badRequest('invalid_json', 'The body is not JSON');
  }
  if (!isObject(parsed)) throw badRequest('invalid_body', 'The body must be a JSON object');
  const unknown = Object.keys(parsed).filter((key) => !allowed.includes(key));
  if (unknown.length > 0) {
    throw badRequest(
      'invalid_body',
      `Unknown field ${unknown.map((k) => JSON.stringify(k)).join(', ')}; allowed: ${allowed.join(', ') || 'none'}`,
    );
  }
  return parsed;
}

/** `dryRun` of a body: absent is false. Throws 400 `invalid_dry_run`. */
export function parseDryRun(value: unknown): boolean {
  if (value === undefined) return false;
  if (typeof value === 'boolean') return value;
  throw badRequest('invalid_dry_run', 'dryRun must be true or false');
}

/**
 * Query parameters as single strings; empty values count as absent. Throws 400 `unknown_parameter` for a name
 * not in `allowed` and `invalid_parameter` for a name given more than once.
 */
export function singleQuery(
  query: Readonly<Record<string, string | readonly string[] | undefined>>,
  allowed: readonly string[],
): Record<string, string> {
  const single: Record<string, string> = {};
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined) continue;
    if (!allowed.includes(name)) {
      throw badRequest(
        'unknown_parameter',
        `Unknown query parameter ${JSON.stringify(name)}; allowed: ${allowed.join(', ') || 'none'}`,
      );
    }
    if (typeof value !== 'string') throw badRequest('invalid_parameter', `${name} may be given once`);
    // `?state=&topic=x` leaves state out, as a form with an empty field means.
    if (value !== '') single[name] = value;
  }
  return single;
}

/**
 * Refuses every query parameter of a POST: a POST reads its input from its JSON body only, so a parameter in the
 * query (`?dryRun=true`) would otherwise be ignored and the request run as if it were absent. Throws 400
 * `unknown_parameter` naming the first one; one that is a field of the route's body (`bodyFields`) is said to go
 * there.
 */
export function refuseQuery(
  query: Readonly<Record<string, string | readonly string[] | undefined>>,
  bodyFields: readonly string[],
): void {
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined) continue;
    const quoted = JSON.stringify(name);
    throw badRequest(
      'unknown_parameter',
      bodyFields.includes(name)
        ? `Query parameter ${quoted} is not read: ${name} belongs in the JSON body${name === 'dryRun' ? ', e.g. {"dryRun":true}' : ''}`
        : `Unknown query parameter ${quoted}: a POST takes no query parameters, its input is the JSON body (fields: ${bodyFields.join(', ') || 'none'})`,
    );
  }
}
