import { parseConfig, type QueueBoxConfig } from '@queuebox/config';
import { defaultPublisherFactories } from '@queuebox/outbox';
import { openStore } from '@queuebox/store';
import { describe, expect, it } from 'vitest';
import { createServices } from '../src/services.ts';

// A real `pg` store; it connects lazily and these tests run no statement, so no server is needed.
const config: QueueBoxConfig = parseConfig({
  database: { url: 'postgres://postgres@127.0.0.1:5432/test', schema: 'services_unit' },
  destinations: { hook: { type: 'http', url: 'https://hooks.example/in' } },
  routes: [{ match: '#', destination: 'hook' }],
});

describe('createServices', () => {
  it('builds no publisher without factories, and its poller refuses to drain instead of dead-lettering rows', async () => {
    // Prepare
    const store = await openStore(config.database);
    try {
      // Act
      const services = createServices(config, store);

      // Assess
      expect(services.publishers.get('hook')).toBeUndefined();
      await expect(services.poller.drain({ deadline: Date.now() + 1_000 })).rejects.toThrow(
        /built without publisherFactories/,
      );
      await services.close();
    } finally {
      await store.close();
    }
  });

  it('builds the publishers of the factories it is given', async () => {
    // Prepare
    const store = await openStore(config.database);
    try {
      // Act
      const services = createServices(config, store, { publisherFactories: defaultPublisherFactories });

      // Assess
      expect(services.publishers.get('hook')).toBeDefined();
      await services.close();
    } finally {
      await store.close();
    }
  });
});
