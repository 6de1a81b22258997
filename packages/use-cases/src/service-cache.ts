import { loadConfig, type QueueBoxConfig } from '@queuebox/config';
import { isCredentialsRefused, type Store, StoreUnavailableError } from '@queuebox/core';
import { openStore } from '@queuebox/store';
import { createServices, type Services, type ServicesOptions } from './services.ts';

/** What one function invocation works with. */
export interface Container {
  readonly config: QueueBoxConfig;
  readonly store: Store;
  readonly services: Services;
}

/** Options of {@link createServiceCache}. */
export interface ServiceCacheOptions {
  /**
   * Loads the validated configuration; `freshSecrets` asks for the `secret://` values anew, past the resolver's cache
   * (a reload). Default `loadConfig()` (`QUEUEBOX_CONFIG` or `./queuebox.yaml`, plus `QUEUEBOX_*`).
   */
  readonly loadConfig?: (options?: { readonly freshSecrets?: boolean }) => Promise<QueueBoxConfig>;
  /** Opens the store. Default `openStore` of `@queuebox/store` (a `pg` pool connects lazily). Never migrates. */
  readonly openStore?: (database: QueueBoxConfig['database']) => Promise<Store>;
  /** Options of `createServices`, or a function of the configuration that answers them. Default none. */
  readonly services?: ServicesOptions | ((config: QueueBoxConfig) => ServicesOptions);
  /** Called when a broken store is being replaced, with the error that broke it (for one log line). */
  readonly onReplace?: (cause: unknown) => void;
  /** Longest wait for the old store and services to close before the new ones open anyway. Default 2000 ms. */
  readonly closeTimeoutMs?: number;
  /**
   * After this long, the next `get()` loads the configuration again (its `secret://` values read anew, past the
   * resolver's cache): when it changed (a rotated secret, a new database URL), the store and services are rebuilt
   * over it; when it did not, they are kept. A failed reload keeps the current ones (`onReloadFailed`) and is tried
   * again a minute later. Default: never (the Lambda shell sets 5 minutes).
   */
  readonly configMaxAgeMs?: number;
  /** Told when a reload changed the configuration (for one log line). */
  readonly onReload?: () => void;
  /**
   * Told when a reload failed (a secret that cannot be read or no longer fits, say): the current configuration is
   * kept, and a new container would fail to start with it. For one log line. Default: nothing.
   */
  readonly onReloadFailed?: (error: unknown) => void;
  /**
   * Shortest time between two reloads caused by the database refusing the credentials (see
   * {@link ServiceCache.fail}). Default 15000 ms.
   */
  readonly credentialsReloadIntervalMs?: number;
  /**
   * Milliseconds of a monotonic clock, for the ages above. Not the wall clock: stepped back an hour (NTP, a resumed
   * VM), it kept the configuration from reloading for that hour, refused credentials included. Default
   * `performance.now`.
   */
  readonly now?: () => number;
}

/** A per-container cache of configuration, store and services (for a Lambda function's module scope). */
export interface ServiceCache {
  /**
   * The container's configuration, store and services. The first call loads the configuration, opens the store and
   * builds the services; later calls answer the same ones, unless {@link ServiceCache.fail} marked the store
   * broken: then the old store and services are closed and new ones are built over a newly opened store (the
   * configuration is kept). A failed load or open is not cached; the next call tries again.
   */
  get(): Promise<Container>;
  /**
   * Reports an error an invocation met. When it is core's `StoreUnavailableError` (or has one in its `cause`
   * chain), the store is marked broken and the next `get()` replaces it. Answers whether it did. When the database
   * refused the credentials (core's `isCredentialsRefused`: a rotated password), the next `get()` also loads the
   * configuration again with its secrets read anew, at most once per `credentialsReloadIntervalMs`, instead of
   * waiting for `configMaxAgeMs`.
   */
  fail(error: unknown): boolean;
  /**
   * Marks the store broken whatever the cause, e.g. when a service answered "database unavailable" (the ingestion's
   * 503) instead of throwing. The next `get()` replaces it. Does nothing before the first `get()`.
   */
  markBroken(cause: unknown): void;
  /** True between a `fail` that marked the store broken and the `get()` that replaces it. */
  readonly broken: boolean;
  /** Closes the services and the store; the next `get()` starts over (configuration included). */
  close(): Promise<void>;
}

/** Whether `error`, or an error in its `cause` chain, is core's `StoreUnavailableError`. */
export function isStoreUnavailable(error: unknown): boolean {
  const seen = new Set<unknown>();
  for (let current = error; current instanceof Error && !seen.has(current); current = current.cause) {
    if (current instanceof StoreUnavailableError) return true;
    seen.add(current);
  }
  return false;
}

