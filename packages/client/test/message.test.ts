/** Message checks and defaults: pure, no database. */
import { describe, expect, it } from 'vitest';
// The inbox's limit for a stored payload (body.ts is not part of @queuebox/inbox's exports).
import { MAX_JSON_DEPTH } from '../../inbox/src/body.ts';
import { InvalidMessageError } from '../src/errors.ts';
import { distinctKeys, type EnqueueMessage, MAX_PAYLOAD_DEPTH, toOutboxMessages } from '../src/message.ts';

const aMessage = (overrides: Record<string, unknown> = {}): EnqueueMessage =>
  ({ topic: 'orders.created', payload: { order: 1 }, ...overrides }) as EnqueueMessage;

/** The issues `toOutboxMessages` raises for `message`, as `path: message` lines. */
function issuesOf(message: unknown, defaults = {}): string[] {
  try {
    toOutboxMessages([message], defaults);
  } catch (error) {
    if (error instanceof InvalidMessageError) return error.issues.map((i) => `${i.path}: ${i.message}`);
    throw error;
  }
  return [];
}

describe('toOutboxMessages defaults', () => {
  it('fills key null, headers {}, maxAttempts 10, delay 0', () => {
    // Act
    const [row] = toOutboxMessages([aMessage()]);
    // Assess
    expect(row).toEqual({
      topic: 'orders.created',
      key: null,
      payload: { order: 1 },
      headers: {},
      maxAttempts: 10,
      delayMs: 0,
    });
  });

  it('takes maxAttempts from the message, else from the defaults', () => {
    const rows = toOutboxMessages([aMessage({ maxAttempts: 2 }), aMessage()], { maxAttempts: 7 });
    expect(rows.map((r) => r.maxAttempts)).toEqual([2, 7]);
  });

  it('accepts every JSON value and what toJSON makes JSON; undefined properties are left out as JSON does', () => {
    const payloads = [
      null,
      true,
      0,
      -1.5,
      '',
      'text',
      [],
      [1, 'a', null],
      'paired \u{1F600}',
      { a: { b: [{}] } },
      new Date(0),
    ];
    for (const payload of payloads) expect(issuesOf(aMessage({ payload }))).toEqual([]);
    expect(issuesOf(aMessage({ payload: { kept: 1, dropped: undefined } }))).toEqual([]);
    expect(issuesOf(aMessage({ payload: Object.create(null) }))).toEqual([]);
  });

  it('accepts the longest topic and key, and an explicit null key', () => {
    expect(issuesOf(aMessage({ topic: 't'.repeat(400), key: 'k'.repeat(450) }))).toEqual([]);
    expect(issuesOf(aMessage({ key: null }))).toEqual([]);
  });
});

