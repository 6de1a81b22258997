/**
 * @queuebox/testing: what the integration tests share. Test-only and private: no shipped package depends on it,
 * and test/lanes.test.ts keeps it out of the unit lane (everything here reaches a service).
 */

export * from './fault-proxy.ts';
export * from './message-ids.ts';
export * from './postgres-store.ts';
export * from './postgres-url.ts';
export * from './recorders.ts';
export * from './requirements.ts';
export * from './schema.ts';
export * from './services.ts';
