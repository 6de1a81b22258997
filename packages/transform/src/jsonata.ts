import { type JsonValue, parseJsonText } from '@queuebox/core';
import type jsonata from 'jsonata';
import { TransformRejectedError } from './rejection.ts';
import { runWithin, type TransformRun, TransformTimeoutError, transformFailure } from './run.ts';

/** A compiled JSONata expression. */
export type JsonataExpression = jsonata.Expression;

/** Compiles a JSONata expression: the `jsonata` package's default export, or a stand-in with its shape. */
export type JsonataCompiler = (
  expression: string,
  options?: { readonly timeout?: number },
) => JsonataExpression;

/** Loads the `jsonata` package on first use, so that a process without a JSONata transform never loads it. */
export async function loadJsonata(): Promise<JsonataCompiler> {
  const module = await import('jsonata');
  return module.default;
}

/** The reason of `$reject()` called without a (non-empty, text) reason. */
export const DEFAULT_REJECT_REASON = 'rejected by the transform';

/** Options of `createJsonataEngine`. */
export interface JsonataEngineOptions {
  /** The compiler, e.g. the `jsonata` default export or `await loadJsonata()`. */
  readonly compile: JsonataCompiler;
  /** Time one evaluation may take before it is a `timeout`. Default none (no limit). */
  readonly timeoutMs?: number;
}

/** Parses and evaluates JSONata transforms with one timeout. */
export interface JsonataEngine {
  /** Compiles `text`, once per distinct text (cached). Throws JSONata's syntax error (see `describeError`). */
  parse(text: string): JsonataExpression;
  /**
   * Evaluates `expression` over `payload` with `bindings` (as `$name`) and `$reject(reason)` bound (`parse`
   * registers an exact `$clone` on each expression, see {@link exactClone}; the transform operator uses it). The value is
   * plain JSON (JSONata sequences lose their extra fields). `$reject` or a thrown TransformRejectedError →
   * `rejected`; no value → `empty`; past the timeout → `timeout`; any runtime error → `failed`. Never throws.
   */
  evaluate(
    expression: JsonataExpression,
    payload: JsonValue,
    bindings: Readonly<Record<string, unknown>>,
  ): Promise<TransformRun<JsonValue>>;
}

/** `$reject(reason)`: throws the rejection; a missing or empty reason becomes DEFAULT_REJECT_REASON. */
function rejectBinding(reason?: unknown): never {
  throw new TransformRejectedError(
    typeof reason === 'string' && reason !== '' ? reason : DEFAULT_REJECT_REASON,
  );
}

/** Whether `value` is a function as JSONata sees one: a built-in, a lambda or a native function. */
function isJsonataFunction(value: unknown): boolean {
  if (typeof value === 'function') return true;
  if (typeof value !== 'object' || value === null) return false;
  const marks = value as { _jsonata_lambda?: unknown; _jsonata_function?: unknown };
  return marks._jsonata_lambda === true || marks._jsonata_function === true;
}

/**
 * `$clone(value)`, registered over JSONata's own on every expression, with its signature (`<(oa)-:o>`: an object or
 * array, the context when no argument is given). The transform operator (`$ ~> |path|update|`, the usual way to
 * change a few fields and keep the rest) clones its whole input with `$clone` before changing it, and JSONata's
 * clone is `JSON.parse($string(value))`, which rounded every double of the payload to 15 significant digits
 * (`0.30000000000000004` became `0.3`) and turned every number kept as its source text (core's `parseJsonText`: a
 * 19-digit id, `9007199254740993`) into the nearest double, in every field, not only in those the expression
 * changed, and silently. This one copies exactly: `JSON.stringify` writes each number as it is (a kept source text
 * included) and `parseJsonText` reads it back the same way. As in JSONata's, a function in the value becomes `""`
 * and a sequence's outer wrapper is taken off. A kept number stays a `JSON.rawJSON` object inside the update, as it
 * is everywhere else in an expression.
 */
function exactClone(value?: unknown): unknown {
  if (value === undefined) return undefined;
  const unwrapped =
    Array.isArray(value) && (value as { outerWrapper?: boolean }).outerWrapper ? value[0] : value;
  const json = JSON.stringify(unwrapped, (_key, item: unknown) => (isJsonataFunction(item) ? '' : item));
  return json === undefined ? undefined : parseJsonText(json);
}

/**
 * How long JSONata evaluations may follow one another before the event loop gets a pause (`evaluateInTurn`).
 */
export const JSONATA_SLICE_MS = 10;

/** The longest pause between two slices of JSONata evaluations (`evaluateInTurn`). */
export const JSONATA_MAX_PAUSE_MS = 100;

