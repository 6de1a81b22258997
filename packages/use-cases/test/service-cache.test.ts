import { parseConfig, type QueueBoxConfig } from '@queuebox/config';
import { ConfigError, type Store, StoreError, StoreUnavailableError } from '@queuebox/core';
import { openStore } from '@queuebox/store';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createServiceCache, isStoreUnavailable, type ServiceCacheOptions } from '../src/service-cache.ts';

// The stores opened here are real `pg` stores; they connect lazily and these tests never run a statement, so no
// server is needed.
const config: QueueBoxConfig = parseConfig({
  database: { url: 'postgres://postgres@127.0.0.1:5432/test', schema: 'services_cache_unit' },
});

function counting() {
  const stores: Store[] = [];
  const closed: Store[] = [];
  return {
    stores,
    closed,
    open: async (database: QueueBoxConfig['database']) => {
      const store = await openStore(database);
      const tracked: Store = {
        ...store,
        close: async () => {
          closed.push(tracked);
          await store.close();
        },
      };
      stores.push(tracked);
      return tracked;
    },
  };
}

describe('isStoreUnavailable', () => {
  it('finds StoreUnavailableError itself and in a cause chain', () => {
    const outage = new StoreUnavailableError('gone');

    expect(isStoreUnavailable(outage)).toBe(true);
    expect(isStoreUnavailable(new Error('wrapped', { cause: outage }))).toBe(true);
  });

  it('answers false for other errors and non-errors', () => {
    expect(isStoreUnavailable(new StoreError('syntax'))).toBe(false);
    expect(isStoreUnavailable('text')).toBe(false);
    expect(isStoreUnavailable(undefined)).toBe(false);
  });
});

