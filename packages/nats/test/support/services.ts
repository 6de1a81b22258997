import type { JetStreamManager } from '@nats-io/jetstream';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Store } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import type { Requirements } from '@queuebox/testing';
import { afterAll, beforeAll } from 'vitest';

/** What {@link useNatsAndStore} opens for the tests of one file. */
export interface NatsAndStore {
  /** A connection to the machine's NATS server. */
  readonly nc: NatsConnection;
  readonly jsm: JetStreamManager;
  /** A migrated PostgreSQL store on the file's schema (`db`, from `usePostgresSchema`). */
  readonly store: Store;
  /** Streams the tests made: deleted after the file. */
  readonly streams: string[];
}

/**
 * The real NATS server and a real PostgreSQL store for one test file's JetStream source tests: connected and
 * migrated before its tests, closed (and the streams in `streams` deleted) after them. Read the fields inside
 * tests, not at import: they are set by `beforeAll`.
 */
export function useNatsAndStore(
  needs: Requirements<'postgres' | 'nats'>,
  db: { readonly schema: { readonly name: string } } | undefined,
): NatsAndStore {
  const services = { streams: [] as string[] } as {
    nc: NatsConnection;
    jsm: JetStreamManager;
    store: Store;
    streams: string[];
  };
  beforeAll(async () => {
    if (!needs.available || !db) return;
    services.nc = await connect({ servers: needs.url.nats });
    services.jsm = await jetstreamManager(services.nc);
    services.store = await openPostgresStore({
      url: needs.url.postgres,
      schema: db.schema.name,
      poolSize: 4,
    });
    await services.store.migrate();
  });
  afterAll(async () => {
    if (!needs.available) return;
    for (const stream of services.streams) await services.jsm.streams.delete(stream).catch(() => undefined);
    await services.nc?.close();
    await services.store?.close();
  });
  return services;
}
