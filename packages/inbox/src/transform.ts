import type { ConfigIssue, Headers, JsonValue } from '@queuebox/core';
import { CONFIG_DEFAULTS, ConfigError, isRawJsonNumber, isStorableText } from '@queuebox/core';
import {
  createJsonataEngine,
  describeError,
  type JsonataCompiler,
  type JsonataEngine,
  type JsonataExpression,
  loadJsonata,
  runTransformFunction,
  type TransformFunction as SharedTransformFunction,
  type TransformResult,
  TransformTimeoutError,
} from '@queuebox/transform';
import { MAX_JSON_DEPTH, unstorableJsonReason } from './body.ts';
import type { InboxOptions, SourceOptions, TransformOptions } from './options.ts';
import { DEFAULT_INBOX_TRANSFORM_TIMEOUT_MS } from './options.ts';

// One rejection class and helper for the inbox and the outbox, so a function rejects the same way on both sides.
export {
  type JsonataCompiler,
  type JsonataExpression,
  loadJsonata,
  reject,
  TransformRejectedError,
  type TransformResult,
  TransformTimeoutError,
} from '@queuebox/transform';

/** What a transform sees: the parsed payload, the headers that will be stored, and the extracted fields. */
export interface TransformInput {
  readonly source: string;
  readonly payload: JsonValue;
  readonly headers: Readonly<Headers>;
  readonly eventType: string | null;
  readonly idempotencyKey: string;
}

/** A compiled transform's answer: a new payload (and headers merged over the stored ones), or a rejection. */
export type TransformOutcome = TransformResult | { readonly reject: string };

/**
 * A source transform registered in code under a name (`transform: { function: name }`), the transform package's one
 * shape over the received message: it rejects by calling `reject(reason)` or throwing `TransformRejectedError`.
 * Any other error it throws is a bug: the ingestion answers 500 and the sender retries after the fix, since a 422
 * would be final. A broker redelivers instead, until the message has failed its source's `deadAfterFailures` times
 * over `deadAfterMs`, or reaches its broker's last delivery: then it is stored dead (see `createBrokerIngestion`).
 * What it answers must be `{ payload, headers? }` with a payload JSON holds exactly (see `runSourceTransform`);
 * anything else is a rejection. One still running at the source's time limit is a rejection too, and its
 * `context.signal` aborts; a function that never yields (a synchronous loop) cannot be interrupted and holds the
 * process until it returns.
 */
export type TransformFunction = SharedTransformFunction<TransformInput>;

/** Named transforms registered in code. */
export type TransformFunctions = Readonly<Record<string, TransformFunction>>;

/** A transform ready to run. */
export type CompiledTransform = (input: TransformInput) => Promise<TransformOutcome>;

/**
 * A transform still running at its time limit: thrown, not a rejection. The limit is wall-clock time, and a heavy
 * transform shares the process with every request in flight, so under load a message whose transform is fine alone
 * can run out (an outside review: 40 concurrent runs of a 71 ms expression all passed 1 s). Its HTTP sender is told
 * to try again (503 `transform_timeout`), and a broker redelivers it like any failure until `deadAfterFailures`; a
 * rejection would have been final for a message whose only fault was the load.
 */
function ranOutOfTime(timeoutMs: number): never {
  throw new TransformTimeoutError(timeoutMs);
}

/**
 * A JSONata transform. The expression is evaluated over the payload with the bindings `$headers`, `$source`,
 * `$eventType` and `$idempotencyKey`; its value becomes the new payload. It rejects the message when it calls
 * `$reject(reason)`, when it yields no value (undefined), when evaluation fails on this payload (a JSONata
 * runtime error means the message does not have the shape the expression expects), or when it runs past
 * `timeoutMs` (the engine's limit, which JSONata checks at every evaluation step).
 */