/**
 * How many times its timeout a JSONata evaluation may wait for its turn (`evaluateInTurn`) before it fails as timed
 * out: 10 s at the default 1 s.
 */
export const JSONATA_TURN_WAIT_TIMEOUTS = 10;

interface Waiter {
  readonly go: () => void;
  timer?: ReturnType<typeof setTimeout>;
}

let evaluating = false;
const waiting: Waiter[] = [];
let sliceStartedAt = 0;

/**
 * Runs `evaluate` when no other JSONata evaluation of this process runs, oldest waiter first; once evaluations have
 * run for `JSONATA_SLICE_MS` in a row, the next one waits as long again (at most `JSONATA_MAX_PAUSE_MS`), so the rest
 * of the process gets at least about half of the event loop (a tenth behind evaluations of a second). JSONata
 * evaluates step by step in promise callbacks, which run before any I/O: evaluations side by side interleaved their
 * steps and kept the event loop from every socket until all of them were done, so 32 webhooks of a source with a
 * 450 ms expression held every other source's webhooks for 20 s, and the outbox's deliveries past their timeout (an
 * outside audit of fairness); one turn of the loop between two evaluations was not enough either, because a webhook
 * needs several (its request, its statement, its answer). The time a run waits here is not counted in its timeout:
 * JSONata counts from the start of evaluate, so evaluations side by side no longer run out of time together. The wait
 * has a bound of its own, `maxWaitMs`: past it the run leaves the queue and fails as timed out (a webhook is answered
 * 503, a broker message redelivered), so a burst does not queue every transform of the process without end (review
 * of b2cbd6e: the last of 60 at once answered after 27 s).
 */
async function evaluateInTurn<T>(evaluate: () => Promise<T>, maxWaitMs?: number): Promise<T> {
  if (evaluating) {
    await new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { go: resolve };
      if (maxWaitMs !== undefined) {
        waiter.timer = setTimeout(() => {
          const at = waiting.indexOf(waiter);
          if (at === -1) return;
          waiting.splice(at, 1);
          reject(
            new TransformTimeoutError(
              maxWaitMs,
              `transform timed out after waiting ${maxWaitMs} ms for its turn (other transforms of this process were running)`,
            ),
          );
        }, maxWaitMs);
      }
      waiting.push(waiter);
    });
  } else {
    evaluating = true;
    sliceStartedAt = performance.now();
  }
  try {
    return await evaluate();
  } finally {
    // The next waiter has its turn now (or after the pause): its wait is over.
    const next = waiting.shift();
    if (next?.timer !== undefined) clearTimeout(next.timer);
    const ranFor = performance.now() - sliceStartedAt;
    if (next === undefined) evaluating = false;
    else if (ranFor < JSONATA_SLICE_MS) next.go();
    else {
      setTimeout(
        () => {
          sliceStartedAt = performance.now();
          next.go();
        },
        Math.min(JSONATA_MAX_PAUSE_MS, Math.ceil(ranFor)),
      );
    }
  }
}

/**
 * A JSONata engine. With `timeoutMs` the limit is also handed to JSONata, which checks it at every evaluation step,
 * because a CPU-bound expression never yields to a timer; a single built-in call that runs long (a huge `$sort`, a
 * catastrophic regular expression) still blocks the event loop until it returns, and only then counts as timed out.
 */
export function createJsonataEngine(options: JsonataEngineOptions): JsonataEngine {
  const { compile, timeoutMs } = options;
  const expressions = new Map<string, JsonataExpression>();
  return {
    parse(text) {
      const cached = expressions.get(text);
      if (cached !== undefined) return cached;
      const expression = timeoutMs === undefined ? compile(text) : compile(text, { timeout: timeoutMs });
      expression.registerFunction('clone', exactClone, '<(oa)-:o>');
      expressions.set(text, expression);
      return expression;
    },
    async evaluate(expression, payload, bindings) {
      try {
        const result: unknown = await evaluateInTurn(
          () =>
            runWithin(() => expression.evaluate(payload, { ...bindings, reject: rejectBinding }), {
              timeoutMs,
            }),
          timeoutMs === undefined ? undefined : timeoutMs * JSONATA_TURN_WAIT_TIMEOUTS,
        );
        if (result === undefined)
          return { ok: false, kind: 'empty', reason: 'the expression produced no value' };
        const json = JSON.stringify(result);
        if (json === undefined)
          return { ok: false, kind: 'empty', reason: 'the expression produced no JSON value' };
        // parseJsonText, not JSON.parse: a number the payload kept as its source text (1e400, a 20-digit id) went
        // through the expression untouched and must come out with every digit.
        return { ok: true, value: parseJsonText(json) };
      } catch (error) {
        return transformFailure(error, timeoutMs);
      }
    },
  };
}
