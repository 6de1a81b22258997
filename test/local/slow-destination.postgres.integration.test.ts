/**
 * A healthy but slow destination, on a real process over PostgreSQL: it answers after 11 s, within its 15 s
 * `timeoutMs` but past the fixed 10 s the local drains used to have. Each request was cut at the drain's end,
 * counted as a failed attempt and sent again, and the row went dead at its `max_attempts`. The drain's budget now
 * fits the longest destination timeout: the row is delivered by its first request.
 */
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  baseUrlOf,
  cleanup,
  postWebhook,
  type QueueBoxProcess,
  type Receiver,
  startQueueBox,
  startReceiver,
  testConfigYaml,
} from './support.ts';

const needs = await requireServices('local runtime, slow destination', ['postgres']);

const ANSWER_AFTER_MS = 11_000;

describe.skipIf(needs.skipReason)(
  'local runtime and a slow destination (real process)',
  { timeout: 90_000 },
  () => {
    const { pool, schema } = usePostgresSchema(needs.url.postgres, 'local_slow_destination', 2);
    let receiver: Receiver;
    let queuebox: QueueBoxProcess;
    let base: string;

    beforeAll(async () => {
      receiver = await startReceiver();
      queuebox = await startQueueBox({
        yaml: testConfigYaml({
          receiverUrl: receiver.url,
          database: { url: needs.url.postgres, schema: schema.name },
        }),
      });
      base = await baseUrlOf(queuebox);
    });

    afterAll(async () => {
      await cleanup();
      await receiver?.close();
    });

    it(`delivers to a destination answering after ${ANSWER_AFTER_MS / 1000} s (timeoutMs 15 s) with its first request`, async () => {
      const held = receiver.hold(() => true);
      const answer = await postWebhook(`${base}/inbox/demo`, 'slow-1', {
        type: 'order.created',
        data: { id: 's' },
      });
      expect(answer.status).toBe(202);
      await receiver.waitFor(1);

      // The receiver answers after ANSWER_AFTER_MS; the request must still be open then.
      await new Promise((resolve) => setTimeout(resolve, ANSWER_AFTER_MS));
      held.release();

      await queuebox.waitForLog(
        (l) => l.message === 'outbox drain finished' && Number(l.sent) === 1,
        'the row sent',
      );
      const { rows } = await pool.query<{ state: string; attempt: number }>(
        `SELECT state, attempt FROM "${schema.name}".outbox`,
      );
      expect(rows).toEqual([{ state: 'sent', attempt: 0 }]);
      expect(receiver.deliveries).toHaveLength(1);
    });
  },
);
