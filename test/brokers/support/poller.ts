import type { Store } from '@queuebox/core';
import {
  createOutboxPoller,
  createPublishers,
  type DestinationOptions,
  defaultPublisherFactories,
  type OutboxPollerOptions,
  type PublisherFactory,
  type TransformRegistry,
} from '@queuebox/outbox';

/** A poller over one destination, as the broker tests drive it. */
export interface BrokerPoller {
  /** One drain with 20 s to run; resolves with what it did. */
  drain(): ReturnType<ReturnType<typeof createOutboxPoller>['drain']>;
  /** Closes the poller, then the publishers. */
  close(): Promise<void>;
}

/**
 * An outbox poller on `store` that routes `orders.#` to one destination `events` (`destination`), with the default
 * publishers plus `factory` for the destination's type — how outbox-tick and the local runtime wire a broker.
 * `transforms`: the functions a destination's `transform: { function }` names (default none).
 */
export function brokerPoller(
  store: Store,
  destination: DestinationOptions & Readonly<Record<string, unknown>>,
  factory: PublisherFactory,
  options: OutboxPollerOptions,
  transforms?: TransformRegistry,
): BrokerPoller {
  const destinations = { events: destination };
  const publishers = createPublishers(destinations, {
    ...defaultPublisherFactories,
    [destination.type]: factory,
  });
  const poller = createOutboxPoller({
    store: store.outbox,
    publishers,
    routes: [{ match: 'orders.#', destination: 'events' }],
    destinations,
    options,
    transforms,
  });
  return {
    drain: () => poller.drain({ deadline: Date.now() + 20_000 }),
    async close() {
      await poller.close();
      await publishers.close();
    },
  };
}
