/**
 * A poller for the tests that watch what settling reports (`onSettled`, the log): one HTTP destination `hooks` at
 * `receiverUrl` (2 s timeout), `orders.#` routed to it, batches of 10, a fixed 1 s retry delay (jitter at its top),
 * and a 0.2 s settle reserve. `close` closes its publishers.
 */
import type { OutboxStore } from '@queuebox/core';
import type { DestinationOptions, RouteOptions } from '../../src/options.ts';
import { createOutboxPoller, type OutboxPollerDeps } from '../../src/poller.ts';
import { createPublishers, defaultPublisherFactories } from '../../src/publishers.ts';

export function aHooksPoller(
  store: OutboxStore,
  receiverUrl: string,
  extra: Pick<OutboxPollerDeps, 'onSettled' | 'logger' | 'clock'> = {},
) {
  const destinations: Record<string, DestinationOptions> = {
    hooks: { type: 'http', url: receiverUrl, timeoutMs: 2000 },
  };
  const routes: RouteOptions[] = [{ match: 'orders.#', destination: 'hooks' }];
  const publishers = createPublishers(destinations, defaultPublisherFactories);
  const poller = createOutboxPoller({
    store,
    publishers,
    routes,
    destinations,
    options: {
      batchSize: 10,
      claimTimeoutMs: 30_000,
      maxAttempts: 5,
      backoff: { baseMs: 1000, maxMs: 1000 },
      settleReserveMs: 200,
    },
    // Jitter at its top: the delay is exactly the ceiling, 1000 ms.
    random: () => 1,
    ...extra,
  });
  return { poller, close: () => publishers.close() };
}
