import type { QueueBoxConfig } from '@queuebox/config';
import { ConfigError, type ConfigIssue } from '@queuebox/core';
import { compileTransform, createBrokerIngestion, createIngestion, createRelay } from '@queuebox/inbox';
import {
  checkHttpDestination,
  createOutboxPoller,
  createPublishers,
  createStandardWebhooksSigner,
} from '@queuebox/outbox';
import type { ServicesOptions, StoreTables } from './services.ts';
import { inboxSources } from './sources.ts';

/** Options of {@link checkServices}: the transform functions the assembly would be given. */
export type CheckServicesOptions = Pick<ServicesOptions, 'outboxTransforms' | 'inboxTransforms'>;

/** A store whose every method throws: the compilation below must never reach it. */
function unusableTables(): StoreTables {
  const unusable = new Proxy(
    {},
    {
      get: (_target, property) =>
        // Not a thenable, so `await` and promise helpers can hold it.
        property === 'then'
          ? undefined
          : () => {
              throw new Error(`checkServices has no store (it was asked for ${String(property)})`);
            },
    },
  );
  return { inbox: unusable, outbox: unusable } as unknown as StoreTables;
}

/** Runs `build`, and collects the issues of the ConfigError it throws. */
function collect(issues: ConfigIssue[], build: () => void): void {
  try {
    build();
  } catch (error) {
    if (error instanceof ConfigError) issues.push(...error.issues);
    else throw error;
  }
}

/**
 * Compiles the configuration as {@link createServices} does — the ingestion (source auth, JSON paths, transforms,
 * paths), the broker ingestion, the relay (topic templates), the outbox poller (route patterns, destinations,
 * route and destination transforms) and the http destinations' options and signing secrets — without a store,
 * without a publisher and without connecting to anything, and returns every problem at once (`[]` when the
 * runtime would start). `createServices` stops at the first part that fails and leaves source JSONata to its
 * asynchronous `ready()`, so a start reports these problems in rounds; this is what `queuebox config check` runs.
 */
export async function checkServices(
  config: QueueBoxConfig,
  options: CheckServicesOptions = {},
): Promise<ConfigIssue[]> {
  const store = unusableTables();
  const sources = inboxSources(config.sources);
  const base = { sources, inbox: config.inbox, outbox: config.outbox };
  const transforms = options.inboxTransforms ? { transforms: options.inboxTransforms } : {};
  const found: ConfigIssue[] = [];
  collect(found, () => createIngestion({ ...base, ...transforms, store: store.inbox }));
  collect(found, () => createBrokerIngestion({ ...base, ...transforms, store: store.inbox }));
  collect(found, () => createRelay({ ...base, store: store.inbox }));
  let poller: { close(): Promise<void> } | undefined;
  collect(found, () => {
    poller = createOutboxPoller({
      store: store.outbox,
      publishers: createPublishers({}, {}),
      routes: config.routes,
      destinations: config.destinations,
      ...(options.outboxTransforms ? { transforms: options.outboxTransforms } : {}),
      options: config.outbox,
    });
  });
  await poller?.close();
  for (const [name, destination] of Object.entries(config.destinations)) {
    if (destination.type !== 'http') continue;
    found.push(...checkHttpDestination(name, destination));
    const signing = destination.signing;
    if (signing !== undefined) {
      collect(found, () => {
        createStandardWebhooksSigner(signing.secrets, `destinations.${name}.signing.secrets`);
      });
    }
  }

  // A source's JSONata compiles asynchronously (the engine is loaded on first use): each one is compiled here, so
  // that all of them are reported, not the first that `ready()` rejects with.
  const compiled = await Promise.all(
    Object.entries(sources).map(async ([name, source]): Promise<ConfigIssue[]> => {
      if (!source.transform) return [];
      try {
        await compileTransform(
          source.transform,
          { functions: options.inboxTransforms ?? {} },
          `sources.${name}.transform`,
        );
        return [];
      } catch (error) {
        if (error instanceof ConfigError) return [...error.issues];
        throw error;
      }
    }),
  );
  const asynchronous = compiled.flat();
  // An unknown source function is reported by the ingestion too; its own compile says it once per source.
  const covered = new Set(asynchronous.map((issue) => issue.path));
  const issues = [...found.filter((issue) => !covered.has(issue.path)), ...asynchronous];
  const seen = new Set<string>();
  return issues.filter((issue) => {
    const key = `${issue.path}\n${issue.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
