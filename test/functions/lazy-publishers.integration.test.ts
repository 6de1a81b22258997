import { ConfigError, type OutgoingMessage, type Publisher } from '@queuebox/core';
import type { ServiceCache, ServiceCacheOptions } from '@queuebox/use-cases';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createShell } from '../../functions/lambda-shell/lambda.ts';
import {
  lazyPublisherFactories,
  type PublisherFactoryLoader,
} from '../../functions/lambda-shell/lazy-publishers.ts';
import { cleanup } from '../local/support.ts';
import { functionConfigYaml, writeConfigFile } from './support.ts';

const aMessage: OutgoingMessage = { id: 'm-1', topic: 't', key: null, payload: {}, headers: {}, attempt: 0 };

/** A stand-in for a broker package: its factory checks `url` and records what it created and published. */
function aPackage() {
  const loads: number[] = [];
  const published: string[] = [];
  let closed = 0;
  const factory = (name: string, options: { readonly type: string }): Publisher => {
    if (typeof (options as { url?: unknown }).url !== 'string')
      throw new ConfigError([{ path: `destinations.${name}.url`, message: 'is required' }]);
    return {
      publish: async (message) => {
        published.push(`${name}:${message.id}`);
        return { kind: 'sent' };
      },
      close: async () => {
        closed++;
      },
    };
  };
  const loader: PublisherFactoryLoader = async () => {
    loads.push(Date.now());
    return factory;
  };
  return {
    loader,
    loads,
    published,
    get closed() {
      return closed;
    },
  };
}

describe('lazyPublisherFactories', () => {
  it('loads only the packages of the configured destination types, once each', async () => {
    // Prepare
    const kafka = aPackage();
    const nats = aPackage();
    const lazy = lazyPublisherFactories({ kafka: kafka.loader, nats: nats.loader });

    // Act
    await lazy.prepare({ a: { type: 'kafka' }, b: { type: 'kafka' }, c: { type: 'http' } });
    await lazy.prepare({ a: { type: 'kafka' } });

    // Assess
    expect(kafka.loads).toHaveLength(1);
    expect(nats.loads).toHaveLength(0);
    expect(Object.keys(lazy.factories).sort()).toEqual(['kafka', 'nats']);
  });

  it("is the package's own factory once prepared: it checks the destination's fields when called", async () => {
    // Prepare
    const kafka = aPackage();
    const lazy = lazyPublisherFactories({ kafka: kafka.loader });
    await lazy.prepare({ a: { type: 'kafka' } });

    // Act
    const publisher = lazy.factories.kafka?.('a', { type: 'kafka', url: 'k://1' } as { type: string });
    const outcome = await publisher?.publish(aMessage);

    // Assess
    expect(outcome).toEqual({ kind: 'sent' });
    expect(kafka.published).toEqual(['a:m-1']);
    expect(() => lazy.factories.kafka?.('b', { type: 'kafka' })).toThrow(ConfigError);
  });

  it('without prepare, answers a publisher that loads the package on its first publish and delegates to it', async () => {
    // Prepare
    const kafka = aPackage();
    const lazy = lazyPublisherFactories({ kafka: kafka.loader });

    // Act
    const publisher = lazy.factories.kafka?.('a', { type: 'kafka', url: 'k://1' } as { type: string });
    const loadedBefore = kafka.loads.length;
    const outcomes = [
      await publisher?.publish(aMessage),
      await publisher?.publish({ ...aMessage, id: 'm-2' }),
    ];
    await publisher?.close();

    // Assess
    expect(loadedBefore).toBe(0);
    expect(outcomes).toEqual([{ kind: 'sent' }, { kind: 'sent' }]);
    expect(kafka.loads).toHaveLength(1);
    expect(kafka.published).toEqual(['a:m-1', 'a:m-2']);
    expect(kafka.closed).toBe(1);
  });

  it('closes an unused deferred publisher without loading anything, and tries a failed load again', async () => {
    // Prepare
    let attempts = 0;
    const kafka = aPackage();
    const lazy = lazyPublisherFactories({
      kafka: async () => {
        attempts++;
        if (attempts === 1) throw new Error('import failed');
        return kafka.loader();
      },
    });
    const unused = lazy.factories.kafka?.('a', { type: 'kafka', url: 'k://1' } as { type: string });
    const used = lazy.factories.kafka?.('b', { type: 'kafka', url: 'k://1' } as { type: string });

    // Act
    await unused?.close();
    const attemptsAfterClose = attempts;
    const failure = await used?.publish(aMessage).catch((error: Error) => error.message);
    const retry = await used?.publish(aMessage);

    // Assess
    expect(attemptsAfterClose).toBe(0);
    expect(failure).toBe('import failed');
    expect(retry).toEqual({ kind: 'sent' });
    expect(attempts).toBe(2);
  });
});

describe('createShell with prepare', () => {
  afterAll(cleanup);

  it("gives the cache a loader that runs the function's preparation over each configuration it loads", async () => {
    // Prepare
    const file = await writeConfigFile(
      functionConfigYaml({
        databaseUrl: 'postgres://nobody@127.0.0.1:1/none',
        schema: 'unused',
        receiverUrl: 'http://127.0.0.1:1/',
      }),
    );
    const aws = {
      invoker: { invokeAsync: async () => undefined } as never,
      scheduler: { createSchedule: async () => undefined } as never,
    };
    let loadConfig: ServiceCacheOptions['loadConfig'];
    const prepared: unknown[] = [];
    createShell(
      {
        ...aws,
        createCache: (options) => {
          loadConfig = options.loadConfig;
          return {} as ServiceCache;
        },
      },
      {
        prepare: async (config) => {
          prepared.push(Object.keys(config.destinations));
        },
      },
    );
    let withoutPrepare: ServiceCacheOptions['loadConfig'] | 'unset' = 'unset';
    createShell({
      ...aws,
      createCache: (options) => {
        withoutPrepare = options.loadConfig;
        return {} as ServiceCache;
      },
    });
    vi.stubEnv('QUEUEBOX_CONFIG', file);

    // Act
    try {
      await loadConfig?.();
      await loadConfig?.({ freshSecrets: true });
    } finally {
      vi.unstubAllEnvs();
    }

    // Assess: the default loader (the cache's own) when the function prepares nothing.
    expect(prepared).toEqual([['receiver'], ['receiver']]);
    expect(withoutPrepare).toBeUndefined();
  });
});