describe('toOutboxMessages refusals', () => {
  it.each([
    [{ topic: '' }, 'topic: must be a non-empty string (got an empty string)'],
    [{ topic: undefined }, 'topic: must be a non-empty string (got undefined)'],
    [{ topic: 't'.repeat(401) }, 'topic: is 401 characters long; at most 400 fit the column'],
    [{ key: 'k'.repeat(451) }, 'key: is 451 characters long; at most 450 fit the column'],
    [{ key: '' }, 'key: is empty; use null (or leave it out) for an unordered message'],
    [{ key: 7 }, 'key: must be a string or null (got 7)'],
    [{ key: 'a\u0000b' }, 'key: contains U+0000, which PostgreSQL cannot store'],
    [{ key: 'a\uD800b' }, 'key: contains an unpaired UTF-16 surrogate, which PostgreSQL cannot store'],
    [{ topic: 'a.\uDC00' }, 'topic: contains an unpaired UTF-16 surrogate, which PostgreSQL cannot store'],
    [{ maxAttempts: 0 }, 'maxAttempts: must be a whole number from 1 to 2147483647 (got 0)'],
    [{ maxAttempts: 1.5 }, 'maxAttempts: must be a whole number from 1 to 2147483647 (got 1.5)'],
    [{ maxAttempts: '5' }, 'maxAttempts: must be a whole number from 1 to 2147483647 (got the string "5")'],
    [
      { delayMs: '10' },
      'delayMs: must be a number of milliseconds from 0 to 2147483647000 (got the string "10")',
    ],
    [{ delayMs: -1 }, 'delayMs: must be a number of milliseconds from 0 to 2147483647000 (got -1)'],
    [
      { delayMs: Number.POSITIVE_INFINITY },
      'delayMs: must be a number of milliseconds from 0 to 2147483647000 (got Infinity)',
    ],
    [{ headers: ['a'] }, 'headers: must be an object of string values (got an array of 1 item)'],
    [{ headers: new Map([['a', 'b']]) }, 'headers: must be an object of string values (got a Map)'],
    [{ headers: new Headers({ a: 'b' }) }, 'headers: must be an object of string values (got a Headers)'],
    [{ headers: { retries: 3 } }, 'headers.retries: must be a string (got 3)'],
    [{ headers: { a: null } }, 'headers.a: must be a string (got null)'],
    [
      { topics: 'x' },
      'topics: is not a field of an outbox message (fields: topic, key, payload, headers, maxAttempts, delayMs)',
    ],
  ])('refuses %j', (overrides, issue) => {
    expect(issuesOf(aMessage(overrides))).toEqual([issue]);
  });

  it.each([
    [undefined, 'payload: is undefined, which is not JSON (use null)'],
    [Number.NaN, 'payload: NaN is not a JSON number'],
    [{ total: 10n }, 'payload.total: is a BigInt, which is not JSON (convert it to a string)'],
    [{ f: () => 1 }, 'payload.f: is a function, which is not JSON'],
    [[1, undefined], 'payload[1]: is undefined, which is not JSON (use null)'],
    [{ tags: new Set(['a']) }, 'payload.tags: is a Set, which JSON would store as {} (convert it first)'],
    [new Map(), 'payload: is a Map, which JSON would store as {} (convert it first)'],
    [{ text: 'a\u0000' }, 'payload.text: contains U+0000, which PostgreSQL jsonb cannot store'],
    // The rule the inbox applies to a webhook body (core's unstorableText): jsonb refuses a lone surrogate's escape.
    [
      { text: 'a\uD800' },
      'payload.text: contains an unpaired UTF-16 surrogate, which PostgreSQL jsonb cannot store',
    ],
    [['\uDC00x'], 'payload[0]: contains an unpaired UTF-16 surrogate, which PostgreSQL jsonb cannot store'],
    [
      { 'k\uD83D': 1 },
      'payload: has a property name with an unpaired UTF-16 surrogate, which PostgreSQL jsonb cannot store',
    ],
    [{ bad: { toJSON: () => Number.NaN } }, 'payload.bad: NaN is not a JSON number'],
  ])('refuses the payload %s', (payload, issue) => {
    expect(issuesOf(aMessage({ payload }))).toEqual([issue]);
  });

  it('refuses a missing payload, a circular one, and a toJSON that throws', () => {
    expect(issuesOf({ topic: 't' })).toEqual(['payload: is required']);
    const loop: Record<string, unknown> = { a: 1 };
    loop.self = loop;
    expect(issuesOf(aMessage({ payload: loop }))).toEqual(['payload.self: is a circular reference']);
    const throwing = {
      toJSON() {
        throw new Error('no');
      },
    };
    expect(issuesOf(aMessage({ payload: throwing }))).toEqual(['payload: toJSON() threw: no']);
  });

  it('accepts the same object twice when it is not a cycle', () => {
    const shared = { a: 1 };
    expect(issuesOf(aMessage({ payload: { x: shared, y: shared } }))).toEqual([]);
  });

  it('refuses a message that is not an object, and bad defaults', () => {
    class Order {
      topic = 'orders.created';
      payload = {};
    }
    expect(issuesOf('orders.created')).toEqual([
      'message: must be an object (got the string "orders.created")',
    ]);
    expect(issuesOf(new Order())).toEqual(['message: must be an object (got an Order)']);
    expect(issuesOf(new Map())).toEqual(['message: must be an object (got a Map)']);
    expect(issuesOf(aMessage(), { maxAttempts: -1 })).toEqual([
      'options.maxAttempts: must be a whole number from 1 to 2147483647 (got -1)',
    ]);
  });

  it('lists every problem of every message, prefixed with its index, without payload values in the text', () => {
    // Prepare
    const messages = [aMessage(), aMessage({ topic: '', payload: { secret: 'sk_live_123', n: Number.NaN } })];
    // Act
    let error: unknown;
    try {
      toOutboxMessages(messages, {}, true);
    } catch (e) {
      error = e;
    }
    // Assess
    expect(error).toBeInstanceOf(InvalidMessageError);
    const { issues, message } = error as InvalidMessageError;
    expect(issues.map((i) => i.path)).toEqual(['[1].topic', '[1].payload.n']);
    expect(message).toMatch(/^Invalid outbox message \(2 problems\):/);
    expect(message).not.toContain('sk_live_123');
  });
});