function jsonataTransform(
  engine: JsonataEngine,
  expression: JsonataExpression,
  timeoutMs: number,
): CompiledTransform {
  return async (input) => {
    const run = await engine.evaluate(expression, input.payload, {
      headers: input.headers,
      source: input.source,
      eventType: input.eventType,
      idempotencyKey: input.idempotencyKey,
    });
    if (run.ok) return { payload: run.value };
    if (run.kind === 'rejected') return { reject: run.reason };
    if (run.kind === 'empty') return { reject: 'the transform produced no payload' };
    if (run.kind === 'timeout') ranOutOfTime(timeoutMs);
    return { reject: `the transform failed: ${run.reason}` };
  };
}

function functionTransform(fn: TransformFunction, timeoutMs: number): CompiledTransform {
  return async (input) => {
    const run = await runTransformFunction(fn, input, { timeoutMs });
    if (run.ok) return run.value;
    if (run.kind === 'failed') throw run.error;
    if (run.kind === 'timeout') ranOutOfTime(timeoutMs);
    return { reject: run.reason };
  };
}

/** Dependencies of the transform compiler. */
export interface TransformDeps {
  /** Named transforms registered in code. Default none. */
  readonly functions?: TransformFunctions;
  /** JSONata compiler. Default: the `jsonata` package, loaded on first use. */
  readonly jsonata?: JsonataCompiler;
  /**
   * Time one run may take before it is a rejection: handed to JSONata, which checks it at every evaluation step, and
   * to `runTransformFunction`, as the outbox does. Default {@link DEFAULT_INBOX_TRANSFORM_TIMEOUT_MS} (1000 ms).
   */
  readonly timeoutMs?: number;
}

/**
 * Compiles `options` for the source at `path` (for messages). Throws ConfigError for an unknown function name
 * or an expression that does not compile.
 */
export async function compileTransform(
  options: TransformOptions,
  deps: TransformDeps,
  path: string,
): Promise<CompiledTransform> {
  const timeoutMs = deps.timeoutMs ?? DEFAULT_INBOX_TRANSFORM_TIMEOUT_MS;
  if ('function' in options) {
    const functions = deps.functions ?? {};
    const fn = Object.hasOwn(functions, options.function) ? functions[options.function] : undefined;
    if (fn === undefined) {
      throw new ConfigError([
        { path, message: `no transform function named ${JSON.stringify(options.function)} is registered` },
      ]);
    }
    return functionTransform(fn, timeoutMs);
  }
  const engine = createJsonataEngine({ compile: deps.jsonata ?? (await loadJsonata()), timeoutMs });
  let expression: JsonataExpression;
  try {
    expression = engine.parse(options.jsonata);
  } catch (error) {
    throw new ConfigError(
      [{ path, message: `the JSONata expression does not compile: ${describeError(error)}` }],
      { cause: error },
    );
  }
  return jsonataTransform(engine, expression, timeoutMs);
}

/**
 * Compiles the transform of the source at `at` (`sources.<name>`), or answers undefined when it has none. Its time
 * limit is the source's `transformTimeoutMs`, else `inbox.transformTimeoutMs`, else 1000 ms. An
 * unknown function name is also pushed onto `issues`, so the service refuses to start at once; any other compile
 * problem surfaces through the promise (the service's `ready()`, and each message of the source), never as an
 * unhandled rejection.
 */
export function compileSourceTransform(
  source: SourceOptions,
  deps: {
    readonly transforms?: TransformFunctions;
    readonly jsonata?: JsonataCompiler;
    readonly inbox?: InboxOptions;
  },
  at: string,
  issues: ConfigIssue[],
): Promise<CompiledTransform> | undefined {
  if (!source.transform) return undefined;
  const fn = 'function' in source.transform ? source.transform.function : undefined;
  if (fn !== undefined && !Object.hasOwn(deps.transforms ?? {}, fn)) {
    issues.push({ path: `${at}.transform`, message: `no transform function named ${JSON.stringify(fn)}` });
  }
  const timeoutMs = source.transformTimeoutMs ?? deps.inbox?.transformTimeoutMs;
  const transform = compileTransform(
    source.transform,
    {
      functions: deps.transforms,
      jsonata: deps.jsonata,
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
    },
    `${at}.transform`,
  );
  transform.catch(() => {});
  return transform;
}

