/**
 * Database restart: the runtime (a real process) delivers keyed outbox messages and relays webhooks that a sender
 * keeps posting, while its PostgreSQL is stopped and started. The database is a private cluster of our own
 * (initdb in a temporary directory, `pg_ctl stop -m fast` / `start`), never the machine's shared server; without
 * PostgreSQL binaries a TCP proxy in front of the shared server is cut and restored instead (printed).
 * The runtime recovers without a restart of its own, /health answers 503 while the database is gone and 200 after,
 * webhooks get 503 and are taken once the sender retries, and nothing is lost.
 * The same again with a crash (`pg_ctl stop -m immediate`: no checkpoint, no shutdown flush), on a private cluster
 * only: recovery replays the WAL, and every 202 must still be a row and every message must still arrive. The outbox
 * claims commit without waiting for their flush (docs/design.md §5, "Durability of a claim"), so a crash may undo
 * the last ones; this test does not show that undoing itself: at this rate the WAL writer has written the WAL long
 * before the crash (an inbox insert made asynchronous on purpose passed it twice).
 * `async-claim-crash.integration.test.ts` does: it holds the WAL writer back and crashes right after a claim.
 */
import { randomBytes } from 'node:crypto';
import { openPostgresStore } from '@queuebox/store-postgres';
import { dropPostgresSchemaStatement, requireServices, useSchema } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  baseUrlOf,
  cleanup,
  type QueueBoxProcess,
  signStandardWebhook,
  startQueueBox,
} from '../local/support.ts';
import {
  enqueueKeyed,
  judgeDeliveries,
  type RecordingReceiver,
  startRecordingReceiver,
  statesOf,
} from './support/deliveries.ts';
import { type DatabaseOutage, databaseOutage, postgresBinaries } from './support/postgres-cluster.ts';
import { healthStatus, killAll, waitUntil } from './support/processes.ts';
import { faultConfigYaml, withPassword } from './support/runtime-config.ts';
import { leakedSecrets, outputOf, startWebhookSender } from './support/wire.ts';

const needs = await requireServices('faults: database restart', ['postgres']);

const COUNT = 2_000;
const KEYS = 50;
const WEBHOOK_KEYS = 8;

const canCrash = 'bindir' in postgresBinaries();
if (!canCrash && !needs.skipReason) {
  console.info(
    '[faults: database crash] skipped: no initdb/pg_ctl for a private cluster to crash (a proxy cannot)',
  );
}

