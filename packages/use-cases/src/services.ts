import type { QueueBoxConfig } from '@queuebox/config';
import type { Logger, Store } from '@queuebox/core';
import {
  type BrokerIngestion,
  createBrokerIngestion,
  createIngestion,
  createRelay,
  type Ingestion,
  type Relay,
  type TransformFunctions,
} from '@queuebox/inbox';
import {
  createOutboxPoller,
  createPublishers,
  type OutboxPoller,
  type OutboxPollerDeps,
  type PublisherFactory,
  type PublisherSet,
  type TransformRegistry,
} from '@queuebox/outbox';
import { inboxSources } from './sources.ts';

/** The two tables of a store, which is all the services use (opening, migrating and closing stay with the caller). */
export type StoreTables = Pick<Store, 'inbox' | 'outbox'>;

/** Options of {@link createServices}. */
export interface ServicesOptions {
  /** Transform functions registered in code for the outbox (`transform: { function }` of routes and destinations). Default none. */
  readonly outboxTransforms?: TransformRegistry;
  /** Transform functions registered in code for sources (`transform: { function }` of a source). Default none. */
  readonly inboxTransforms?: TransformFunctions;
  /**
   * Publisher factories by destination type, e.g. `defaultPublisherFactories` of `@queuebox/outbox` (`http`) and
   * the brokers' factories; a destination of a type without a factory gets no publisher and its rows go dead.
   * Default: none, for an assembly that never delivers (inbox-http, relay-tick, admin-http …): it then holds no
   * publisher code at all (the HTTP client alone is ≈ 0.5 MB of a Lambda bundle), and its poller refuses to
   * drain rather than dead-letter every row for want of a publisher.
   */
  readonly publisherFactories?: Readonly<Record<string, PublisherFactory>>;
  /** Logger of the outbox poller. Default silent. */
  readonly logger?: Logger;
  /**
   * Told after each settle of the outbox poller with the rows it settled (`onSettled` of `createOutboxPoller`),
   * e.g. for a delivery-latency histogram. Default none.
   */
  readonly onOutboxSettled?: OutboxPollerDeps['onSettled'];
}

/** What the Lambda functions and the local runtime run: one assembly over one store. */
export interface Services {
  /** HTTP webhooks → inbox rows. */
  readonly ingestion: Ingestion;
  /** Broker messages (amqp, kafka, nats sources) → inbox rows. */
  readonly brokerIngestion: BrokerIngestion;
  /** Pending rows of push sources → outbox rows. */
  readonly relay: Relay;
  /** Outbox rows → destinations. */
  readonly poller: OutboxPoller;
  /** One publisher per destination whose type has a factory. */
  readonly publishers: PublisherSet;
  /** Resolves when every source transform compiled; rejects with ConfigError otherwise. */
  ready(): Promise<void>;
  /** Closes the poller (waits for a drain in progress) and the publishers. The store stays open: it is the caller's. */
  close(): Promise<void>;
}

/**
 * Builds the ingestion, the broker ingestion, the relay, the outbox poller and the publishers from the validated
 * configuration over `store`, as both shells run them (docs/design.md §2: the functions and the local runtime are two
 * thin shells over the same services). Nothing touches the database here. Throws core's ConfigError, listing
 * every problem, when the configuration cannot be compiled (unknown transform function, bad route, unusable source
 * auth); publishers already created are closed first.
 */
export function createServices(
  config: QueueBoxConfig,
  store: StoreTables,
  options: ServicesOptions = {},
): Services {
  const base = { sources: inboxSources(config.sources), inbox: config.inbox, outbox: config.outbox };
  const transforms = options.inboxTransforms ? { transforms: options.inboxTransforms } : {};
  const publishers = createPublishers(config.destinations, options.publisherFactories ?? {});
  try {
    const ingestion = createIngestion({ ...base, ...transforms, store: store.inbox });
    const brokerIngestion = createBrokerIngestion({ ...base, ...transforms, store: store.inbox });
    const relay = createRelay({ ...base, store: store.inbox });
    const built = createOutboxPoller({
      store: store.outbox,
      publishers,
      routes: config.routes,
      destinations: config.destinations,
      ...(options.outboxTransforms ? { transforms: options.outboxTransforms } : {}),
      options: config.outbox,
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.onOutboxSettled ? { onSettled: options.onOutboxSettled } : {}),
    });
    const poller = options.publisherFactories === undefined ? refusingToDrain(built) : built;
    let closing: Promise<void> | undefined;
    return {
      ingestion,
      brokerIngestion,
      relay,
      poller,
      publishers,
      async ready() {
        await Promise.all([ingestion.ready(), brokerIngestion.ready()]);
      },
      close() {
        closing ??= (async () => {
          await poller.close();
          await publishers.close();
        })();
        return closing;
      },
    };
  } catch (error) {
    void publishers.close();
    throw error;
  }
}

/**
 * The poller of an assembly built without publisher factories: draining it would dead-letter every row (no
 * publisher for any destination), so it refuses instead; closing and waking pass through.
 */
function refusingToDrain(poller: OutboxPoller): OutboxPoller {
  return {
    drain: () =>
      Promise.reject(
        new Error('this QueueBox assembly was built without publisherFactories; it cannot drain the outbox'),
      ),
    close: () => poller.close(),
  };
}