describe('createServiceCache', () => {
  it('loads the configuration, opens the store and builds the services once', async () => {
    let loads = 0;
    const stores = counting();
    const cache = createServiceCache({
      loadConfig: async () => {
        loads++;
        return config;
      },
      openStore: stores.open,
    });

    const first = await cache.get();
    const second = await cache.get();
    await cache.close();

    expect(second).toBe(first);
    expect(loads).toBe(1);
    expect(stores.stores).toHaveLength(1);
    expect(first.services.ingestion.routes).toEqual([]);
  });

  it('replaces the store and rebuilds the services after a StoreUnavailableError, keeping the configuration', async () => {
    let loads = 0;
    const replaced: unknown[] = [];
    const stores = counting();
    const cache = createServiceCache({
      loadConfig: async () => {
        loads++;
        return config;
      },
      openStore: stores.open,
      onReplace: (cause) => replaced.push(cause),
    });
    const first = await cache.get();
    const outage = new StoreUnavailableError('connection terminated');

    const marked = cache.fail(outage);
    const second = await cache.get();
    await cache.close();

    expect(marked).toBe(true);
    expect(second.store).not.toBe(first.store);
    expect(second.services).not.toBe(first.services);
    expect(stores.closed[0]).toBe(first.store);
    expect(replaced).toEqual([outage]);
    expect(loads).toBe(1);
  });

  it('does not wait on a store that is still opening when it is replaced; it closes that one once it opens', async () => {
    const stores = counting();
    let finishOpening: () => void = () => {};
    let opens = 0;
    const cache = createServiceCache({
      loadConfig: async () => config,
      closeTimeoutMs: 50,
      openStore: async (database) => {
        opens++;
        // The first store hangs while it opens (a database that went silent), until the test lets it finish.
        if (opens === 1) await new Promise<void>((resolve) => (finishOpening = resolve));
        return stores.open(database);
      },
    });
    const hanging = cache.get();
    await new Promise((resolve) => setImmediate(resolve));

    cache.markBroken(new StoreUnavailableError('no answer within the invocation'));
    const second = await cache.get();
    finishOpening();
    const first = await hanging;
    await new Promise((resolve) => setTimeout(resolve, 10));

    expect(opens).toBe(2);
    expect(second.store).not.toBe(first.store);
    expect(stores.closed).toEqual([first.store]);
    await cache.close();
  });

  it('keeps the store for errors that are not about availability', async () => {
    const stores = counting();
    const cache = createServiceCache({ loadConfig: async () => config, openStore: stores.open });
    const first = await cache.get();

    const marked = cache.fail(new StoreError('duplicate column'));
    const second = await cache.get();
    await cache.close();

    expect(marked).toBe(false);
    expect(second).toBe(first);
  });

  it('does not cache a failed configuration load: the next get tries again', async () => {
    let loads = 0;
    const cache = createServiceCache({
      loadConfig: async () => {
        loads++;
        if (loads === 1) throw new ConfigError([{ path: 'outbox.maxAttempts', message: 'must be ≥ 1' }]);
        return config;
      },
      openStore: counting().open,
    });

    await expect(cache.get()).rejects.toBeInstanceOf(ConfigError);
    const container = await cache.get();
    await cache.close();

    expect(container.config).toBe(config);
    expect(loads).toBe(2);
  });

  it('closes the store when the configuration cannot be compiled into services', async () => {
    const stores = counting();
    const broken = parseConfig({
      database: { url: 'postgres://postgres@127.0.0.1:5432/test' },
      destinations: {
        hook: { type: 'http', url: 'http://127.0.0.1:9/x', transform: { function: 'nowhere' } },
      },
      routes: [{ match: '#', destination: 'hook' }],
    });
    const cache = createServiceCache({ loadConfig: async () => broken, openStore: stores.open });

    await expect(cache.get()).rejects.toBeInstanceOf(ConfigError);
    expect(stores.closed).toEqual(stores.stores);
  });

  it('reloads an aged configuration: a rotated secret rebuilds store and services, an unchanged one keeps them', async () => {
    // Prepare: the database URL comes from a secret that is rotated between the second and third reload.
    let now = 0;
    let password = 'one';
    let loads = 0;
    const stores = counting();
    const reloads: number[] = [];
    const cache = createServiceCache({
      loadConfig: async () => {
        loads++;
        return parseConfig({
          database: {
            url: `postgres://postgres:${password}@127.0.0.1:5432/test`,
            schema: 'services_cache_unit',
          },
        });
      },
      openStore: stores.open,
      configMaxAgeMs: 300_000,
      now: () => now,
      onReload: () => reloads.push(now),
    });

    // Act
    const first = await cache.get();
    now += 299_999;
    const young = await cache.get();
    now += 1;
    const unchanged = await cache.get();
    password = 'two';
    now += 300_000;
    const rotated = await cache.get();
    await cache.close();

    // Assess
    expect(young).toBe(first);
    expect(unchanged).toBe(first);
    expect(loads).toBe(3);
    expect(rotated).not.toBe(first);
    expect(rotated.config.database.url).toContain(':two@');
    expect(reloads).toEqual([600_000]);
    expect(stores.stores).toHaveLength(2);
    expect(stores.closed).toContain(stores.stores[0]);
  });

  it('keeps serving when the reload fails, and tries again a minute later', async () => {
    // Prepare
    let now = 0;
    let failing = false;
    let loads = 0;
    const cache = createServiceCache({
      loadConfig: async () => {
        loads++;
        if (failing) throw new Error('Secrets Manager timed out');
        return config;
      },
      openStore: counting().open,
      configMaxAgeMs: 300_000,
      now: () => now,
    });

    // Act
    const first = await cache.get();
    failing = true;
    now += 300_000;
    const during = await cache.get();
    now += 59_999;
    await cache.get();
    now += 1;
    await cache.get();
    await cache.close();

    // Assess
    expect(during).toBe(first);
    expect(loads).toBe(3);
  });

  it('reads the secrets anew on every reload, so a cached secret cannot make a rotation wait for two ages', async () => {
    // Prepare
    let now = 0;
    const reads: (boolean | undefined)[] = [];
    const cache = createServiceCache({
      loadConfig: async (read) => {
        reads.push(read?.freshSecrets);
        return config;
      },
      openStore: counting().open,
      configMaxAgeMs: 300_000,
      now: () => now,
    });

    // Act
    await cache.get();
    now += 300_000;
    await cache.get();
    await cache.close();

    // Assess: the first load may use the cache (a cold start); the reload may not
    expect(reads).toEqual([undefined, true]);
  });

  it('reloads at once, secrets read anew, when the database refused the credentials; at most every 15 s', async () => {
    // Prepare: the database password rotated; the warm container still holds the old URL.
    let now = 0;
    let password = 'old';
    const reads: (boolean | undefined)[] = [];
    const failed: unknown[] = [];
    const stores = counting();
    const cache = createServiceCache({
      loadConfig: async (read) => {
        reads.push(read?.freshSecrets);
        return parseConfig({
          database: {
            url: `postgres://postgres:${password}@127.0.0.1:5432/test`,
            schema: 'services_cache_unit',
          },
        });
      },
      openStore: stores.open,
      configMaxAgeMs: 300_000,
      now: () => now,
      onReloadFailed: (error) => failed.push(error),
    });
    const refused = () =>
      new StoreUnavailableError('The database refused the credentials', {
        context: { credentialsRefused: true },
      });

    // Act
    const first = await cache.get();
    password = 'new';
    const marked = cache.fail(new Error('inbox request failed', { cause: refused() }));
    now += 1_000;
    const second = await cache.get();
    cache.fail(refused());
    now += 1_000;
    const third = await cache.get();
    cache.fail(refused());
    now += 14_000;
    await cache.get();
    await cache.close();

    // Assess
    expect(marked).toBe(true);
    expect(second).not.toBe(first);
    expect(second.config.database.url).toContain(':new@');
    // Within 15 s of that reload, a second refusal replaces the store but reads nothing again.
    expect(third).not.toBe(second);
    expect(reads).toEqual([undefined, true, true]);
    expect(failed).toEqual([]);
  });

  it('says when a reload failed, and keeps the configuration in use', async () => {
    // Prepare
    let now = 0;
    let failing = false;
    const failed: unknown[] = [];
    const cache = createServiceCache({
      loadConfig: async () => {
        if (failing) throw new ConfigError([{ path: 'sources.partner.auth.secrets[0]', message: 'no text' }]);
        return config;
      },
      openStore: counting().open,
      configMaxAgeMs: 300_000,
      now: () => now,
      onReloadFailed: (error) => failed.push(error),
    });

    // Act
    const first = await cache.get();
    failing = true;
    now += 300_000;
    const during = await cache.get();
    await cache.close();

    // Assess
    expect(during).toBe(first);
    expect(failed).toEqual([expect.any(ConfigError)]);
  });

  describe('with the wall clock stepped back an hour (NTP, a resumed VM)', () => {
    afterEach(() => {
      vi.useRealTimers();
    });
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    /** Only `Date` faked (performance.now runs on), and a cache that records each load's `freshSecrets`. */
    const steppingCache = (
      options: Pick<ServiceCacheOptions, 'configMaxAgeMs' | 'credentialsReloadIntervalMs'>,
    ) => {
      vi.useFakeTimers({ toFake: ['Date'], now: Date.parse('2026-12-07T05:00:00Z') });
      const reads: (boolean | undefined)[] = [];
      const cache = createServiceCache({
        loadConfig: async (read) => {
          reads.push(read?.freshSecrets);
          return config;
        },
        openStore: counting().open,
        ...options,
      });
      return { reads, cache };
    };

    it('reloads an aged configuration after configMaxAgeMs of the monotonic clock (the default)', async () => {
      // Prepare: only Date is faked (performance.now runs on); configMaxAgeMs 200 ms
      const { reads, cache } = steppingCache({ configMaxAgeMs: 200 });

      // Act
      await cache.get();
      vi.setSystemTime(Date.now() - 3_600_000);
      await sleep(300);
      await cache.get();
      await cache.close();

      // Assess: reloaded (on Date.now it waited for the hour first)
      expect(reads).toEqual([undefined, true]);
    });

    it('reloads again for refused credentials after credentialsReloadIntervalMs of the monotonic clock', async () => {
      // Prepare
      const { reads, cache } = steppingCache({ configMaxAgeMs: 300_000, credentialsReloadIntervalMs: 100 });
      const refused = () =>
        new StoreUnavailableError('The database refused the credentials', {
          context: { credentialsRefused: true },
        });

      // Act: a refusal reloads; the clock steps back; another refusal 200 ms later
      await cache.get();
      cache.fail(refused());
      await cache.get();
      vi.setSystemTime(Date.now() - 3_600_000);
      await sleep(200);
      cache.fail(refused());
      await cache.get();
      await cache.close();

      // Assess: both refusals reloaded (on Date.now the second waited for the hour)
      expect(reads).toEqual([undefined, true, true]);
    });
  });
});
