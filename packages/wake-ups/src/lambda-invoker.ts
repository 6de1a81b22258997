import type { LambdaClientConfig } from '@aws-sdk/client-lambda';
import { AWS_CLIENT_DEFAULTS } from '@queuebox/config';

/** Starts another function asynchronously: the one thing wake-ups need from the Lambda API. */
export interface FunctionInvoker {
  /** An `InvocationType: 'Event'` invoke of `functionName` with `payload` as JSON; resolves once Lambda queued it. */
  invokeAsync(functionName: string, payload: unknown): Promise<void>;
}

/**
 * The invoker over `@aws-sdk/client-lambda`, loaded and built on the first wake-up (the Lambda runtime provides the
 * SDK; a function that never wakes another never loads it). The client has `AWS_CLIENT_DEFAULTS` (1 s to connect,
 * 3 s per attempt, 2 attempts), so a hung Lambda API costs a wake-up, not the caller's answer; `config` goes to
 * the `LambdaClient` over them. Default: the region and credentials of the function.
 */
export function createLambdaInvoker(config: LambdaClientConfig = {}): FunctionInvoker {
  let ready: Promise<(functionName: string, payload: Uint8Array) => Promise<unknown>> | undefined;
  return {
    async invokeAsync(functionName, payload) {
      ready ??= import('@aws-sdk/client-lambda').then(({ InvokeCommand, LambdaClient }) => {
        const client = new LambdaClient({ ...AWS_CLIENT_DEFAULTS, ...config });
        return (name: string, bytes: Uint8Array) =>
          client.send(new InvokeCommand({ FunctionName: name, InvocationType: 'Event', Payload: bytes }));
      });
      const send = await ready;
      await send(functionName, new TextEncoder().encode(JSON.stringify(payload)));
    },
  };
}