/**
 * Why the headers a transform returned cannot be stored (a value that is not text, or text the database refuses:
 * U+0000, an unpaired surrogate), or undefined.
 */
function unstorableHeadersReason(headers: Readonly<Record<string, unknown>>): string | undefined {
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value !== 'string') return `its header ${JSON.stringify(name)} is not text`;
    if (!isStorableText(name) || !isStorableText(value)) {
      return `its header ${JSON.stringify(name)} holds a U+0000 character or an unpaired surrogate`;
    }
  }
  return undefined;
}

/** The reason of a result that cannot be stored as it is. */
function unusable(reason: string): string {
  return `the transform's result cannot be stored: ${reason}`;
}

/** The reason of a result larger than `maxBytes`: its `size` when it was measured, else only that it is larger. */
function tooLarge(maxBytes: number, size?: number): string {
  const takes = size === undefined ? 'more than' : `${size} bytes as JSON, more than`;
  return `the transform's result is too large: its payload takes ${takes} the ${maxBytes} bytes a source accepts (inbox.maxBodyBytes, or the size of the message received when larger)`;
}

/** What a value is, in a reason: its type, never the value itself (it may quote the message). */
function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

/**
 * Why a transform's answer is not `{ payload, headers? }` with headers a plain object, or undefined. A function's
 * answer is not checked by the type system at run time: `undefined`, `null`, text or `{}` failed the insert, or the
 * ingestion itself, on every retry (500) before.
 */
function resultShapeReason(result: unknown): string | undefined {
  if (result === null || typeof result !== 'object' || Array.isArray(result)) {
    return `it is not a { payload } object (${kindOf(result)})`;
  }
  const { payload, headers } = result as { payload?: unknown; headers?: unknown };
  if (payload === undefined) return 'it has no payload';
  if (headers !== undefined && (headers === null || typeof headers !== 'object' || Array.isArray(headers))) {
    return `its headers are not an object (${kindOf(headers)})`;
  }
  return undefined;
}

/**
 * Why `payload` is not a value JSON holds exactly, or why its JSON text would be larger than `maxBytes`, or
 * undefined. JSON.stringify would drop a symbol or a function, write NaN and Infinity as null, a Date as text, a Map
 * as `{}`, and throw on a BigInt; the payload would be stored changed, or not at all. Allowed: strings, finite
 * numbers, booleans, null, core's kept numbers (`JSON.rawJSON`), arrays without holes, and plain objects (prototype
 * Object.prototype or null), whose members that are undefined are left out as JSON leaves them out. The walk is
 * iterative and counts a lower bound of the text's size as it goes, so it stops early on a result far larger than
 * the limit (a value shared 2^40 times) rather than write it out; a cycle stops at {@link MAX_JSON_DEPTH}.
 */
function payloadReason(payload: unknown, maxBytes: number): string | undefined {
  let bytes = 0;
  const stack: { value: unknown; depth: number }[] = [{ value: payload, depth: 0 }];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const { value } = item;
    switch (typeof value) {
      case 'string':
        bytes += value.length + 2;
        break;
      case 'boolean':
        bytes += 4;
        break;
      case 'number':
        if (!Number.isFinite(value)) return unusable(`its payload holds ${value}, which JSON cannot hold`);
        bytes += 1;
        break;
      case 'bigint':
        return unusable('its payload holds a BigInt, which JSON cannot hold');
      case 'symbol':
      case 'function':
        return unusable(`its payload holds a ${typeof value}, which JSON cannot hold`);
      case 'undefined':
        return unusable('its payload holds undefined in an array, which JSON cannot hold');
      default: {
        if (value === null || isRawJsonNumber(value)) {
          bytes += 4;
          break;
        }
        const depth = item.depth + 1;
        if (depth > MAX_JSON_DEPTH) return unusable(`its payload nests deeper than ${MAX_JSON_DEPTH} levels`);
        bytes += 2;
        if (Array.isArray(value)) {
          bytes += value.length;
          if (bytes > maxBytes) break;
          for (let i = 0; i < value.length; i++) stack.push({ value: value[i], depth });
          break;
        }
        const prototype: unknown = Object.getPrototypeOf(value);
        if (prototype !== Object.prototype && prototype !== null) {
          const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
          const kind =
            typeof name === 'string' && name !== ''
              ? name
              : Object.prototype.toString.call(value).slice(8, -1);
          return unusable(
            `its payload holds an object of type ${kind}, which JSON cannot hold exactly (plain objects and arrays only)`,
          );
        }
        for (const [key, member] of Object.entries(value as object)) {
          if (member === undefined) continue;
          bytes += key.length + 4;
          stack.push({ value: member, depth });
        }
      }
    }
    if (bytes > maxBytes) return tooLarge(maxBytes);
  }
  return undefined;
}

