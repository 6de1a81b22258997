/**
 * The latency benchmark's runtime (bench/latency.ts forks it): `startRuntime` of @queuebox/local on its own event
 * loop, as `npm start` runs it, logging to stdout, which the parent reads line by line.
 */
import { parseConfig } from '@queuebox/config';
import { createLogger, startRuntime } from '@queuebox/local';
import { toParent } from './child.ts';

/** What the runtime child is started with. */
export interface RuntimeInput {
  readonly config: unknown;
  readonly wakeUps: boolean;
}
/** Runtime → parent. */
export type RuntimeMessage =
  | { readonly type: 'ready'; readonly listening: boolean }
  | { readonly type: 'failed'; readonly error: string }
  | { readonly type: 'stopped'; readonly clean: boolean };

/** `startRuntime` with the given configuration; stops gracefully on `stop` or when the parent goes away. */
async function runRuntime(input: RuntimeInput): Promise<void> {
  const config = parseConfig(input.config);
  let runtime: Awaited<ReturnType<typeof startRuntime>>;
  try {
    runtime = await startRuntime(config, {
      wakeUps: input.wakeUps,
      logger: createLogger({ level: config.logLevel }),
    });
  } catch (error) {
    toParent({ type: 'failed', error: error instanceof Error ? error.message : String(error) });
    process.exit(1);
  }
  const stop = async () => {
    const clean = await runtime.stop('benchmark done');
    toParent({ type: 'stopped', clean });
    process.exit(0);
  };
  process.on('message', (raw) => {
    if ((raw as { type: string }).type === 'stop') void stop();
  });
  process.on('disconnect', () => void stop());
  // Resolves true once LISTEN is in place (false at once without wake-ups).
  toParent({ type: 'ready', listening: await runtime.capture.start() });
}

// Not childInput: when the parent goes away the runtime stops gracefully rather than exiting at once.
await runRuntime(JSON.parse(process.argv[2] ?? '{}') as RuntimeInput);
