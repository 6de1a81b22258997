import type { Headers, JsonValue } from '@queuebox/core';
import { ConfigError, QueueBoxError } from '@queuebox/core';
import type jsonata from 'jsonata';
import type { TransformOptions } from './options.ts';

/** What a transform sees: the parsed payload, the headers that will be stored, and the extracted fields. */
export interface TransformInput {
  readonly source: string;
  readonly payload: JsonValue;
  readonly headers: Readonly<Headers>;
  readonly eventType: string | null;
  readonly idempotencyKey: string;
}

/** A transform's answer: a new payload (and optionally headers that are merged over the stored ones), or a rejection. */
export type TransformOutcome =
  | { readonly payload: JsonValue; readonly headers?: Headers }
  | { readonly reject: string };

/** A transform registered in code under a name (`transform: { function: name }`). */
export type TransformFunction = (input: TransformInput) => TransformOutcome | Promise<TransformOutcome>;

/** Named transforms registered in code. */
export type TransformFunctions = Readonly<Record<string, TransformFunction>>;

/**
 * Thrown by a transform function to reject the message (the same as returning `{ reject }`). Any other error a
 * function throws is a bug: the ingestion answers 500 and the sender retries after the fix.
 */
export class TransformRejectedError extends QueueBoxError {}

/** A compiled JSONata expression. */
export type JsonataExpression = jsonata.Expression;

/** Compiles a JSONata expression: the `jsonata` package's default export. */
export type JsonataCompiler = (expression: string) => JsonataExpression;

/** A transform ready to run. */
export type CompiledTransform = (input: TransformInput) => Promise<TransformOutcome>;

/** Loads the `jsonata` package on first use, so that sources without a JSONata transform never need it. */
export async function loadJsonata(): Promise<JsonataCompiler> {
  const module = await import('jsonata');
  return module.default;
}

class Rejection extends Error {}

/**
 * A JSONata transform. The expression is evaluated over the payload with the bindings `$headers`, `$source`,
 * `$eventType` and `$idempotencyKey`; its value becomes the new payload. It rejects the message when it calls
 * `$reject(reason)`, when it yields no value (undefined), or when evaluation fails on this payload (a JSONata
 * runtime error means the message does not have the shape the expression expects).
 */
function jsonataTransform(expression: JsonataExpression): CompiledTransform {
  expression.registerFunction(
    'reject',
    (reason?: unknown) => {
      throw new Rejection(typeof reason === 'string' && reason !== '' ? reason : 'rejected by the transform');
    },
    '<s?:x>',
  );
  return async (input) => {
    let result: unknown;
    try {
      result = await expression.evaluate(input.payload, {
        headers: input.headers,
        source: input.source,
        eventType: input.eventType,
        idempotencyKey: input.idempotencyKey,
      });
    } catch (error) {
      if (error instanceof Rejection) return { reject: error.message };
      const message = (error as { message?: unknown }).message;
      return {
        reject: `the transform failed: ${typeof message === 'string' ? message : 'evaluation error'}`,
      };
    }
    if (result === undefined) return { reject: 'the transform produced no payload' };
    // JSONata sequences carry extra properties; a JSON round trip leaves plain JSON.
    return { payload: JSON.parse(JSON.stringify(result)) as JsonValue };
  };
}

function functionTransform(fn: TransformFunction): CompiledTransform {
  return async (input) => {
    try {
      return await fn(input);
    } catch (error) {
      if (error instanceof TransformRejectedError) return { reject: error.message };
      throw error;
    }
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
  const compile = deps.jsonata ?? (await loadJsonata());
  let expression: JsonataExpression;
  try {
    expression = compile(options.jsonata);
  } catch (error) {
    const message = (error as { message?: unknown }).message;
    throw new ConfigError(
      [{ path, message: `the JSONata expression does not compile: ${String(message ?? error)}` }],
      { cause: error },
    );
  }
  return jsonataTransform(expression);
}
