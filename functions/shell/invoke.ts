import type { LambdaClientConfig } from '@aws-sdk/client-lambda';

/** Starts another function asynchronously: the one thing wake-ups need from the Lambda API. */
export interface FunctionInvoker {
  /** An `InvocationType: 'Event'` invoke of `functionName` with `payload` as JSON; resolves once Lambda queued it. */
  invokeAsync(functionName: string, payload: unknown): Promise<void>;
}

/**
 * The invoker over `@aws-sdk/client-lambda`, loaded and built on the first wake-up (the Lambda runtime provides the
 * SDK; a function that never wakes another never loads it). `config` goes to the `LambdaClient`. Default: the
 * region and credentials of the function.
 */
export function createLambdaInvoker(config: LambdaClientConfig = {}): FunctionInvoker {
  let ready: Promise<(functionName: string, payload: Uint8Array) => Promise<unknown>> | undefined;
  return {
    async invokeAsync(functionName, payload) {
      ready ??= import('@aws-sdk/client-lambda').then(({ InvokeCommand, LambdaClient }) => {
        const client = new LambdaClient(config);
        return (name: string, bytes: Uint8Array) =>
          client.send(new InvokeCommand({ FunctionName: name, InvocationType: 'Event', Payload: bytes }));
      });
      const send = await ready;
      await send(functionName, new TextEncoder().encode(JSON.stringify(payload)));
    },
  };
}
