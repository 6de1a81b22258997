import { type Headers, type JsonValue, QueueBoxError } from '@queuebox/core';
import { TransformRejectedError } from './rejection.ts';

/** Why a transform gave no value. Each side maps it to its own outcome (422 / dead row, or a dead-lettered row). */
export type TransformFailure =
  /** `reject()`, `$reject(reason)` or a thrown TransformRejectedError. */
  | { readonly ok: false; readonly kind: 'rejected'; readonly reason: string }
  /** The transform ran past its time. */
  | { readonly ok: false; readonly kind: 'timeout'; readonly reason: string }
  /** A JSONata expression yielded nothing (or nothing JSON can hold). */
  | { readonly ok: false; readonly kind: 'empty'; readonly reason: string }
  /** Anything else that was thrown; `error` is the thrown value, `reason` describes it. */
  | { readonly ok: false; readonly kind: 'failed'; readonly reason: string; readonly error: unknown };

/** What one run of a transform came to. */
export type TransformRun<T> = { readonly ok: true; readonly value: T } | TransformFailure;

/** Passed to a transform function next to its input. */
export interface TransformContext {
  /** Aborted when the transform's time is up; long work should stop then. Never aborted without a timeout. */
  readonly signal: AbortSignal;
}

/** What a transform function answers: the new payload, and headers to add or replace (names compared without case). */
export interface TransformResult {
  readonly payload: JsonValue;
  readonly headers?: Headers;
}

/**
 * A transform written in TypeScript and registered by name: the one shape of the inbox's source transforms (`I`:
 * the received message) and the outbox's route and destination transforms (`I`: the routed row). It answers the
 * new payload; it rejects the message by calling `reject(reason)` or throwing `TransformRejectedError`, on both
 * sides. `context.signal` aborts when the side's time limit is up (the outbox's `transformTimeoutMs`, the inbox's
 * `inbox.transformTimeoutMs`; 1000 ms by default on both). A function that never yields (a synchronous loop) cannot
 * be interrupted: it holds the event loop until it returns.
 */
export type TransformFunction<I> = (
  input: I,
  context: TransformContext,
) => TransformResult | Promise<TransformResult>;

/** The transform ran past its time. */
export class TransformTimeoutError extends QueueBoxError {
  constructor(timeoutMs: number, message = `transform timed out after ${timeoutMs} ms`) {
    super(message, { context: { timeoutMs } });
  }
}

// JSONata's error code for an evaluation that ran past its `timeout` option.
const JSONATA_TIMEOUT = 'D1012';

/** A readable one-line description of anything thrown, including JSONata's plain `{ code, message, position }` objects. */
export function describeError(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (error !== null && typeof error === 'object') {
    const { code, message, position } = error as { code?: unknown; message?: unknown; position?: unknown };
    const parts = [code, message].filter((p) => typeof p === 'string');
    if (typeof position === 'number') parts.push(`at ${position}`);
    if (parts.length > 0) return parts.join(' ');
  }
  return String(error);
}

/** Classifies what a transform threw. */
export function transformFailure(error: unknown, timeoutMs?: number): TransformFailure {
  if (error instanceof TransformRejectedError) return { ok: false, kind: 'rejected', reason: error.reason };
  if (error instanceof TransformTimeoutError) return { ok: false, kind: 'timeout', reason: error.message };
  if (timeoutMs !== undefined && (error as { code?: unknown } | null)?.code === JSONATA_TIMEOUT) {
    return { ok: false, kind: 'timeout', reason: new TransformTimeoutError(timeoutMs).message };
  }
  return { ok: false, kind: 'failed', reason: describeError(error), error };
}

/**
 * Runs `work` (a synchronous throw counts as a rejection of the promise). With `timeoutMs`, rejects with
 * TransformTimeoutError once that time has passed and aborts `controller`; the work itself cannot be stopped, so
 * CPU-bound work that never yields still blocks until it returns. Without `timeoutMs` (default) it waits.
 */
export async function runWithin<T>(
  work: () => T | Promise<T>,
  options: { readonly timeoutMs?: number; readonly controller?: AbortController } = {},
): Promise<T> {
  const started = Promise.resolve().then(work);
  const { timeoutMs, controller } = options;
  if (timeoutMs === undefined) return started;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, rejectTimeout) => {
    timer = setTimeout(() => {
      const error = new TransformTimeoutError(timeoutMs);
      controller?.abort(error);
      rejectTimeout(error);
    }, timeoutMs);
  });
  try {
    return await Promise.race([started, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs a transform function written in code: its value, or why it gave none (a rejection, the timeout, or anything
 * else it threw as `failed`, with the thrown value). Never throws. `timeoutMs` default: none.
 */
export async function runTransformFunction<I, R>(
  fn: (input: I, context: TransformContext) => R | Promise<R>,
  input: I,
  options: { readonly timeoutMs?: number } = {},
): Promise<TransformRun<R>> {
  const controller = new AbortController();
  try {
    const value = await runWithin(() => fn(input, { signal: controller.signal }), {
      timeoutMs: options.timeoutMs,
      controller,
    });
    return { ok: true, value };
  } catch (error) {
    return transformFailure(error, options.timeoutMs);
  }
}
