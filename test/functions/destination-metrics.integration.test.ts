/**
 * outbox-tick tells CloudWatch which destination fails: it publishes one EMF document per configured destination
 * that settled rows, `Sent` / `Retried` / `Dead` under both dimension sets `{ service, Destination }` and
 * `{ service }`, never as 0, and the rest (rows of no destination) under `{ service }` alone, so the `{ service }`
 * series (and a sum over the log lines) still equal the drain's totals; nothing of the kind on an idle tick. Real
 * PostgreSQL, a real receiver and a port nobody listens on.
 */
import type { Store } from '@queuebox/core';
import { openStore } from '@queuebox/store';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler as createMigrate } from '../../functions/migrate.ts';
import { createHandler as createOutboxTick } from '../../functions/outbox-tick.ts';
import { cleanup, type Receiver, startReceiver } from '../local/support.ts';
import {
  aLambdaContext,
  aTickEvent,
  captureEmf,
  captureOutput,
  type EmfDocument,
  emfValue,
  type TestShell,
  testShell,
  writeConfigFile,
} from './support.ts';

const needs = await requireServices('function tests: per-destination metrics', ['postgres']);

describe.skipIf(needs.skipReason)('outbox-tick counters by destination', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'functions_destinations', 1);
  const shells: TestShell[] = [];
  let receiver: Receiver;
  let store: Store;
  let configFile: string;

  const shell = () => {
    const options = testShell(configFile);
    shells.push(options);
    return options;
  };
  /** The documents that carry the Destination dimension, as { Destination, metric values }. */
  const byDestination = (emf: readonly EmfDocument[]) =>
    emf
      .filter((doc) => doc._aws.CloudWatchMetrics.some((d) => d.Dimensions.flat().includes('Destination')))
      .map((doc) => ({
        dimensions: doc._aws.CloudWatchMetrics.map((d) => d.Dimensions),
        values: Object.fromEntries(
          (doc._aws.CloudWatchMetrics[0]?.Metrics ?? []).map((m) => [m.Name, doc[m.Name]]),
        ),
        service: doc.service,
        destination: doc.Destination,
      }));

  beforeAll(async () => {
    receiver = await startReceiver();
    // `billing` answers nothing (nothing listens on port 1): every delivery to it fails at once.
    configFile = await writeConfigFile(`database:
  url: ${JSON.stringify(needs.url.postgres)}
  schema: ${schema.name}
  poolSize: 2
outbox:
  backoff: { baseMs: 100, maxMs: 1000 }
destinations:
  receiver: { type: http, url: ${receiver.url}, timeoutMs: 5000 }
  billing: { type: http, url: "http://127.0.0.1:1/down", timeoutMs: 2000 }
  quiet: { type: http, url: ${receiver.url}, timeoutMs: 5000 }
routes:
  - { match: "ok.#", destination: receiver }
  - { match: "bill.#", destination: billing }
  - { match: "quiet.#", destination: quiet }
`);
    await createMigrate(shell())(undefined, aLambdaContext());
    store = await openStore({
      provider: 'postgres',
      url: needs.url.postgres,
      schema: schema.name,
      poolSize: 2,
    });
  });

  afterAll(async () => {
    for (const options of shells) for (const cache of options.caches) await cache.close();
    await store?.close();
    await receiver?.close();
    await cleanup();
  });

  it('publishes Sent / Retried / Dead per destination that moved, beside the counters without a destination', async () => {
    // Prepare: 2 rows delivered to receiver; 2 to billing that are retried, 1 that has no attempt left (dead);
    // 1 that no route matches (dead, no destination); nothing for quiet.
    await store.outbox.insert([
      { topic: 'ok.a', key: null, payload: { n: 1 }, maxAttempts: 5 },
      { topic: 'ok.b', key: null, payload: { n: 2 }, maxAttempts: 5 },
      { topic: 'bill.a', key: null, payload: { n: 3 }, maxAttempts: 5 },
      { topic: 'bill.b', key: null, payload: { n: 4 }, maxAttempts: 5 },
      { topic: 'bill.c', key: null, payload: { n: 5 }, maxAttempts: 1 },
      { topic: 'nowhere', key: null, payload: { n: 6 }, maxAttempts: 5 },
    ]);
    const outboxTick = createOutboxTick(shell());

    // Act: everything written is kept (Powertools Metrics warns on stdout, in plain text, about dimensions it refuses).
    const { result, lines } = await captureOutput(() => outboxTick(aTickEvent('schedule'), aLambdaContext()));

    // Assess: what the drain did, and only JSON lines.
    expect(result).toMatchObject({ sent: 2, retried: 2, dead: 2 });
    const parsed = lines.map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>;
      } catch {
        return line;
      }
    });
    expect(parsed.filter((line) => typeof line === 'string')).toEqual([]);
    const emf = parsed.filter((doc): doc is EmfDocument => typeof doc === 'object' && '_aws' in doc);
    // One document per destination that moved, by name, under both dimension sets; quiet (configured, idle)
    // sends nothing.
    const bothSets = [[['service', 'Destination'], ['service']]];
    expect(byDestination(emf)).toEqual([
      {
        dimensions: bothSets,
        values: { Retried: 2, Dead: 1 },
        service: 'queuebox-test',
        destination: 'billing',
      },
      { dimensions: bothSets, values: { Sent: 2 }, service: 'queuebox-test', destination: 'receiver' },
    ]);
    // The rest under { service } alone: the unrouted dead row and the latencies, no Destination.
    const rest = emf.filter(
      (doc) => JSON.stringify(doc._aws.CloudWatchMetrics[0]?.Dimensions) === '[["service"]]',
    );
    expect(rest).toHaveLength(1);
    expect(rest[0]).toMatchObject({ Dead: 1, DeliveryLatency: [expect.any(Number), expect.any(Number)] });
    expect(rest[0]).not.toHaveProperty('Sent');
    expect(rest[0]).not.toHaveProperty('Retried');
    expect(rest[0]).not.toHaveProperty('Destination');
    // Every row counted once: the { service } series, and a sum over the log lines, are the drain's totals.
    expect([emfValue(emf, 'Sent'), emfValue(emf, 'Retried'), emfValue(emf, 'Dead')]).toEqual([2, 2, 2]);
    // The gauges' documents carry Table, never Destination.
    for (const gauge of emf.filter((doc) => 'Table' in doc)) expect(gauge).not.toHaveProperty('Destination');
    // Each document within EMF's limits: at most 30 dimensions in a set, 100 metrics in a directive.
    for (const doc of emf) {
      for (const directive of doc._aws.CloudWatchMetrics) {
        expect(directive.Metrics.length).toBeLessThanOrEqual(100);
        for (const set of directive.Dimensions) expect(set.length).toBeLessThanOrEqual(30);
      }
    }
  });

  it('publishes no destination document on a tick that settled nothing', async () => {
    // Prepare: nothing due (billing's retries wait for their back-off, pushed an hour out).
    await pool.query(
      `UPDATE "${schema.name}".outbox SET scheduled_at = now() + interval '1 hour' WHERE state = 'pending'`,
    );
    const outboxTick = createOutboxTick(shell());

    // Act
    const { result, emf } = await captureEmf(() => outboxTick(aTickEvent('schedule'), aLambdaContext()));

    // Assess: only the samples before the drain: the outbox's, and the inbox's, which outbox-tick takes in an install
    // without relay-tick (this one has no source).
    expect(result).toMatchObject({ claimed: 0 });
    expect(byDestination(emf)).toEqual([]);
    expect(emf).toHaveLength(2);
    expect(emf[0]).toMatchObject({ Table: 'outbox', OldestPendingAgeSeconds: 0 });
    expect(emf[1]).toMatchObject({ Table: 'inbox', OldestPendingAgeSeconds: 0 });
  });
});