async function settleWithin(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    work.catch(() => undefined),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * Creates the per-container cache of the Lambda functions: configuration loaded once, store opened once, services
 * built once, and reused by every invocation the container serves. A store that failed with
 * `StoreUnavailableError` is replaced on the next invocation instead of failing every later one (a failover, a
 * proxy that dropped its connections); the services are rebuilt over the new store.
 */
export function createServiceCache(options: ServiceCacheOptions = {}): ServiceCache {
  const load = options.loadConfig ?? ((read) => loadConfig(read?.freshSecrets ? { freshSecrets: true } : {}));
  const credentialsReloadIntervalMs = options.credentialsReloadIntervalMs ?? 15_000;
  const open = options.openStore ?? openStore;
  const closeTimeoutMs = options.closeTimeoutMs ?? 2000;
  const now = options.now ?? (() => performance.now());
  let config: Promise<QueueBoxConfig> | undefined;
  let current: Promise<Container> | undefined;
  let brokenBy: { readonly cause: unknown } | undefined;
  /** When the configuration in use was loaded (or a failed reload was last tried). */
  let loadedAt = 0;
  /** The database refused the credentials since the last reload: reload now (see `fail`). */
  let credentialsRefused = false;
  /** When a reload for refused credentials was last made. */
  let credentialsReloadAt = Number.NEGATIVE_INFINITY;

  /**
   * Reloads an aged configuration, or one whose credentials the database refused, with its secrets read anew (a
   * cached secret would be as old as the configuration: a rotation would be seen only after two ages); a changed
   * one marks the container for replacement.
   */
  async function refresh(): Promise<void> {
    if (current === undefined || config === undefined) return;
    const forCredentials = credentialsRefused && now() - credentialsReloadAt >= credentialsReloadIntervalMs;
    const aged = options.configMaxAgeMs !== undefined && now() - loadedAt >= options.configMaxAgeMs;
    if (!forCredentials && !aged) return;
    if (forCredentials) {
      credentialsRefused = false;
      credentialsReloadAt = now();
    }
    const old = await config.catch(() => undefined);
    let fresh: QueueBoxConfig;
    try {
      fresh = await load({ freshSecrets: true });
    } catch (error) {
      // Keep serving with what works; try again in a minute rather than on every invocation.
      const maxAge = options.configMaxAgeMs ?? 0;
      loadedAt = Math.max(loadedAt, now() - maxAge + 60_000);
      try {
        options.onReloadFailed?.(error);
      } catch {
        // A logging hook must not break the cache.
      }
      return;
    }
    loadedAt = now();
    if (JSON.stringify(fresh) === JSON.stringify(old)) return;
    config = Promise.resolve(fresh);
    brokenBy ??= { cause: new Error('the configuration changed (a rotated secret?)') };
    options.onReload?.();
  }

  const servicesOptions = (loaded: QueueBoxConfig): ServicesOptions =>
    typeof options.services === 'function' ? options.services(loaded) : (options.services ?? {});

  async function build(): Promise<Container> {
    if (config === undefined) {
      config = load();
      loadedAt = now();
    }
    let loaded: QueueBoxConfig;
    try {
      loaded = await config;
    } catch (error) {
      config = undefined;
      throw error;
    }
    const store = await open(loaded.database);
    try {
      const services = createServices(loaded, store, servicesOptions(loaded));
      await services.ready();
      return { config: loaded, store, services };
    } catch (error) {
      await settleWithin(store.close(), closeTimeoutMs);
      throw error;
    }
  }

  /**
   * Closes a container's services and store, waiting at most `closeTimeoutMs`; one still being built (its store
   * connecting to a silent database) is closed in the background whenever it is ready.
   */
  async function retire(container: Promise<Container>): Promise<void> {
    const closed = container.then(
      (old) => old.services.close().finally(() => old.store.close()),
      () => undefined,
    );
    await settleWithin(closed, closeTimeoutMs);
  }

  return {
    async get() {
      await refresh();
      if (brokenBy && current) {
        const { cause } = brokenBy;
        brokenBy = undefined;
        const old = current;
        current = undefined;
        options.onReplace?.(cause);
        await retire(old);
      }
      current ??= build();
      const building = current;
      try {
        return await building;
      } catch (error) {
        if (current === building) current = undefined;
        throw error;
      }
    },
    fail(error) {
      if (!isStoreUnavailable(error) || current === undefined) return false;
      brokenBy = { cause: error };
      if (isCredentialsRefused(error)) credentialsRefused = true;
      return true;
    },
    markBroken(cause) {
      if (current !== undefined) brokenBy = { cause };
    },
    get broken() {
      return brokenBy !== undefined;
    },
    async close() {
      const old = current;
      current = undefined;
      config = undefined;
      brokenBy = undefined;
      if (old) await retire(old);
    },
  };
}
