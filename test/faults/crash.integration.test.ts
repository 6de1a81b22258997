/**
 * Crash: the local runtime (a real process) is killed with SIGKILL while it delivers thousands of keyed messages
 * to a real HTTP receiver, then started again. Every message arrives at least once, the first deliveries of each
 * key come in insert order, and every duplicate is a row that was in processing at the kill and went back to
 * pending when its lease expired. bench/soak.ts runs the same scenario at the issue's full size (20,000 messages
 * over 1,000 keys, several kills).
 */
import { randomBytes } from 'node:crypto';
import { openPostgresStore } from '@queuebox/store-postgres';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { baseUrlOf, cleanup, type QueueBoxProcess, startQueueBox } from '../local/support.ts';
import {
  enqueueKeyed,
  judgeDeliveries,
  processingRows,
  type RecordingReceiver,
  startRecordingReceiver,
  statesOf,
} from './support/deliveries.ts';
import { killAll, killHard, waitUntil } from './support/processes.ts';
import { faultConfigYaml, withPassword } from './support/runtime-config.ts';
import { leakedSecrets, outputOf } from './support/wire.ts';

const needs = await requireServices('faults: crash', ['postgres']);

const COUNT = 3_000;
const KEYS = 100;
const LEASE_MS = 4_000;

describe.skipIf(needs.skipReason)('crash: kill -9 of the runtime in the middle of delivering', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'faults_crash', 4);
  const processes: QueueBoxProcess[] = [];
  let receiver: RecordingReceiver | undefined;
  afterAll(async () => {
    await killAll(processes);
    await cleanup();
    await receiver?.close();
  });

  it(`delivers all ${COUNT} messages over ${KEYS} keys at least once, in order per key, duplicates only from expired leases`, async () => {
    // Prepare: the schema migrated and every message enqueued before the runtime starts
    const secrets = {
      databasePassword: `db-pw-${randomBytes(8).toString('hex')}`,
      signingSecret: `whsec_${randomBytes(24).toString('base64')}`,
    };
    const databaseUrl = withPassword(needs.url.postgres, secrets.databasePassword);
    const store = await openPostgresStore({ url: needs.url.postgres, schema: schema.name });
    await store.migrate();
    await store.close();
    const expected = await enqueueKeyed(pool, {
      schema: schema.name,
      count: COUNT,
      keys: KEYS,
      topic: 'faults.crash',
      run: schema.name,
    });
    receiver = await startRecordingReceiver();
    const yaml = faultConfigYaml({
      database: { url: databaseUrl, schema: schema.name },
      receiverUrl: receiver.url,
      claimTimeoutMs: LEASE_MS,
      signingSecret: secrets.signingSecret,
    });
    const first = await startQueueBox({ yaml });
    processes.push(first);
    await baseUrlOf(first);
    const rx = receiver;
    // Not a multiple of the batch size, so the kill lands inside a batch: delivered, not yet settled.
    const killAfter = Math.floor(COUNT / 3) + 37;
    await waitUntil(
      () => rx.distinct() >= killAfter,
      'a third of the deliveries',
      60_000,
      () => `${rx.distinct()} distinct deliveries`,
      10,
    );

    // Act: the crash, then a new process. The kill waits for a moment with rows in processing (a claimed batch being
    // delivered): between a batch's settle and the next claim there are none, and a kill there tests no crash.
    await waitUntil(
      async () => (await processingRows(pool, schema.name)).size > 0,
      'rows in processing',
      10_000,
      () => 'no row in processing',
      1,
    );
    await killHard(first);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const atKill = await processingRows(pool, schema.name);
    const arrivedAtKill = rx.arrivals.length;
    await new Promise((resolve) => setTimeout(resolve, 500));
    const arrivedWhileDown = rx.arrivals.length - arrivedAtKill;
    const second = await startQueueBox({ yaml });
    processes.push(second);
    await baseUrlOf(second);
    await waitUntil(
      async () => (await statesOf(pool, schema.name, 'outbox')).sent === COUNT,
      'every row sent',
      90_000,
      // On a stall, say what the restarted runtime was doing (its last log lines, whether it still runs).
      () =>
        `${rx.distinct()} of ${COUNT} delivered; restarted runtime ${
          second.child.exitCode === null && second.child.signalCode === null
            ? 'still running'
            : `exited (${second.child.exitCode ?? second.child.signalCode})`
        }, its last lines:\n${outputOf(second).split('\n').slice(-40).join('\n')}`,
      250,
    );

    // Assess
    expect(atKill.size, 'rows in processing at the kill').toBeGreaterThan(0);
    expect(arrivedAtKill).toBeLessThan(COUNT);
    expect(arrivedWhileDown, 'deliveries while no runtime ran').toBe(0);
    expect(await statesOf(pool, schema.name, 'outbox')).toEqual({ sent: COUNT });
    const verdict = judgeDeliveries(rx.arrivals, expected);
    expect(verdict.missing).toEqual([]);
    expect(verdict.foreign).toEqual([]);
    expect(verdict.orderViolations).toEqual([]);
    const duplicateIds = [...verdict.duplicates.keys()];
    expect(duplicateIds.filter((id) => !atKill.has(id))).toEqual([]);
    const { rows: attempts } = await pool.query<{ id: string; attempt: number }>(
      `SELECT id::text AS id, attempt FROM "${schema.name}".outbox WHERE id = ANY($1::bigint[])`,
      [duplicateIds],
    );
    // The reclaim that returned an expired claim counted the attempt it used.
    for (const row of attempts) {
      expect(row.attempt, `attempt of duplicate ${row.id}`).toBeGreaterThan(atKill.get(row.id)?.attempt ?? 0);
    }
    const reclaimed = second.logs
      .filter((l) => l.message === 'outbox reclaimed expired claims')
      .reduce((sum, l) => sum + Number(l.returned ?? 0), 0);
    expect(reclaimed).toBeGreaterThanOrEqual(duplicateIds.length);
    expect(reclaimed).toBeLessThanOrEqual(atKill.size);
    for (const runtime of processes) expect(leakedSecrets(outputOf(runtime), secrets)).toEqual([]);
    expect(await second.stop('SIGTERM')).toBe(0);
    console.info(
      `[faults: crash] ${COUNT} messages, ${KEYS} keys: ${arrivedAtKill} arrivals before the kill, ${atKill.size} rows in processing at the kill, ${reclaimed} reclaimed, ${verdict.duplicates.size} duplicated ids (${verdict.extraArrivals} extra arrivals), 0 lost`,
    );
  }, 150_000);
});
