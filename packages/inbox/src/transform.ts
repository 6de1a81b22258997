import type { ConfigIssue, Headers, JsonValue } from '@queuebox/core';
import { ConfigError, isStorableText } from '@queuebox/core';
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
} from '@queuebox/transform';
import { unstorableJsonReason } from './body.ts';
import type { SourceOptions, TransformOptions } from './options.ts';

// One rejection class and helper for the inbox and the outbox, so a function rejects the same way on both sides.
export {
  type JsonataCompiler,
  type JsonataExpression,
  loadJsonata,
  reject,
  TransformRejectedError,
  type TransformResult,
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
 */
export type TransformFunction = SharedTransformFunction<TransformInput>;

/** Named transforms registered in code. */
export type TransformFunctions = Readonly<Record<string, TransformFunction>>;

/** A transform ready to run. */
export type CompiledTransform = (input: TransformInput) => Promise<TransformOutcome>;

/**
 * A JSONata transform. The expression is evaluated over the payload with the bindings `$headers`, `$source`,
 * `$eventType` and `$idempotencyKey`; its value becomes the new payload. It rejects the message when it calls
 * `$reject(reason)`, when it yields no value (undefined), or when evaluation fails on this payload (a JSONata
 * runtime error means the message does not have the shape the expression expects). No time limit applies here.
 */
function jsonataTransform(engine: JsonataEngine, expression: JsonataExpression): CompiledTransform {
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
    return { reject: `the transform failed: ${run.reason}` };
  };
}

function functionTransform(fn: TransformFunction): CompiledTransform {
  return async (input) => {
    const run = await runTransformFunction(fn, input);
    if (run.ok) return run.value;
    if (run.kind === 'failed') throw run.error;
    return { reject: run.reason };
  };
}

/** Dependencies of the transform compiler. */
export interface TransformDeps {
  /** Named transforms registered in code. Default none. */
  readonly functions?: TransformFunctions;
  /** JSONata compiler. Default: the `jsonata` package, loaded on first use. */
  readonly jsonata?: JsonataCompiler;
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
  if ('function' in options) {
    const functions = deps.functions ?? {};
    const fn = Object.hasOwn(functions, options.function) ? functions[options.function] : undefined;
    if (fn === undefined) {
      throw new ConfigError([
        { path, message: `no transform function named ${JSON.stringify(options.function)} is registered` },
      ]);
    }
    return functionTransform(fn);
  }
  const engine = createJsonataEngine({ compile: deps.jsonata ?? (await loadJsonata()) });
  let expression: JsonataExpression;
  try {
    expression = engine.parse(options.jsonata);
  } catch (error) {
    throw new ConfigError(
      [{ path, message: `the JSONata expression does not compile: ${describeError(error)}` }],
      { cause: error },
    );
  }
  return jsonataTransform(engine, expression);
}

/**
 * Compiles the transform of the source at `at` (`sources.<name>`), or answers undefined when it has none. An
 * unknown function name is also pushed onto `issues`, so the service refuses to start at once; any other compile
 * problem surfaces through the promise (the service's `ready()`, and each message of the source), never as an
 * unhandled rejection.
 */
export function compileSourceTransform(
  source: SourceOptions,
  deps: { readonly transforms?: TransformFunctions; readonly jsonata?: JsonataCompiler },
  at: string,
  issues: ConfigIssue[],
): Promise<CompiledTransform> | undefined {
  if (!source.transform) return undefined;
  const fn = 'function' in source.transform ? source.transform.function : undefined;
  if (fn !== undefined && !Object.hasOwn(deps.transforms ?? {}, fn)) {
    issues.push({ path: `${at}.transform`, message: `no transform function named ${JSON.stringify(fn)}` });
  }
  const transform = compileTransform(
    source.transform,
    { functions: deps.transforms, jsonata: deps.jsonata },
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

/**
 * Runs a source's transform: its rejection, or the new payload with the transform's headers merged over
 * `input.headers` (names lower-cased, as the inbox stores them). A result the database could not store (the checks
 * the body passed before the transform: U+0000, unpaired surrogates, numbers beyond jsonb's range, nesting; and
 * headers that are not storable text) is a rejection too: stored as it is, its insert would fail on every delivery,
 * and a broker would redeliver it for ever, blocking the messages behind it.
 */
export async function runSourceTransform(
  transform: CompiledTransform,
  input: TransformInput,
): Promise<{ readonly payload: JsonValue; readonly headers: Headers } | { readonly reject: string }> {
  const outcome = await transform(input);
  if ('reject' in outcome) return outcome;
  const unstorable =
    unstorableJsonReason(outcome.payload)?.replace(/^The body /, 'its payload ') ??
    unstorableHeadersReason(outcome.headers ?? {});
  if (unstorable !== undefined) return { reject: `the transform's result cannot be stored: ${unstorable}` };
  const headers: Headers = { ...input.headers };
  for (const [name, value] of Object.entries(outcome.headers ?? {})) headers[name.toLowerCase()] = value;
  return { payload: outcome.payload, headers };
}
