import type { Publisher } from '@queuebox/core';
import type { PublisherFactory } from '@queuebox/outbox';

/** Imports a package and answers its publisher factory, e.g. `async () => (await import('@queuebox/kafka')).kafkaPublisherFactory`. */
export type PublisherFactoryLoader = () => Promise<PublisherFactory>;

/** Publisher factories whose packages are imported only for a configuration that has a destination of their type. */
export interface LazyPublisherFactories {
  /** One factory per type of the loaders, for `createServices`' `publisherFactories`. */
  readonly factories: Readonly<Record<string, PublisherFactory>>;
  /**
   * Imports the package of every type that one of `destinations` has (once; the others stay unloaded), so that its
   * factory then runs as the package's own: at once, checking the destination's fields when the services are built.
   */
  prepare(destinations: Readonly<Record<string, { readonly type: string }>>): Promise<void>;
}

/**
 * Publisher factories over packages loaded on demand (an outside audit: outbox-tick evaluated kafkajs, the NATS
 * client and amqplib at every cold start whatever its destinations). A factory whose package `prepare` loaded is the
 * package's own. One called before (services built past `prepare`: a test's own configuration loader) answers a
 * publisher that imports the package on its first publish and then creates the real one, so the destination works
 * all the same; only a problem the package's factory finds in the destination's fields then fails that publish
 * rather than the services' construction.
 */
export function lazyPublisherFactories(
  loaders: Readonly<Record<string, PublisherFactoryLoader>>,
): LazyPublisherFactories {
  const loaded = new Map<string, PublisherFactory>();
  const loading = new Map<string, Promise<PublisherFactory>>();
  const load = (type: string, loader: PublisherFactoryLoader): Promise<PublisherFactory> => {
    let pending = loading.get(type);
    if (pending === undefined) {
      pending = loader().then(
        (factory) => {
          loaded.set(type, factory);
          return factory;
        },
        (error: unknown) => {
          loading.delete(type);
          throw error;
        },
      );
      loading.set(type, pending);
    }
    return pending;
  };
  const factories: Record<string, PublisherFactory> = {};
  for (const [type, loader] of Object.entries(loaders)) {
    factories[type] = (name, options) => {
      const factory = loaded.get(type);
      if (factory !== undefined) return factory(name, options);
      return deferredPublisher(() => load(type, loader).then((later) => later(name, options)));
    };
  }
  return {
    factories,
    async prepare(destinations) {
      const types = new Set(Object.values(destinations).map((destination) => destination.type));
      await Promise.all(
        [...types]
          .filter((type) => Object.hasOwn(loaders, type))
          .map((type) => load(type, loaders[type] as PublisherFactoryLoader)),
      );
    },
  };
}

/** A publisher that creates the real one on its first publish (a failed creation is tried again on the next). */
function deferredPublisher(create: () => Promise<Publisher>): Publisher {
  let real: Promise<Publisher> | undefined;
  const publisher = (): Promise<Publisher> => {
    real ??= create().catch((error: unknown) => {
      real = undefined;
      throw error;
    });
    return real;
  };
  return {
    async publish(message, signal, options) {
      return (await publisher()).publish(message, signal, options);
    },
    async close() {
      const created = await real?.catch(() => undefined);
      await created?.close();
    },
  };
}