for (const how of ['stop', 'crash'] as const) {
  describe.skipIf(needs.skipReason || (how === 'crash' && !canCrash))(
    `database ${how === 'stop' ? 'restart' : 'crash'} while the runtime works`,
    () => {
      let outage: DatabaseOutage;
      let pool: pg.Pool;
      const processes: QueueBoxProcess[] = [];
      let receiver: RecordingReceiver | undefined;
      // after-hooks run in reverse: the schema is dropped (useSchema) before the pool ends and the cluster goes.
      afterAll(async () => {
        await killAll(processes);
        await cleanup();
        await receiver?.close();
        await pool?.end();
        await outage?.dispose();
      });
      const schema = useSchema(how === 'stop' ? 'faults_dbrestart' : 'faults_dbcrash', {
        drop: async (name) => {
          await pool.query(dropPostgresSchemaStatement(name).text);
        },
      });
      beforeAll(async () => {
        outage = await databaseOutage(needs.url.postgres, `faults: database ${how}`, how);
        // initdb and pg_ctl are there (else skipped): a crash that turned into a cut proxy would test nothing new.
        if (how === 'crash' && !outage.crashes) throw new Error(`no private cluster to crash: ${outage.how}`);
        console.info(`[faults: database ${how}] database: ${outage.how}`);
        pool = new pg.Pool({ connectionString: outage.url, max: 4 });
        // Errors of idle clients while the database is down are expected; without a listener they would throw.
        pool.on('error', () => undefined);
      });

      it('keeps serving, answers /health 503 then 200, and loses nothing', async () => {
        // Prepare
        const secrets = {
          databasePassword: `db-pw-${randomBytes(8).toString('hex')}`,
          webhookSecret: `whsec_${randomBytes(24).toString('base64')}`,
        };
        const store = await openPostgresStore({ url: outage.url, schema: schema.name });
        await store.migrate();
        await store.close();
        const expected = await enqueueKeyed(pool, {
          schema: schema.name,
          count: COUNT,
          keys: KEYS,
          topic: 'faults.restart',
          run: schema.name,
        });
        receiver = await startRecordingReceiver();
        const rx = receiver;
        const runtime = await startQueueBox({
          yaml: faultConfigYaml({
            database: { url: withPassword(outage.url, secrets.databasePassword), schema: schema.name },
            receiverUrl: rx.url,
            sourcesYaml: `  hooks:
    type: http
    auth: { scheme: standard-webhooks, secrets: [${JSON.stringify(secrets.webhookSecret)}] }
    eventTypePath: $.type
    aggregateIdPath: $.agg
    topic: "hooks.{{ eventType }}"
`,
          }),
        });
        processes.push(runtime);
        const base = await baseUrlOf(runtime);
        const health = () => healthStatus(base);
        const sender = startWebhookSender({
          url: `${base}/inbox/hooks`,
          secret: secrets.webhookSecret,
          keys: WEBHOOK_KEYS,
          run: `wh${randomBytes(3).toString('hex')}`,
          gapMs: 50,
          sign: signStandardWebhook,
        });
        await waitUntil(
          () => rx.distinct() >= COUNT / 4,
          'a quarter of the deliveries',
          60_000,
          undefined,
          10,
        );
        expect(await health()).toBe(200);

        // Act: the database goes away for a few seconds, then comes back
        await outage.down();
        const healthWhileDown: number[] = [];
        await waitUntil(
          async () => {
            healthWhileDown.push(await health());
            return healthWhileDown.includes(503);
          },
          '/health to answer 503',
          15_000,
          () => `answers: ${healthWhileDown.join(', ')}`,
        );
        const acceptedBeforeUp = sender.acceptedCount();
        await new Promise((resolve) => setTimeout(resolve, 2_000));
        const acceptedWhileDown = sender.acceptedCount() - acceptedBeforeUp;
        const aliveWhileDown = runtime.child.exitCode === null;
        await outage.up();
        await waitUntil(async () => (await health()) === 200, '/health back to 200', 30_000);
        const acceptedAtUp = sender.acceptedCount();
        await waitUntil(
          () => sender.acceptedCount() >= acceptedAtUp + WEBHOOK_KEYS * 3,
          'webhooks taken again',
          30_000,
        );
        const sent = await sender.stop();
        await waitUntil(
          async () => {
            const [outbox, inbox] = await Promise.all([
              statesOf(pool, schema.name, 'outbox'),
              statesOf(pool, schema.name, 'inbox'),
            ]);
            return outbox.sent === COUNT + sent.accepted.length && inbox.processed === sent.accepted.length;
          },
          'every row sent and every webhook relayed',
          90_000,
          () => `${rx.distinct()} delivered of ${COUNT} + ${sent.accepted.length}`,
          250,
        );

        // Assess
        expect(aliveWhileDown).toBe(true);
        expect(runtime.child.exitCode).toBeNull();
        expect(runtime.logs.filter((l) => l.message === 'listening')).toHaveLength(1);
        expect(healthWhileDown).toContain(503);
        expect(acceptedWhileDown, 'webhooks taken while the database was down').toBe(0);
        expect(
          sent.statuses['503'] ?? 0,
          'webhooks answered 503 while the database was down',
        ).toBeGreaterThan(0);
        expect(Object.keys(sent.statuses).sort()).toEqual(
          Object.keys(sent.statuses)
            .filter((s) => ['200', '202', '503'].includes(s))
            .sort(),
        );
        expect(await statesOf(pool, schema.name, 'outbox')).toEqual({ sent: COUNT + sent.accepted.length });
        expect(await statesOf(pool, schema.name, 'inbox')).toEqual({ processed: sent.accepted.length });
        const enqueued = judgeDeliveries(
          rx.arrivals.filter((a) => a.inboxKey === undefined),
          expected,
        );
        expect(enqueued.missing).toEqual([]);
        expect(enqueued.foreign).toEqual([]);
        expect(enqueued.orderViolations).toEqual([]);
        const relayed = new Set(rx.arrivals.map((a) => a.inboxKey).filter((k) => k !== undefined));
        expect(sent.accepted.filter((id) => !relayed.has(id))).toEqual([]);
        const counts = new Map<string, number>();
        for (const a of rx.arrivals) counts.set(a.id, (counts.get(a.id) ?? 0) + 1);
        const duplicated = [...counts].filter(([, n]) => n > 1).map(([id]) => id);
        if (!outage.crashes) {
          // After a stop, which flushes everything, a duplicate can only come from a row whose settle was lost with
          // the database: its lease expired and the reclaim counted an attempt. (A crash can also undo a claim: its
          // row is pending again with the attempt it had, as if the claim had never run.)
          const { rows } = await pool.query<{ id: string; attempt: number }>(
            `SELECT id::text AS id, attempt FROM "${schema.name}".outbox WHERE id = ANY($1::bigint[])`,
            [duplicated],
          );
          expect(rows.filter((r) => r.attempt < 1)).toEqual([]);
        }
        expect(leakedSecrets(outputOf(runtime), secrets)).toEqual([]);
        expect(await runtime.stop('SIGTERM')).toBe(0);
        console.info(
          `[faults: database ${how}] ${outage.how}; ${COUNT} enqueued + ${sent.accepted.length} webhooks, /health while down: ${[...new Set(healthWhileDown)].join('/')}, webhook answers ${JSON.stringify(sent.statuses)}, ${duplicated.length} duplicated ids, 0 lost`,
        );
      }, 180_000);
    },
  );
}
