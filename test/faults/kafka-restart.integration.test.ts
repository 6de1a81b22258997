/**
 * A runtime with a Kafka source, killed with SIGKILL, then started again and stopped with SIGTERM at once (a crash
 * loop, or a deploy that rolls twice): the new member's join waits for the killed member's session, and the stop
 * waited for that join: 27 s, past Docker's 10 s grace (an outside crash soak). The consumer's close is bounded
 * (CONSUMER_CLOSE_WAIT_MS), and its session is 10 s (CONSUMER_SESSION_TIMEOUT_MS), so a restarted runtime also
 * consumes again sooner.
 */
import { randomBytes } from 'node:crypto';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanup, startQueueBox } from '../local/support.ts';
import { killHard } from './support/processes.ts';

const needs = await requireServices('faults: kafka restart', ['postgres', 'kafka']);

afterAll(async () => {
  await cleanup();
});

describe.skipIf(needs.skipReason)('a Kafka source restarted after a kill -9', () => {
  const { schema } = usePostgresSchema(needs.url.postgres, 'faults_kafka_restart', 1);
  it('stops at once on SIGTERM while its join waits for the killed member', {
    timeout: 120_000,
  }, async () => {
    // Prepare: runtime A consumes, then is killed; B starts in the same group
    const run = randomBytes(4).toString('hex');
    const topic = `qb-test-restart-${run}`;
    const group = `qb-test-restart-${run}`;
    const brokers = needs.url.kafka.split(',');
    const yaml = `database:
  url: ${JSON.stringify(needs.url.postgres)}
  schema: ${schema.name}
sources:
  kin:
    type: kafka
    mode: pull
    brokers: ${JSON.stringify(brokers)}
    topics: [${topic}]
    groupId: ${group}
    idempotencyKey: { path: $.id }
destinations:
  d: { type: http, url: "http://127.0.0.1:9/" }
routes: []
logLevel: info
`;
    const kafka = new Kafka({ clientId: 'qb-test-restart', brokers, logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    try {
      await admin.createTopics({ topics: [{ topic, numPartitions: 3 }] });
      const a = await startQueueBox({ yaml });
      await a.waitForLog((l) => l.message === 'consuming' && l.source === 'kin', 'consuming');
      await killHard(a);
      const b = await startQueueBox({ yaml });
      await b.waitForLog((l) => l.message === 'listening', 'listening');
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      // Act
      const started = Date.now();
      const code = await b.stop('SIGTERM');
      const tookMs = Date.now() - started;
      // Assess: a clean stop, well before the killed member's session (and B's join) ran out: 27 s before
      expect(code).toBe(0);
      expect(tookMs).toBeLessThan(18_000);
    } finally {
      await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
      await admin.deleteGroups([group]).catch(() => undefined);
      await admin.disconnect();
    }
  });
});
