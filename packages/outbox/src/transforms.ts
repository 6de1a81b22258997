import {
  ConfigError,
  type ConfigIssue,
  type Headers,
  type JsonValue,
  QueueBoxError,
  type RowId,
} from '@queuebox/core';
import jsonata from 'jsonata';
import { mergeHeaders } from './headers.ts';
import type { DestinationOptions, RouteOptions, TransformSpec } from './options.ts';

/** What a transform sees: the routed row. */
export interface TransformInput {
  readonly payload: JsonValue;
  readonly headers: Headers;
  readonly topic: string;
  readonly key: string | null;
  /** The outbox row id. */
  readonly id: RowId;
}

/** What a transform returns: the new payload, and headers to add or replace (names compared without case). */
export interface TransformResult {
  readonly payload: JsonValue;
  readonly headers?: Headers;
}

/** Passed to a transform function next to its input. */
export interface TransformContext {
  /** Aborted when the transform's time is up; long work should stop then. */
  readonly signal: AbortSignal;
}

/**
 * A transform written in TypeScript and registered by name. It rejects the message by calling `reject(reason)` or
 * throwing `TransformRejectedError`; any other throw, or running past the timeout, is a rejection too.
 */
export type TransformFunction = (
  input: TransformInput,
  context: TransformContext,
) => TransformResult | Promise<TransformResult>;

/** A transform refused a message; the outbox dead-letters the row with `reason`. */
export class TransformRejectedError extends QueueBoxError {
  readonly reason: string;

  constructor(reason: string, options: { cause?: unknown; context?: Record<string, unknown> } = {}) {
    super(`Transform rejected the message: ${reason}`, options);
    this.reason = reason;
  }
}

/** Rejects the message being transformed (throws `TransformRejectedError`). */
export function reject(reason: string): never {
  throw new TransformRejectedError(reason);
}

/** Named transform functions. Pass one registry to everything that compiles transforms; there is no global one. */
export interface TransformRegistry {
  /** Adds a function; throws `QueueBoxError` when the name is taken. Returns the registry for chaining. */
  register(name: string, fn: TransformFunction): TransformRegistry;
  get(name: string): TransformFunction | undefined;
  names(): string[];
}

/** A registry holding `functions` (default none). */
export function createTransformRegistry(
  functions: Readonly<Record<string, TransformFunction>> = {},
): TransformRegistry {
  const byName = new Map<string, TransformFunction>();
  const registry: TransformRegistry = {
    register(name, fn) {
      if (byName.has(name)) {
        throw new QueueBoxError(`A transform named "${name}" is already registered`, { context: { name } });
      }
      byName.set(name, fn);
      return registry;
    },
    get: (name) => byName.get(name),
    names: () => [...byName.keys()],
  };
  for (const [name, fn] of Object.entries(functions)) registry.register(name, fn);
  return registry;
}

/** The result of running a transform: a new message, or a rejection with its reason. Never throws. */
export type TransformOutcome =
  | { readonly ok: true; readonly payload: JsonValue; readonly headers: Headers }
  | { readonly ok: false; readonly reason: string };

/** A transform ready to run. */
export interface CompiledTransform {
  /** `jsonata` or `function:<name>`, for logs and reasons. */
  readonly name: string;
  apply(input: TransformInput): Promise<TransformOutcome>;
}

/** Options of `createTransformCompiler`. */
export interface TransformCompilerOptions {
  /** Named functions. Default: an empty registry. */
  readonly registry?: TransformRegistry;
  /** Time one transform may take before it counts as a rejection. Default 1000 ms. */
  readonly timeoutMs?: number;
}

/** Compiles transform specs; JSONata expressions are parsed once per distinct text and cached. */
export interface TransformCompiler {
  /** Compiles `spec`; throws `ConfigError` (with `path`) for an unknown function or a JSONata syntax error. */
  compile(spec: TransformSpec, path?: string): CompiledTransform;
  /** The problem with `spec`, or undefined when it compiles. */
  check(spec: TransformSpec, path?: string): ConfigIssue | undefined;
}

