/**
 * Wake-ups of QueueBox on AWS from the application: after the application's transaction that enqueued rows has
 * committed, an asynchronous invoke of the outbox-tick function starts a drain at once, so the rows go out within
 * seconds while the periodic safety tick stays rare (and a pausable Aurora stays paused between messages).
 *
 * Infra outputs the function's name (`outboxTickFunction`) and an IAM managed policy that allows exactly this
 * invoke (`wakeOutboxPolicyArn`): attach the policy to the application's role. Rows written by plain SQL or without
 * a wake wait for the safety tick (`aws.functions.outboxTick.rateMinutes`).
 */
import type { LambdaClientConfig } from '@aws-sdk/client-lambda';

/** What a wake needs from the Lambda API: an `InvocationType: 'Event'` invoke. Injected in tests. */
export type AsyncInvoke = (functionName: string, payload: Uint8Array) => Promise<void>;

/** Options of `createOutboxWaker`. */
export interface OutboxWakerOptions {
  /** Name or ARN of outbox-tick (infra's output `outboxTickFunction`). Default: `OUTBOX_TICK_FUNCTION_NAME`. */
  readonly functionName?: string | undefined;
  /**
   * Wakes closer together than this are merged: the first goes at once, the others become one wake at the end of
   * the window (so a commit just after a drain finished is never left for the safety tick). Default 1000 ms.
   */
  readonly minIntervalMs?: number | undefined;
  /** Longest time one invoke may take (connect included); a slower one counts as failed. Default 3000 ms. */
  readonly timeoutMs?: number | undefined;
  /** Told about a failed wake (the rows still go out with the safety tick). Default: nothing. */
  readonly onError?: ((error: unknown) => void) | undefined;
  /**
   * Settings of the `LambdaClient` (region, credentials): an `@aws-sdk/client-lambda` `LambdaClientConfig`.
   * Default: the SDK's. Typed as a plain object here, so these declarations type-check without the SDK installed.
   */
  readonly lambda?: object | undefined;
  /** Replaces the Lambda API (tests). */
  readonly invoke?: AsyncInvoke | undefined;
}

/** A waker of one outbox-tick function. */
export interface OutboxWaker {
  /**
   * Asks for a drain; call it after the commit. Resolves `true` when Lambda accepted the invoke (or a merged one
   * is booked), `false` when it failed; never throws, so it cannot fail the application's request.
   */
  wake(): Promise<boolean>;
  /** Cancels a booked trailing wake (its callers get `false`). */
  close(): void;
}

const PAYLOAD = new TextEncoder().encode(JSON.stringify({ trigger: 'wakeup' }));

function lambdaInvoke(config: LambdaClientConfig, timeoutMs: number): AsyncInvoke {
  let ready: Promise<AsyncInvoke> | undefined;
  return async (functionName, payload) => {
    ready ??= import('@aws-sdk/client-lambda').then(({ InvokeCommand, LambdaClient }) => {
      const client = new LambdaClient({
        maxAttempts: 2,
        requestHandler: { connectionTimeout: Math.min(1000, timeoutMs), requestTimeout: timeoutMs },
        ...config,
      });
      return async (name: string, bytes: Uint8Array) => {
        await client.send(
          new InvokeCommand({ FunctionName: name, InvocationType: 'Event', Payload: bytes }),
          { abortSignal: AbortSignal.timeout(timeoutMs) },
        );
      };
    });
    await (await ready)(functionName, payload);
  };
}

/**
 * A waker of outbox-tick (see the file comment). Throws only when no function name is given or set in
 * `OUTBOX_TICK_FUNCTION_NAME`.
 */
export function createOutboxWaker(options: OutboxWakerOptions = {}): OutboxWaker {
  const functionName = options.functionName ?? process.env.OUTBOX_TICK_FUNCTION_NAME;
  if (!functionName) {
    throw new Error(
      'createOutboxWaker needs the outbox-tick function: pass functionName or set OUTBOX_TICK_FUNCTION_NAME (infra output outboxTickFunction)',
    );
  }
  const minIntervalMs = options.minIntervalMs ?? 1000;
  const timeoutMs = options.timeoutMs ?? 3000;
  const invoke = options.invoke ?? lambdaInvoke((options.lambda ?? {}) as LambdaClientConfig, timeoutMs);
  let lastSent = Number.NEGATIVE_INFINITY;
  let trailing:
    | { timer: NodeJS.Timeout; done: Promise<boolean>; resolve: (sent: boolean) => void }
    | undefined;

  const send = async (): Promise<boolean> => {
    lastSent = performance.now();
    try {
      await invoke(functionName, PAYLOAD);
      return true;
    } catch (error) {
      try {
        options.onError?.(error);
      } catch {
        // A logging hook must not turn a lost wake-up into a failed request.
      }
      return false;
    }
  };

  return {
    wake() {
      // A monotonic clock: a wall clock stepped back (NTP) made the next wake wait as long as the step.
      const wait = lastSent + minIntervalMs - performance.now();
      if (wait <= 0 && trailing === undefined) return send();
      if (trailing) return trailing.done;
      let resolve: (sent: boolean) => void = () => {};
      const done = new Promise<boolean>((r) => {
        resolve = r;
      });
      const timer = setTimeout(
        () => {
          trailing = undefined;
          void send().then(resolve);
        },
        Math.max(0, wait),
      );
      timer.unref();
      trailing = { timer, done, resolve };
      return done;
    },
    close() {
      if (!trailing) return;
      clearTimeout(trailing.timer);
      trailing.resolve(false);
      trailing = undefined;
    },
  };
}
