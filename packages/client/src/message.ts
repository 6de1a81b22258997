/**
 * What `enqueue` accepts and how it is checked before any statement is built: the limits are those of the 0001
 * schema (topic VARCHAR/NVARCHAR(400), key (450), max_attempts INT > 0), and a payload must survive
 * JSON.stringify unchanged in meaning.
 */
import type { Headers, NewOutboxMessage } from '@queuebox/core';
import { CONFIG_DEFAULTS, describeValue, unstorableText } from '@queuebox/core';
import { InvalidMessageError, type MessageIssue } from './errors.ts';

/** Longest topic, in UTF-16 code units (what NVARCHAR counts; never more than PostgreSQL's characters). */
export const MAX_TOPIC_LENGTH = 400;

/** Longest key, in UTF-16 code units. */
export const MAX_KEY_LENGTH = 450;

/** Attempts before a row goes dead, when neither the message nor the options say. */
export const DEFAULT_MAX_ATTEMPTS: number = CONFIG_DEFAULTS.outbox.maxAttempts;

/** Largest max_attempts (the column is a 32-bit INT). */
export const MAX_MAX_ATTEMPTS = 2_147_483_647;

/** Longest first-attempt delay, about 68 years (SQL Server's DATEADD takes whole seconds in an INT). */
export const MAX_DELAY_MS = 2_147_483_647_000;

/**
 * Deepest nesting of arrays and objects in a payload: the inbox's limit for a stored payload (@queuebox/inbox's
 * MAX_JSON_DEPTH). Far deeper payloads only exhaust the stack of whatever serialises them next (JSON.stringify
 * fails a few thousand levels down, PostgreSQL's jsonb parser a few thousand further).
 */
export const MAX_PAYLOAD_DEPTH = 256;

/** Whether `text` holds a control character (U+0000–U+001F, U+007F): never part of a header name any transport sends. */
function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i += 1) {
    const code = text.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
}

/** CR or LF: a header value holding one would break into a header line of its own. */
const LINE_BREAK = /[\r\n]/;

/** A message as an application hands it to `enqueue`. */
export interface EnqueueMessage {
  /** Routed against the route patterns; 1 to 400 characters. */
  readonly topic: string;
  /**
   * Rows of one key are delivered in insert (= commit) order, one at a time; up to 450 characters. `null` or
   * absent: unordered. An empty string is refused (use `null`).
   */
  readonly key?: string | null | undefined;
  /**
   * Any JSON value: null, booleans, finite numbers, strings, arrays and plain objects (objects with `toJSON`,
   * such as Date, are stored as what `toJSON` answers). Object properties that are `undefined` are left out, as
   * JSON.stringify does. Refused: `undefined` itself, NaN and ±Infinity, BigInt, functions, symbols, Map, Set and
   * other objects that JSON would turn into `{}`, circular references, strings or property names with the
   * character U+0000 or an unpaired UTF-16 surrogate (PostgreSQL cannot store either: core's `unstorableText`),
   * nesting deeper than {@link MAX_PAYLOAD_DEPTH} levels, and values whose getter, `toJSON` or proxy throws.
   */
  readonly payload: unknown;
  /**
   * A JSON object of string values. Default `{}`. Refused: an empty name, a name with a control character (CR,
   * LF, NUL, tab, …) and a value with CR or LF — no destination could send them. (An HTTP destination leaves out
   * a header whose name is not an HTTP token, and percent-encodes a value that is not plain Latin-1.)
   */
  readonly headers?: Headers | undefined;
  /** Attempts before the row goes dead: a whole number ≥ 1. Default: `options.maxAttempts`, else 10. */
  readonly maxAttempts?: number | undefined;
  /**
   * Delay before the first attempt, in milliseconds, on the database clock. Default 0. With a `key`, the delay
   * holds back every later message of that key too until this one is due and delivered: the rows of a key go out
   * strictly in order.
   */
  readonly delayMs?: number | undefined;
}