/** Default time a transform may take. */
export const DEFAULT_TRANSFORM_TIMEOUT_MS = 1000;

// JSONata's error code for an evaluation that ran past its `timeout` option.
const JSONATA_TIMEOUT = 'D1012';

/**
 * A compiler of transforms.
 *
 * JSONata runs against the payload, with `$headers`, `$topic`, `$key` and `$id` bound, and `$reject(reason)` to
 * dead-letter the message; its result is the new payload (a JSONata expression cannot set headers: use a
 * function). An expression that yields nothing (`undefined`) is a rejection. JSONata 2 evaluates asynchronously but
 * a CPU-bound expression never yields to a timer, so the timeout is also passed to JSONata, which checks it at every
 * evaluation step; a single built-in call that runs long (a huge `$sort`, a catastrophic regular expression) still
 * blocks the event loop until it returns, and only then counts as timed out.
 */
export function createTransformCompiler(options: TransformCompilerOptions = {}): TransformCompiler {
  const registry = options.registry ?? createTransformRegistry();
  const timeoutMs = options.timeoutMs ?? DEFAULT_TRANSFORM_TIMEOUT_MS;
  const expressions = new Map<string, jsonata.Expression>();

  const parse = (text: string): jsonata.Expression => {
    const cached = expressions.get(text);
    if (cached !== undefined) return cached;
    // JSONata's own guardrail checks the time at every evaluation step, so it stops a CPU-bound expression too.
    const expression = jsonata(text, { timeout: timeoutMs });
    expressions.set(text, expression);
    return expression;
  };

  const check = (spec: TransformSpec, path = 'transform'): ConfigIssue | undefined => {
    if (isFunctionSpec(spec)) {
      if (registry.get(spec.function) !== undefined) return undefined;
      const known = registry.names();
      return {
        path: `${path}.function`,
        message: `no transform function named "${spec.function}" is registered (${
          known.length === 0 ? 'none are' : `registered: ${known.join(', ')}`
        })`,
      };
    }
    try {
      parse(spec.jsonata);
      return undefined;
    } catch (error) {
      return { path: `${path}.jsonata`, message: `JSONata syntax error: ${describe(error)}` };
    }
  };

  return {
    check,
    compile(spec, path = 'transform') {
      const issue = check(spec, path);
      if (issue !== undefined) throw new ConfigError([issue]);
      if (isFunctionSpec(spec)) {
        const fn = registry.get(spec.function) as TransformFunction;
        return functionTransform(`function:${spec.function}`, fn, timeoutMs);
      }
      return jsonataTransform(parse(spec.jsonata), timeoutMs);
    },
  };
}

/** Whether `spec` names a registered function (the config schema's output may carry `jsonata: undefined`). */
function isFunctionSpec(spec: TransformSpec): spec is { readonly function: string } {
  return typeof (spec as { function?: unknown }).function === 'string';
}

class TransformTimeoutError extends QueueBoxError {
  constructor(timeoutMs: number) {
    super(`transform timed out after ${timeoutMs} ms`, { context: { timeoutMs } });
  }
}

function functionTransform(name: string, fn: TransformFunction, timeoutMs: number): CompiledTransform {
  return {
    name,
    async apply(input) {
      const controller = new AbortController();
      try {
        const result = await withTimeout(
          Promise.resolve().then(() => fn(input, { signal: controller.signal })),
          timeoutMs,
          controller,
        );
        if (result === null || typeof result !== 'object' || !('payload' in result)) {
          return { ok: false, reason: `${name} returned no { payload }` };
        }
        if (result.payload === undefined)
          return { ok: false, reason: `${name} returned an undefined payload` };
        return { ok: true, payload: result.payload, headers: mergeHeaders(input.headers, result.headers) };
      } catch (error) {
        return { ok: false, reason: rejectionReason(name, error, timeoutMs) };
      }
    },
  };
}

