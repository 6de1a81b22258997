/**
 * Concurrency: several runtimes (separate real processes) drain one outbox on one database while an application
 * keeps enqueueing keyed messages. Without a crash there is nothing to reclaim, so every message arrives exactly
 * once: no loss, no double delivery, per-key order at the receiver, and every process took part. bench/soak.ts runs
 * it at the size (4 processes, 100,000 messages).
 */
import { randomBytes } from 'node:crypto';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { baseUrlOf, cleanup, type QueueBoxProcess, startQueueBox } from '../local/support.ts';
import {
  type Expected,
  enqueueKeyed,
  judgeDeliveries,
  type RecordingReceiver,
  startRecordingReceiver,
  statesOf,
} from './support/deliveries.ts';
import { killAll, waitUntil } from './support/processes.ts';
import { faultConfigYaml, withPassword } from './support/runtime-config.ts';
import { leakedSecrets, outputOf } from './support/wire.ts';

const needs = await requireServices('faults: concurrency', ['postgres']);

const PROCESSES = 3;
const COUNT = 6_000;
const KEYS = 200;
const PER_TRANSACTION = 200;

/** Sum of a numeric field over a runtime's `outbox drain` log lines. */
function drained(runtime: QueueBoxProcess, field: 'sent' | 'stale' | 'retried' | 'dead'): number {
  return runtime.logs
    .filter((l) => l.message === 'outbox drain')
    .reduce((sum, l) => sum + Number(l[field] ?? 0), 0);
}

describe.skipIf(needs.skipReason)(`concurrency: ${PROCESSES} runtimes drain one database`, () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'faults_concurrency', 4);
  const processes: QueueBoxProcess[] = [];
  let receiver: RecordingReceiver | undefined;
  afterAll(async () => {
    await killAll(processes);
    await cleanup();
    await receiver?.close();
  });

  it(`delivers ${COUNT} messages enqueued while they run exactly once each, in order per key`, async () => {
    // Prepare: the processes start together (and migrate the fresh schema at the same time)
    const secrets = { databasePassword: `db-pw-${randomBytes(8).toString('hex')}` };
    receiver = await startRecordingReceiver();
    const rx = receiver;
    const yaml = faultConfigYaml({
      database: {
        url: withPassword(needs.url.postgres, secrets.databasePassword),
        schema: schema.name,
        poolSize: 4,
      },
      receiverUrl: rx.url,
      // Long enough that no lease expires while a batch is delivered on a busy 2-core machine.
      claimTimeoutMs: 60_000,
    });
    const runtimes = await Promise.all(
      Array.from({ length: PROCESSES }, async () => {
        const runtime = await startQueueBox({ yaml });
        processes.push(runtime);
        await baseUrlOf(runtime);
        return runtime;
      }),
    );

    // Act: an application enqueues in transactions while the drains run
    const expected = new Map<string, Expected>();
    for (let from = 0; from < COUNT; from += PER_TRANSACTION * 5) {
      const batch = await enqueueKeyed(pool, {
        schema: schema.name,
        count: Math.min(PER_TRANSACTION * 5, COUNT - from),
        keys: KEYS,
        topic: 'faults.concurrency',
        run: schema.name,
        perTransaction: PER_TRANSACTION,
        from,
      });
      for (const [id, message] of batch) expected.set(id, message);
    }
    await waitUntil(
      async () => (await statesOf(pool, schema.name, 'outbox')).sent === COUNT,
      'every row sent',
      120_000,
      () => `${rx.distinct()} of ${COUNT} delivered`,
      250,
    );

    // Assess
    expect(expected.size).toBe(COUNT);
    expect(await statesOf(pool, schema.name, 'outbox')).toEqual({ sent: COUNT });
    const verdict = judgeDeliveries(rx.arrivals, expected);
    expect(verdict.missing).toEqual([]);
    expect(verdict.foreign).toEqual([]);
    expect([...verdict.duplicates.keys()]).toEqual([]);
    expect(verdict.orderViolations).toEqual([]);
    expect(rx.arrivals).toHaveLength(COUNT);
    // A drain logs its line when it ends, up to one drain budget (10 s) after its rows were marked sent.
    const loggedSent = () => runtimes.reduce((sum, r) => sum + drained(r, 'sent'), 0);
    await waitUntil(
      () => loggedSent() >= COUNT,
      'every sent row counted in an `outbox drain` line',
      30_000,
      () => `${loggedSent()} of ${COUNT} counted`,
    );
    const sentBy = runtimes.map((r) => drained(r, 'sent'));
    for (const sent of sentBy) expect(sent, `rows sent per process: ${sentBy.join(', ')}`).toBeGreaterThan(0);
    expect(sentBy.reduce((a, b) => a + b, 0)).toBe(COUNT);
    expect(runtimes.map((r) => drained(r, 'stale') + drained(r, 'retried') + drained(r, 'dead'))).toEqual(
      runtimes.map(() => 0),
    );
    for (const runtime of runtimes) expect(leakedSecrets(outputOf(runtime), secrets)).toEqual([]);
    expect(await Promise.all(runtimes.map((r) => r.stop('SIGTERM')))).toEqual(runtimes.map(() => 0));
    console.info(
      `[faults: concurrency] ${PROCESSES} processes, ${COUNT} messages over ${KEYS} keys: sent per process ${sentBy.join(' / ')}, 0 lost, 0 duplicates, 0 order violations`,
    );
  }, 180_000);
});