const FIELDS = ['topic', 'key', 'payload', 'headers', 'maxAttempts', 'delayMs'] as const;

/** Objects that JSON.stringify turns into `{}` (or worse) without complaint: refused rather than stored empty. */
const LOSSY_OBJECTS: readonly [string, abstract new (...args: never[]) => unknown][] = [
  ['a Map', Map],
  ['a Set', Set],
  ['a WeakMap', WeakMap],
  ['a WeakSet', WeakSet],
  ['a Promise', Promise],
  ['a RegExp', RegExp],
  ['an Error', Error],
];

/** What a string holds that no store keeps (core's `unstorableText`, the rule the inbox applies too), or undefined. */
function unstorable(text: string): string | undefined {
  const problem = unstorableText(text);
  if (problem === undefined) return undefined;
  return problem === 'nul' ? 'U+0000' : 'an unpaired UTF-16 surrogate';
}

/** What a thrown value says, without letting a hostile `message` getter or `toString` throw again. */
function thrownText(error: unknown): string {
  try {
    return error instanceof Error ? String(error.message) : String(error);
  } catch {
    return 'an unprintable error';
  }
}

/** One step of the walk of `jsonIssues`. */
type Step =
  /** Check `value` at `path`; `name` is what JSON.stringify would hand its `toJSON`; `depth`: containers above. */
  | { readonly value: unknown; readonly path: string; readonly name: string; readonly depth: number }
  /** Every child of `object` has been checked: it is no longer on the way down. */
  | { readonly leave: object };

/**
 * Problems of `value` as a JSON value at `path`, in document order. Walks with a stack of its own instead of
 * recursing, so no nesting overflows the call stack; nesting deeper than {@link MAX_PAYLOAD_DEPTH} is a problem of
 * its own (JSON.stringify and the database would fail on it later, or overflow). `ancestors` holds the objects on
 * the way down, to find cycles. A getter, `toJSON` or proxy trap that throws is a problem at its path.
 */
function jsonIssues(value: unknown, path: string, issues: MessageIssue[]): void {
  const ancestors = new Set<object>();
  const stack: Step[] = [{ value, path, name: '', depth: 0 }];
  for (let step = stack.pop(); step !== undefined; step = stack.pop()) {
    if ('leave' in step) {
      ancestors.delete(step.leave);
      continue;
    }
    try {
      visit(step);
    } catch (error) {
      issues.push({ path: step.path, message: `could not be read: ${thrownText(error)}` });
    }
  }

  function visit({ value, path, name, depth }: Extract<Step, { value: unknown }>): void {
    switch (typeof value) {
      case 'string': {
        const problem = unstorable(value);
        if (problem)
          issues.push({ path, message: `contains ${problem}, which PostgreSQL jsonb cannot store` });
        return;
      }
      case 'boolean':
        return;
      case 'number':
        if (!Number.isFinite(value)) issues.push({ path, message: `${value} is not a JSON number` });
        return;
      case 'undefined':
        issues.push({ path, message: 'is undefined, which is not JSON (use null)' });
        return;
      case 'bigint':
        issues.push({ path, message: 'is a BigInt, which is not JSON (convert it to a string)' });
        return;
      case 'function':
      case 'symbol':
        issues.push({ path, message: `is a ${typeof value}, which is not JSON` });
        return;
    }
    if (value === null) return;
    const object = value as object;
    if (ancestors.has(object)) {
      issues.push({ path, message: 'is a circular reference' });
      return;
    }
    const toJSON = (object as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') {
      let replaced: unknown;
      try {
        replaced = toJSON.call(object, name);
      } catch (error) {
        issues.push({ path, message: `toJSON() threw: ${thrownText(error)}` });
        return;
      }
      // What toJSON answers stands where the object stood, at the same depth.
      ancestors.add(object);
      stack.push({ leave: object }, { value: replaced, path, name, depth });
      return;
    }
    for (const [name, type] of LOSSY_OBJECTS) {
      if (object instanceof type) {
        issues.push({ path, message: `is ${name}, which JSON would store as {} (convert it first)` });
        return;
      }
    }
    if (depth >= MAX_PAYLOAD_DEPTH) {
      issues.push({ path, message: `nests deeper than ${MAX_PAYLOAD_DEPTH} levels of arrays and objects` });
      return;
    }
    // Children are read first (a getter may throw), then stacked in reverse so they are checked in order.
    const children: Step[] = [];
    if (Array.isArray(object)) {
      for (let index = 0; index < object.length; index += 1)
        children.push({
          value: object[index],
          path: `${path}[${index}]`,
          name: String(index),
          depth: depth + 1,
        });
    } else {
      for (const [property, item] of Object.entries(object)) {
        if (item === undefined) continue;
        const problem = unstorable(property);
        if (problem)
          issues.push({
            path,
            message: `has a property name with ${problem}, which PostgreSQL jsonb cannot store`,
          });
        children.push({ value: item, path: `${path}.${property}`, name: property, depth: depth + 1 });
      }
    }
    ancestors.add(object);
    stack.push({ leave: object });
    for (let i = children.length - 1; i >= 0; i -= 1) stack.push(children[i] as Step);
  }
}