function jsonataTransform(expression: jsonata.Expression, timeoutMs: number): CompiledTransform {
  const name = 'jsonata';
  return {
    name,
    async apply(input) {
      const controller = new AbortController();
      const bindings = {
        headers: input.headers,
        topic: input.topic,
        key: input.key,
        id: input.id,
        reject: (reason: unknown) => {
          throw new TransformRejectedError(String(reason));
        },
      };
      try {
        const result: unknown = await withTimeout(
          expression.evaluate(input.payload, bindings),
          timeoutMs,
          controller,
        );
        if (result === undefined) return { ok: false, reason: 'jsonata: the expression produced no value' };
        // JSONata results may be sequences (arrays with extra fields) or hold functions; keep only JSON.
        const payload = JSON.parse(JSON.stringify(result)) as JsonValue | undefined;
        if (payload === undefined)
          return { ok: false, reason: 'jsonata: the expression produced no JSON value' };
        return { ok: true, payload, headers: input.headers };
      } catch (error) {
        return { ok: false, reason: rejectionReason(name, error, timeoutMs) };
      }
    },
  };
}

async function withTimeout<T>(work: Promise<T>, timeoutMs: number, controller: AbortController): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, rejectTimeout) => {
    timer = setTimeout(() => {
      const error = new TransformTimeoutError(timeoutMs);
      controller.abort(error);
      rejectTimeout(error);
    }, timeoutMs);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function rejectionReason(name: string, error: unknown, timeoutMs: number): string {
  if (error instanceof TransformRejectedError) return `${name} rejected: ${error.reason}`;
  if (error instanceof TransformTimeoutError) return `${name}: ${error.message}`;
  if ((error as { code?: unknown } | null)?.code === JSONATA_TIMEOUT) {
    return `${name}: ${new TransformTimeoutError(timeoutMs).message}`;
  }
  return `${name} failed: ${describe(error)}`;
}

function describe(error: unknown): string {
  if (error instanceof Error) return error.message;
  // JSONata throws plain objects { code, message, position, token }.
  if (error !== null && typeof error === 'object') {
    const { code, message, position } = error as { code?: unknown; message?: unknown; position?: unknown };
    const parts = [code, message].filter((p) => typeof p === 'string');
    if (typeof position === 'number') parts.push(`at ${position}`);
    if (parts.length > 0) return parts.join(' ');
  }
  return String(error);
}

/** Runs `transforms` in order, each on the previous one's output; the first rejection stops the chain. */
export function chainTransforms(transforms: readonly CompiledTransform[]): CompiledTransform | undefined {
  if (transforms.length === 0) return undefined;
  if (transforms.length === 1) return transforms[0];
  return {
    name: transforms.map((t) => t.name).join(' → '),
    async apply(input) {
      let current: TransformInput = input;
      let outcome: TransformOutcome = { ok: true, payload: input.payload, headers: input.headers };
      for (const transform of transforms) {
        outcome = await transform.apply(current);
        if (!outcome.ok) return outcome;
        current = { ...current, payload: outcome.payload, headers: outcome.headers };
      }
      return outcome;
    },
  };
}

/**
 * Every transform problem of a route list and its destinations (unknown function names, JSONata syntax errors),
 * with paths `routes[i].transform…` and `destinations.<name>.transform…`; empty when all compile.
 */
export function checkTransforms(
  compiler: TransformCompiler,
  routes: readonly RouteOptions[],
  destinations: Readonly<Record<string, DestinationOptions>>,
): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  routes.forEach((route, i) => {
    const issue = route.transform && compiler.check(route.transform, `routes[${i}].transform`);
    if (issue) issues.push(issue);
  });
  for (const [name, destination] of Object.entries(destinations)) {
    const issue =
      destination.transform && compiler.check(destination.transform, `destinations.${name}.transform`);
    if (issue) issues.push(issue);
  }
  return issues;
}
