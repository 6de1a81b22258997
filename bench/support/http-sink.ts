/**
 * The parent's handle on the benchmark HTTP sink (see http-sink-process.ts): a node:http server on 127.0.0.1 in
 * a child process that answers every request `200 ok`.
 */
import { type BenchChild, forkBenchChild } from './child.ts';

/** Commands the sink process understands. */
export type SinkCommand = { readonly type: 'reset' } | { readonly type: 'stats' };

/** What the sink process reports. */
export type SinkMessage =
  | { readonly type: 'listening'; readonly url: string }
  | { readonly type: 'reset' }
  | {
      readonly type: 'stats';
      readonly requests: number;
      readonly distinctKeys: number;
      /** CPU (user + system) the sink used since the last reset. */
      readonly cpuSeconds: number;
    };

type Stats = Extract<SinkMessage, { type: 'stats' }>;

/** A running sink. */
export interface HttpSink {
  /** e.g. `http://127.0.0.1:40123/hooks` */
  readonly url: string;
  /** Zeroes the counters. */
  reset(): Promise<void>;
  /** Requests and distinct idempotency keys since the last reset. */
  stats(): Promise<Stats>;
  close(): Promise<void>;
}

/** Forks the sink process and waits until it listens. */
export async function startHttpSink(): Promise<HttpSink> {
  const child: BenchChild<SinkMessage> = forkBenchChild('support/http-sink-process.ts', {});
  const { url } = await child.next(
    (m): m is Extract<SinkMessage, { type: 'listening' }> => m.type === 'listening',
    30_000,
  );
  return {
    url,
    async reset() {
      child.send({ type: 'reset' } satisfies SinkCommand);
      await child.next((m): m is Extract<SinkMessage, { type: 'reset' }> => m.type === 'reset', 10_000);
    },
    async stats() {
      child.send({ type: 'stats' } satisfies SinkCommand);
      return child.next((m): m is Stats => m.type === 'stats', 10_000);
    },
    close: () => child.stop(0),
  };
}