function textIssues(value: string, path: string, max: number, issues: MessageIssue[]): void {
  if (value.length > max)
    issues.push({ path, message: `is ${value.length} characters long; at most ${max} fit the column` });
  const problem = unstorable(value);
  if (problem) issues.push({ path, message: `contains ${problem}, which PostgreSQL cannot store` });
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function maxAttemptsIssues(value: unknown, path: string, issues: MessageIssue[]): void {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_MAX_ATTEMPTS) {
    issues.push({
      path,
      message: `must be a whole number from 1 to ${MAX_MAX_ATTEMPTS} (got ${describeValue(value)})`,
    });
  }
}

/**
 * The problems of one header. Refused: names that no destination could send — empty, or holding a control
 * character (CR, LF, NUL, tab, …) — and values holding CR or LF, which would break into a header line of their
 * own. A name that is not an HTTP token (a space, a colon, non-ASCII) is kept: brokers carry it, and an HTTP
 * destination leaves such a header out. The path of an odd name is written as a JSON string (`headers["x\r\n"]`).
 */
function headerIssues(name: string, value: unknown, at: string, issues: MessageIssue[]): void {
  const odd = name.length === 0 || hasControlCharacter(name) || unstorable(name) !== undefined;
  const path = odd ? `${at}[${JSON.stringify(name)}]` : `${at}.${name}`;
  const nameProblem = unstorable(name);
  if (name.length === 0) issues.push({ path, message: 'is an empty header name' });
  else if (hasControlCharacter(name))
    issues.push({
      path,
      message:
        'is not a header name any destination can send: it contains a control character (CR, LF, NUL, …)',
    });
  else if (nameProblem)
    issues.push({ path, message: `contains ${nameProblem}, which PostgreSQL jsonb cannot store` });
  if (typeof value !== 'string') {
    issues.push({ path, message: `must be a string (got ${describeValue(value)})` });
    return;
  }
  const problem = unstorable(value);
  if (problem) issues.push({ path, message: `contains ${problem}, which PostgreSQL jsonb cannot store` });
  else if (LINE_BREAK.test(value))
    issues.push({ path, message: 'contains a line break (CR or LF); a header value is one line' });
}

/** The problems of one message; a message whose fields throw when read is one problem at the message's path. */
function messageIssues(message: unknown, prefix: string, issues: MessageIssue[]): void {
  try {
    fieldIssues(message, prefix, issues);
  } catch (error) {
    issues.push({ path: prefix || 'message', message: `could not be read: ${thrownText(error)}` });
  }
}