/** Whether a compiled transform answered a rejection (`reject` with its reason). */
function isRejection(outcome: unknown): outcome is { readonly reject: string } {
  return (
    outcome !== null &&
    typeof outcome === 'object' &&
    typeof (outcome as { reject?: unknown }).reject === 'string'
  );
}

/** Limits of {@link runSourceTransform}. */
export interface SourceTransformLimits {
  /**
   * Largest payload a transform may answer, in bytes of its JSON text. Default `inbox.maxBodyBytes`'s default
   * (1048576); the ingestions pass `inbox.maxBodyBytes`, or the size of the received message when larger.
   */
  readonly maxPayloadBytes?: number;
}

/**
 * Runs a source's transform: its rejection, or the new payload with the transform's headers merged over
 * `input.headers` (names lower-cased, as the inbox stores them). These answers are rejections too, never failures
 * that a retry would meet again (500, or a broker's redelivery):
 *
 * - an answer that is not `{ payload, headers? }` (`undefined`, `null`, text, `{}`), or headers that are not an
 *   object;
 * - a payload JSON cannot hold exactly: a BigInt, a symbol, a function, NaN or ±Infinity, an object that is not
 *   plain (a Date, a Map, a class instance), a hole or undefined in an array (a member that is undefined is left out,
 *   as JSON leaves it out);
 * - a payload whose JSON text is larger than `limits.maxPayloadBytes` (a 60-byte request whose expression builds
 *   a 10 MB string stored it, past `inbox.maxBodyBytes`; a few million iterations more failed the insert on every
 *   retry);
 * - a result the database could not store (the checks the body passed before the transform: U+0000, unpaired
 *   surrogates, numbers beyond jsonb's range, nesting; and headers that are not storable text): stored as it is,
 *   its insert would fail on every delivery, and a broker would redeliver it for ever, blocking the messages
 *   behind it.
 */
export async function runSourceTransform(
  transform: CompiledTransform,
  input: TransformInput,
  limits: SourceTransformLimits = {},
): Promise<{ readonly payload: JsonValue; readonly headers: Headers } | { readonly reject: string }> {
  const outcome: unknown = await transform(input);
  if (isRejection(outcome)) return outcome;
  const maxBytes = limits.maxPayloadBytes ?? CONFIG_DEFAULTS.inbox.maxBodyBytes;
  const shape = resultShapeReason(outcome);
  if (shape !== undefined) return { reject: unusable(shape) };
  const result = outcome as TransformResult;
  const problem = payloadReason(result.payload, maxBytes);
  if (problem !== undefined) return { reject: problem };
  // The walk counted a lower bound; the text itself decides (escapes, multi-byte characters, digits).
  const size = Buffer.byteLength(JSON.stringify(result.payload));
  if (size > maxBytes) return { reject: tooLarge(maxBytes, size) };
  const unstorable =
    unstorableJsonReason(result.payload)?.replace(/^The body /, 'its payload ') ??
    unstorableHeadersReason(result.headers ?? {});
  if (unstorable !== undefined) return { reject: unusable(unstorable) };
  const headers: Headers = { ...input.headers };
  for (const [name, value] of Object.entries(result.headers ?? {})) headers[name.toLowerCase()] = value;
  return { payload: result.payload, headers };
}
