import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RowId, Store } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import { dropSchemasAfterPass, testPostgresUrl } from '@queuebox/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createOutboxPoller, type OutboxPoller } from '../src/poller.ts';
import { createPublishers, defaultPublisherFactories, type PublisherSet } from '../src/publishers.ts';
import { type HttpReceiver, startHttpReceiver } from './support/http-receiver.ts';
import { type PgProxy, startPgProxy } from './support/pg-proxy.ts';

// A stop (close) during a short outage of the database: the settles of rows already delivered are tried again
// until the database is back (within the batch's deadline), not abandoned to their lease, to be delivered again.

const SCHEMA = `lfix_poller_stop_${randomBytes(4).toString('hex')}`;
dropSchemasAfterPass(() => [SCHEMA]);

let direct: Store;
let proxied: Store;
let proxy: PgProxy;
let receiver: HttpReceiver;
const publisherSets: PublisherSet[] = [];

beforeAll(async () => {
  direct = await openPostgresStore({ url: testPostgresUrl(), schema: SCHEMA });
  await direct.migrate();
  proxy = await startPgProxy(testPostgresUrl());
  proxied = await openPostgresStore({ url: proxy.url, schema: SCHEMA });
  receiver = await startHttpReceiver();
});

afterEach(async () => {
  await proxy.up();
  await Promise.all(publisherSets.splice(0).map((set) => set.close()));
  receiver.reset();
});

afterAll(async () => {
  await proxied?.close().catch(() => {});
  proxy?.close();
  await direct?.close();
  await receiver?.close();
});

function poller(): OutboxPoller {
  const destinations = { hooks: { type: 'http' as const, url: receiver.url, timeoutMs: 2000 } };
  const publishers = createPublishers(destinations, defaultPublisherFactories);
  publisherSets.push(publishers);
  return createOutboxPoller({
    store: proxied.outbox,
    publishers,
    routes: [{ match: 'stop.#', destination: 'hooks' }],
    destinations,
    options: {
      batchSize: 10,
      claimTimeoutMs: 30_000,
      maxAttempts: 5,
      backoff: { baseMs: 100, maxMs: 10_000 },
      settleReserveMs: 200,
    },
  });
}

/** Inserts `n` rows (directly), has `p` drain them, and answers once the receiver holds every request. */
async function deliveringWhileHeld(p: OutboxPoller, n: number, deadlineMs: number) {
  const release: (() => void)[] = [];
  receiver.handle((_request, response) => {
    release.push(() => response.writeHead(200).end('ok'));
  });
  const ids = await direct.outbox.insert(
    Array.from({ length: n }, (_, i) => ({
      topic: 'stop.x',
      key: null,
      payload: { i },
      headers: {},
      maxAttempts: 5,
    })),
  );
  const drained = p.drain({ deadline: Date.now() + deadlineMs }).then(
    () => undefined,
    (error: unknown) => error,
  );
  while (receiver.requests.length < n) await sleep(10);
  const answer = () => {
    for (const one of release.splice(0)) one();
  };
  return { ids, drained, answer };
}

const statesOf = async (ids: readonly RowId[]) =>
  (await Promise.all(ids.map((id) => direct.outbox.get(id)))).map((row) => row?.state);

describe('closing the outbox poller while the database is briefly unavailable', () => {
  it('settles the rows delivered during the outage once the database is back, and reports a clean close', async () => {
    // Prepare: three deliveries held by the receiver; the database goes away, then the stop begins.
    const p = poller();
    const { ids, drained, answer } = await deliveringWhileHeld(p, 3, 20_000);
    proxy.down();
    const closed = p.close();
    answer();
    // Act: the database comes back 1.5 s later.
    await sleep(1_500);
    await proxy.up();
    await closed;
    const report = p.closeReport?.();
    await drained;
    // Assess: every delivered row is sent (not processing until its lease, to go out again); nothing left.
    expect(await statesOf(ids)).toEqual(['Sent', 'Sent', 'Sent']);
    expect(receiver.requests).toHaveLength(3);
    expect(report).toEqual({ unsettled: 0, unsettledSent: 0 });
  });

  it('gives up at the batch deadline when the database stays away, and counts the delivered rows left unsettled', async () => {
    // Prepare: a drain of 3 s; the database never comes back within it.
    const p = poller();
    const { ids, drained, answer } = await deliveringWhileHeld(p, 2, 3_000);
    proxy.down();
    const closedAt = Date.now();
    const closed = p.close();
    answer();
    // Act
    await closed;
    const took = Date.now() - closedAt;
    const report = p.closeReport?.();
    await drained;
    await proxy.up();
    // Assess: tried until about the deadline, then the count says what the stop left.
    expect(took).toBeLessThan(5_000);
    expect(report).toEqual({ unsettled: 2, unsettledSent: 2 });
    expect(await statesOf(ids)).toEqual(['Processing', 'Processing']);
  });

  it('ends the tries at once when the close is told to give up', async () => {
    // Prepare: a long drain; the database stays away.
    const p = poller();
    const { drained, answer } = await deliveringWhileHeld(p, 2, 30_000);
    proxy.down();
    const giveUp = new AbortController();
    const closed = p.close({ signal: giveUp.signal });
    answer();
    await sleep(1_000);
    // Act
    const gaveUpAt = Date.now();
    giveUp.abort();
    await closed;
    const report = p.closeReport?.();
    // Assess: within a moment of the give-up, not at the 30 s deadline; the rows are counted.
    expect(Date.now() - gaveUpAt).toBeLessThan(1_500);
    expect(report).toEqual({ unsettled: 2, unsettledSent: 2 });
    await drained;
  });
});