function fieldIssues(message: unknown, prefix: string, issues: MessageIssue[]): void {
  const at = (field: string) => (prefix ? `${prefix}.${field}` : field);
  if (!isPlainObject(message)) {
    issues.push({ path: prefix || 'message', message: `must be an object (got ${describeValue(message)})` });
    return;
  }
  for (const field of Object.keys(message)) {
    if (!(FIELDS as readonly string[]).includes(field)) {
      issues.push({
        path: at(field),
        message: `is not a field of an outbox message (fields: ${FIELDS.join(', ')})`,
      });
    }
  }
  const { topic, key, payload, headers, maxAttempts, delayMs } = message;
  if (typeof topic !== 'string' || topic.length === 0) {
    issues.push({ path: at('topic'), message: `must be a non-empty string (got ${describeValue(topic)})` });
  } else {
    textIssues(topic, at('topic'), MAX_TOPIC_LENGTH, issues);
  }
  if (key !== undefined && key !== null) {
    if (typeof key !== 'string') {
      issues.push({ path: at('key'), message: `must be a string or null (got ${describeValue(key)})` });
    } else if (key.length === 0) {
      issues.push({
        path: at('key'),
        message: 'is empty; use null (or leave it out) for an unordered message',
      });
    } else {
      textIssues(key, at('key'), MAX_KEY_LENGTH, issues);
    }
  }
  if (!('payload' in message)) issues.push({ path: at('payload'), message: 'is required' });
  else jsonIssues(payload, at('payload'), issues);
  if (headers !== undefined) {
    if (!isPlainObject(headers)) {
      issues.push({
        path: at('headers'),
        message: `must be an object of string values (got ${describeValue(headers)})`,
      });
    } else {
      for (const [name, value] of Object.entries(headers)) {
        headerIssues(name, value, at('headers'), issues);
      }
    }
  }
  if (maxAttempts !== undefined) maxAttemptsIssues(maxAttempts, at('maxAttempts'), issues);
  if (delayMs !== undefined) {
    if (typeof delayMs !== 'number' || !Number.isFinite(delayMs) || delayMs < 0 || delayMs > MAX_DELAY_MS) {
      issues.push({
        path: at('delayMs'),
        message: `must be a number of milliseconds from 0 to ${MAX_DELAY_MS} (got ${describeValue(delayMs)})`,
      });
    }
  }
}

/** Defaults that apply to every message of one call. */
export interface MessageDefaults {
  /** Default 10. */
  readonly maxAttempts?: number | undefined;
}

/**
 * Checks `messages` and answers them as core's `NewOutboxMessage` (key `null` when absent, headers `{}`,
 * maxAttempts from the message, else `defaults.maxAttempts`, else 10; delay 0). Throws `InvalidMessageError`
 * with every problem; paths are prefixed with `[i]` when `indexed` (enqueueMany).
 */
export function toOutboxMessages(
  messages: readonly unknown[],
  defaults: MessageDefaults = {},
  indexed = false,
): NewOutboxMessage[] {
  const issues: MessageIssue[] = [];
  if (defaults.maxAttempts !== undefined)
    maxAttemptsIssues(defaults.maxAttempts, 'options.maxAttempts', issues);
  messages.forEach((message, index) => {
    messageIssues(message, indexed ? `[${index}]` : '', issues);
  });
  if (issues.length > 0) throw new InvalidMessageError(issues);
  const maxAttempts = defaults.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  return (messages as readonly EnqueueMessage[]).map((m) => ({
    topic: m.topic,
    key: m.key ?? null,
    // Checked above to be JSON; core types it as JsonValue.
    payload: m.payload as NewOutboxMessage['payload'],
    headers: { ...(m.headers ?? {}) },
    maxAttempts: m.maxAttempts ?? maxAttempts,
    delayMs: m.delayMs ?? 0,
  }));
}

/** The distinct keys of `messages`, sorted: every writer takes key locks in this one order, so none deadlock. */
export function distinctKeys(messages: readonly NewOutboxMessage[]): string[] {
  const keys = new Set<string>();
  for (const m of messages) if (typeof m.key === 'string') keys.add(m.key);
  return [...keys].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}