describe('toOutboxMessages on hostile payloads and headers', () => {
  /** `depth` arrays (or objects `{ a: … }`) nested around the number 1. */
  function nested(depth: number, kind: 'array' | 'object'): unknown {
    let value: unknown = 1;
    for (let i = 0; i < depth; i += 1) value = kind === 'array' ? [value] : { a: value };
    return value;
  }

  it.each([
    ['array', 3_000],
    ['object', 3_000],
    ['array', 50_000],
  ] as const)(
    'refuses a payload of %s nested %i levels with InvalidMessageError, not a stack overflow',
    (kind, depth) => {
      let error: unknown;
      try {
        toOutboxMessages([aMessage({ payload: nested(depth, kind) })]);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(InvalidMessageError);
      expect((error as InvalidMessageError).issues).toHaveLength(1);
      expect((error as InvalidMessageError).issues[0]?.message).toBe(
        `nests deeper than ${MAX_PAYLOAD_DEPTH} levels of arrays and objects`,
      );
    },
  );

  it('accepts a payload nested exactly MAX_PAYLOAD_DEPTH levels, the inbox limit', () => {
    expect(MAX_PAYLOAD_DEPTH).toBe(MAX_JSON_DEPTH);
    expect(issuesOf(aMessage({ payload: nested(MAX_PAYLOAD_DEPTH, 'array') }))).toEqual([]);
    expect(issuesOf(aMessage({ payload: nested(MAX_PAYLOAD_DEPTH + 1, 'object') }))).toHaveLength(1);
  });

  it('refuses a payload whose getter throws, naming where', () => {
    const getter = Object.defineProperty({}, 'boom', {
      enumerable: true,
      get() {
        throw new Error('getter boom');
      },
    });
    expect(issuesOf(aMessage({ payload: { order: { lines: [getter] } } }))).toEqual([
      'payload.order.lines[0]: could not be read: getter boom',
    ]);
  });

  it('refuses a message whose own fields throw when read', () => {
    const message = Object.defineProperty({ payload: 1 }, 'topic', {
      enumerable: true,
      get() {
        throw new Error('no topic today');
      },
    });
    expect(issuesOf(message)).toEqual(['message: could not be read: no topic today']);
  });

  it.each([
    [{ '': 'v' }, 'headers[""]: is an empty header name'],
    [
      { 'x-a\r\nInjected': 'v' },
      'headers["x-a\\r\\nInjected"]: is not a header name any destination can send: it contains a control character (CR, LF, NUL, …)',
    ],
    [
      { 'x\u0000': 'v' },
      'headers["x\\u0000"]: is not a header name any destination can send: it contains a control character (CR, LF, NUL, …)',
    ],
    [
      { 'x\ty': 'v' },
      'headers["x\\ty"]: is not a header name any destination can send: it contains a control character (CR, LF, NUL, …)',
    ],
    [
      { 'x-a': 'v\r\nInjected: 1' },
      'headers.x-a: contains a line break (CR or LF); a header value is one line',
    ],
    [{ 'x-a': 'v\n' }, 'headers.x-a: contains a line break (CR or LF); a header value is one line'],
  ])('refuses the headers %j', (headers, issue) => {
    expect(issuesOf(aMessage({ headers }))).toEqual([issue]);
  });

  it('accepts header names and values a destination can carry', () => {
    const headers = { 'x-tenant': 't1', 'X-Trace_Id.v2': 'a\tb', 'x-text': 'héllo 😀 \u2028' };
    expect(issuesOf(aMessage({ headers }))).toEqual([]);
  });
});

describe('distinctKeys', () => {
  it('answers each key once, sorted, without null keys', () => {
    const rows = toOutboxMessages([
      aMessage({ key: 'b' }),
      aMessage(),
      aMessage({ key: 'a' }),
      aMessage({ key: 'b' }),
      aMessage({ key: 'B' }),
    ]);
    expect(distinctKeys(rows)).toEqual(['B', 'a', 'b']);
  });
});
