import { createRequire } from 'node:module';
import {
  ConfigError,
  type ConfigIssue,
  type Headers,
  type JsonValue,
  QueueBoxError,
  type RowId,
} from '@queuebox/core';
import {
  createJsonataEngine,
  describeError,
  type JsonataCompiler,
  type JsonataEngine,
  type JsonataExpression,
  runTransformFunction,
  type TransformFunction as SharedTransformFunction,
  type TransformFailure,
} from '@queuebox/transform';
import { headerWithoutText, mergeHeaders } from './headers.ts';
import type { DestinationOptions, RouteOptions, TransformSpec } from './options.ts';

// One rejection class and helper for the inbox and the outbox, so a function rejects the same way on both sides.
export {
  reject,
  type TransformContext,
  TransformRejectedError,
  type TransformResult,
} from '@queuebox/transform';

/** What a transform sees: the routed row. */
export interface TransformInput {
  readonly payload: JsonValue;
  readonly headers: Headers;
  readonly topic: string;
  readonly key: string | null;
  /** The outbox row id (unique only within its schema). */
  readonly id: RowId;
  /**
   * The row's message id, `<install id>-<row id>`: what the delivery carries as its message id (`message-id`,
   * `Idempotency-Key`, `webhook-id`, …), the same on every retry and unique across installs. Put it in a payload
   * whose destination carries no id of its own (EventBridge gives each event its own).
   */
  readonly messageId: string;
}

/**
 * A route or destination transform written in TypeScript (the transform package's one shape, over the routed row).
 * Any throw other than a rejection, or running past the timeout, dead-letters the row too.
 */
export type TransformFunction = SharedTransformFunction<TransformInput>;

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

/**
 * A compiler of transforms.
 *
 * JSONata runs against the payload, with `$headers`, `$topic`, `$key`, `$id` and `$messageId` bound, and `$reject(reason)` to
 * dead-letter the message; its result is the new payload (a JSONata expression cannot set headers: use a
 * function). An expression that yields nothing (`undefined`) is a rejection. JSONata 2 evaluates asynchronously but
 * a CPU-bound expression never yields to a timer, so the timeout is also passed to JSONata, which checks it at every
 * evaluation step; a single built-in call that runs long (a huge `$sort`, a catastrophic regular expression) still
 * blocks the event loop until it returns, and only then counts as timed out.
 */
export function createTransformCompiler(options: TransformCompilerOptions = {}): TransformCompiler {
  const registry = options.registry ?? createTransformRegistry();
  const timeoutMs = options.timeoutMs ?? DEFAULT_TRANSFORM_TIMEOUT_MS;
  const engine = createJsonataEngine({
    compile: (text, compileOptions) => requireJsonata()(text, compileOptions),
    timeoutMs,
  });

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
      engine.parse(spec.jsonata);
      return undefined;
    } catch (error) {
      return { path: `${path}.jsonata`, message: `JSONata syntax error: ${describeError(error)}` };
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
      return jsonataTransform(engine, engine.parse(spec.jsonata));
    },
  };
}

let jsonataPackage: JsonataCompiler | undefined;

/**
 * The `jsonata` package, loaded on the first JSONata expression a compiler parses, so that a process without a
 * JSONata transform never loads it (as `loadJsonata` of @queuebox/transform promises; an outside audit found this
 * module's static import evaluating JSONata at the start of every Lambda function). Synchronous, unlike
 * `loadJsonata`: the outbox poller compiles its routes and destinations, and refuses a JSONata syntax error,
 * as it is built (`createOutboxPoller`, `createServices` and `checkServices` are synchronous).
 *
 * Bundled (esbuild: the Lambda functions), `require` is the bundle's, and esbuild puts the bundled jsonata behind
 * this very call, evaluated only when it runs; unbundled (the local runtime and the tests run ES modules, which have
 * no `require`), Node's require made for this module loads the package (CommonJS: the same function as `jsonata`'s
 * default export). `scripts/check-bundles.ts` checks that no function bundle evaluates jsonata at import.
 */
function requireJsonata(): JsonataCompiler {
  jsonataPackage ??= (
    typeof require === 'function' ? require('jsonata') : createRequire(import.meta.url)('jsonata')
  ) as JsonataCompiler;
  return jsonataPackage;
}

/** Whether `spec` names a registered function (the config schema's output may carry `jsonata: undefined`). */
function isFunctionSpec(spec: TransformSpec): spec is { readonly function: string } {
  return typeof (spec as { function?: unknown }).function === 'string';
}

/** The dead-letter reason of a failed transform: every failure dead-letters the row at the outbox. */
function reasonOf(name: string, failure: TransformFailure): string {
  if (failure.kind === 'rejected') return `${name} rejected: ${failure.reason}`;
  if (failure.kind === 'failed') return `${name} failed: ${failure.reason}`;
  return `${name}: ${failure.reason}`;
}

function functionTransform(name: string, fn: TransformFunction, timeoutMs: number): CompiledTransform {
  return {
    name,
    async apply(input) {
      const run = await runTransformFunction(fn, input, { timeoutMs });
      if (!run.ok) return { ok: false, reason: reasonOf(name, run) };
      const result = run.value;
      if (result === null || typeof result !== 'object' || !('payload' in result)) {
        return { ok: false, reason: `${name} returned no { payload }` };
      }
      if (result.payload === undefined) return { ok: false, reason: `${name} returned an undefined payload` };
      const { headers } = result as { headers?: unknown };
      if (
        headers !== undefined &&
        (headers === null || typeof headers !== 'object' || Array.isArray(headers))
      ) {
        return {
          ok: false,
          reason: `${name} returned headers that are not an object (${describeValue(headers)})`,
        };
      }
      const notText = headers === undefined ? undefined : headerWithoutText(headers);
      if (notText !== undefined) {
        const value = describeValue((headers as Record<string, unknown>)[notText]);
        return {
          ok: false,
          reason: `${name} returned the header "${notText}" with a value that is not a string (${value})`,
        };
      }
      return { ok: true, payload: result.payload, headers: mergeHeaders(input.headers, result.headers) };
    },
  };
}

function jsonataTransform(engine: JsonataEngine, expression: JsonataExpression): CompiledTransform {
  const name = 'jsonata';
  return {
    name,
    async apply(input) {
      const bindings = {
        headers: input.headers,
        topic: input.topic,
        key: input.key,
        id: input.id,
        messageId: input.messageId,
      };
      const run = await engine.evaluate(expression, input.payload, bindings);
      return run.ok
        ? { ok: true, payload: run.value, headers: input.headers }
        : { ok: false, reason: reasonOf(name, run) };
    },
  };
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

/** What a value is, for a rejection reason: its type, never its content. */
function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value;
}
