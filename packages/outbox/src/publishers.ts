import { ConfigError, type ConfigIssue, type Publisher } from '@queuebox/core';
import { createHttpPublisher } from './http-publisher.ts';
import type { DestinationOptions } from './options.ts';

/** Builds the publisher of one destination; throws `ConfigError` for unusable options. */
export type PublisherFactory = (name: string, options: DestinationOptions) => Publisher;

/** Publishers by destination name. */
export interface PublisherSet {
  /** The destination's publisher, or undefined when no factory supports its type. */
  get(destination: string): Publisher | undefined;
  /** Closes every publisher (in-flight requests finish first). */
  close(): Promise<void>;
}

/** The factories this package provides: `http`. Broker packages add theirs (`rabbitmq`, `kafka`, `nats`). */
export const defaultPublisherFactories: Readonly<Record<string, PublisherFactory>> = {
  http: (name, options) => createHttpPublisher({ ...options, name }),
};

/**
 * One publisher per destination whose `type` has a factory (e.g. {@link defaultPublisherFactories}: `http`). A
 * destination of another type gets none, and the poller dead-letters its rows as the seed asks. Every factory error
 * is collected into one `ConfigError`. No default for `factories`, so that code which never names the HTTP
 * publisher leaves it (and its HTTP client) out of a bundle.
 */
export function createPublishers(
  destinations: Readonly<Record<string, DestinationOptions>>,
  factories: Readonly<Record<string, PublisherFactory>>,
): PublisherSet {
  const publishers = new Map<string, Publisher>();
  const issues: ConfigIssue[] = [];
  for (const [name, options] of Object.entries(destinations)) {
    const factory = Object.hasOwn(factories, options.type) ? factories[options.type] : undefined;
    if (factory === undefined) continue;
    try {
      publishers.set(name, factory(name, options));
    } catch (error) {
      if (error instanceof ConfigError) issues.push(...error.issues);
      else throw error;
    }
  }
  if (issues.length > 0) {
    void Promise.allSettled([...publishers.values()].map((p) => p.close()));
    throw new ConfigError(issues);
  }
  return {
    get: (destination) => publishers.get(destination),
    async close() {
      await Promise.allSettled([...publishers.values()].map((p) => p.close()));
    },
  };
}
