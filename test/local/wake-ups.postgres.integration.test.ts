/**
 * Wake-ups, /metrics and /admin of the local runtime as a real process on a real PostgreSQL. Both poll intervals
 * are 60 s, so the first drains at start are the only polls a test sees: a row delivered within the wait (20 s)
 * was delivered because something woke a drain — the insert trigger's NOTIFY, `notifyOutbox`, the inbox trigger,
 * or an admin requeue — never because of a poll. A control with the trigger dropped shows that an insert alone
 * then waits. Also: the listener comes back after `pg_terminate_backend`; /metrics carries the delivery latency
 * histogram and the row gauges; /admin is mounted behind the token.
 */
import { randomBytes } from 'node:crypto';
import { enqueue, notifyOutbox } from '@queuebox/client';
import { openPostgresStore } from '@queuebox/store-postgres';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  baseUrlOf,
  cleanup,
  type Delivery,
  eventually,
  type QueueBoxProcess,
  type Receiver,
  startQueueBox,
  startReceiver,
  testConfigYaml,
} from './support.ts';

const needs = await requireServices('local wake-ups tests', ['postgres']);

const POLL_MS = 60_000;
const TOKEN = `admin-${randomBytes(8).toString('hex')}`;

describe.skipIf(needs.skipReason)('local runtime wake-ups on PostgreSQL (real process)', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'local_wake', 3);
  let receiver: Receiver;
  let queuebox: QueueBoxProcess;
  let base: string;
  let seededDeadId: string;

  const table = (name: 'outbox' | 'inbox') => `"${schema.name}".${name}`;
  const marker = () => `m-${randomBytes(6).toString('hex')}`;

  /** The delivery whose body carries `mark`, once it arrived (fails after the support's wait). */
  async function deliveryOf(mark: string): Promise<Delivery> {
    let found: Delivery | undefined;
    await eventually(async () => {
      found = receiver.deliveries.find((d) => d.body.includes(mark));
      return found !== undefined;
    }, `a delivery carrying ${mark}`);
    return found as Delivery;
  }

  const insertOutbox = (mark: string) =>
    pool.query(`INSERT INTO ${table('outbox')} (topic, payload, max_attempts) VALUES ($1, $2, 3)`, [
      'demo.plain',
      JSON.stringify({ mark }),
    ]);

  async function metricsText(): Promise<string> {
    const response = await fetch(`${base}/metrics`);
    expect(response.status).toBe(200);
    return response.text();
  }

  beforeAll(async () => {
    // Migrated and seeded before the runtime starts, so its first stats refresh has something to show: one dead
    // outbox row (requeued through /admin below) and one pending inbox row of a source nobody relays, due 2 min ago.
    const seedStore = await openPostgresStore({ url: needs.url.postgres, schema: schema.name, poolSize: 1 });
    try {
      await seedStore.migrate();
      [seededDeadId] = (await seedStore.outbox.insert([
        { topic: 'demo.seeded', payload: { mark: 'seeded-dead' }, maxAttempts: 3 },
      ])) as [string];
      await pool.query(`UPDATE ${table('outbox')} SET state = 'dead', last_error = 'seeded' WHERE id = $1`, [
        seededDeadId,
      ]);
      await pool.query(
        `INSERT INTO ${table('inbox')} (source, idempotency_key, payload, max_attempts, scheduled_at)
         VALUES ('legacy', 'old-1', '{}', 3, now() - interval '2 minutes')`,
      );
    } finally {
      await seedStore.close();
    }
    receiver = await startReceiver();
    queuebox = await startQueueBox({
      yaml: testConfigYaml({
        receiverUrl: receiver.url,
        database: { url: needs.url.postgres, schema: schema.name },
        pollIntervalMs: POLL_MS,
        adminToken: TOKEN,
      }),
    });
    base = await baseUrlOf(queuebox);
    await queuebox.waitForLog(
      (l) => l.message === 'wake-ups: listening for inserts (LISTEN/NOTIFY)',
      'the wake-up listener',
    );
    // The wake-up at LISTEN starts one drain of each loop; let them finish before the tests insert anything.
    await new Promise((resolve) => setTimeout(resolve, 500));
  });

  afterAll(async () => {
    const code = await queuebox?.stop('SIGTERM');
    await cleanup();
    await receiver?.close();
    expect(code).toBe(0);
  });

  it('shows the row gauges of the first stats refresh on /metrics', async () => {
    let text = '';
    await eventually(async () => {
      text = await metricsText();
      return text.includes('queuebox_dead_rows{table="outbox"}');
    }, 'the first stats refresh');

    expect(text).toContain('# TYPE queuebox_dead_rows gauge');
    expect(text).toContain('queuebox_dead_rows{table="outbox"} 1');
    expect(text).toContain('queuebox_dead_rows{table="inbox"} 0');
    expect(text).toContain('queuebox_rows{state="pending",table="inbox"} 1');
    const age = /^queuebox_oldest_pending_age_seconds\{table="inbox"\} (\S+)$/m.exec(text)?.[1];
    expect(Number(age)).toBeGreaterThanOrEqual(100);
    expect(text).toContain('queuebox_oldest_pending_age_seconds{table="outbox"} 0');
    expect(text).toContain('queuebox_wakeup_listening 1');
    expect(text).toContain('# TYPE queuebox_outbox_delivery_latency_seconds histogram');
  });

  it('delivers a plain INSERT into the outbox at once: the trigger notifies, the outbox drain wakes', async () => {
    const mark = marker();

    await insertOutbox(mark);

    const delivery = await deliveryOf(mark);
    expect(JSON.parse(delivery.body)).toEqual({ mark });
  });

  it('delivers a row written by enqueue() and notifyOutbox() in an application transaction at once', async () => {
    const mark = marker();
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await enqueue(client, { topic: 'demo.enqueued', payload: { mark } }, { schema: schema.name });
      await notifyOutbox(client, { schema: schema.name });
      await client.query('COMMIT');
    } finally {
      client.release();
    }

    const delivery = await deliveryOf(mark);
    expect(JSON.parse(delivery.body)).toEqual({ mark });
  });

  it('relays and delivers a push row inserted into the inbox at once: the inbox trigger wakes the relay', async () => {
    const mark = marker();

    await pool.query(
      `INSERT INTO ${table('inbox')} (source, idempotency_key, event_type, payload, max_attempts)
       VALUES ('demo', $1, 'order.created', $2, 3)`,
      [mark, JSON.stringify({ type: 'order.created', data: { id: mark }, mark })],
    );

    const delivery = await deliveryOf(mark);
    expect(delivery.headers['x-source']).toBe('demo');
    expect(delivery.headers['x-idempotency-key']).toBe(mark);
  });

  it('comes back after pg_terminate_backend of the listening connection and wakes again', async () => {
    const first = await queuebox.waitForLog(
      (l) => l.message === 'wake-ups: listening for inserts (LISTEN/NOTIFY)',
      'the wake-up listener',
    );
    const pid = first.backendPid;
    expect(typeof pid).toBe('number');

    const { rows } = await pool.query<{ terminated: boolean }>(
      'SELECT pg_terminate_backend($1::int) AS terminated',
      [pid],
    );
    const back = await queuebox.waitForLog(
      (l) => l.message === 'wake-up listener reconnected',
      'the listener reconnecting',
    );
    // The reconnect's own wake-up drains once; the insert below comes after it.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const mark = marker();
    await insertOutbox(mark);

    expect(rows).toEqual([{ terminated: true }]);
    expect(back.backendPid).not.toBe(pid);
    expect(queuebox.logs.some((l) => l.message?.startsWith('wake-up listener unavailable'))).toBe(true);
    await deliveryOf(mark);
  });

  it('without the insert trigger an insert waits for the poll, and notifyOutbox() wakes the drain', async () => {
    await pool.query(`DROP TRIGGER outbox_notify_insert ON ${table('outbox')}`);
    try {
      const mark = marker();
      await insertOutbox(mark);
      // The control: nothing announces the row, and the next poll is a minute away.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const beforeNotify = receiver.deliveries.some((d) => d.body.includes(mark));

      const client = await pool.connect();
      try {
        await notifyOutbox(client, { schema: schema.name });
      } finally {
        client.release();
      }

      expect(beforeNotify).toBe(false);
      await deliveryOf(mark);
    } finally {
      await pool.query(
        `CREATE TRIGGER outbox_notify_insert AFTER INSERT ON ${table('outbox')}
           FOR EACH STATEMENT EXECUTE FUNCTION "${schema.name}".queuebox_notify_insert('queuebox_outbox')`,
      );
    }
  });

  it('serves /admin behind the token, and a requeue through it is delivered at once', async () => {
    const unauthorized = await fetch(`${base}/admin/stats`);
    const stats = await fetch(`${base}/admin/stats`, { headers: { authorization: `Bearer ${TOKEN}` } });
    const statsBody = (await stats.json()) as { outbox: { counts: Record<string, number> } };

    const requeue = await fetch(`${base}/admin/outbox/${seededDeadId}/requeue`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: '{}',
    });

    expect(unauthorized.status).toBe(401);
    expect(stats.status).toBe(200);
    expect(statsBody.outbox.counts.dead).toBe(1);
    expect(requeue.status).toBe(200);
    const delivery = await deliveryOf('seeded-dead');
    expect(JSON.parse(delivery.body)).toEqual({ mark: 'seeded-dead' });
  });

  it('shows the delivery latency histogram per destination on /metrics', async () => {
    const text = await metricsText();

    const count = /^queuebox_outbox_delivery_latency_seconds_count\{destination="receiver"\} (\d+)$/m.exec(
      text,
    )?.[1];
    // Six rows were delivered above; the last one may still be settling.
    expect(Number(count)).toBeGreaterThanOrEqual(5);
    expect(text).toMatch(
      // Label order is the metrics library's; either order is the same series.
      /^queuebox_outbox_delivery_latency_seconds_bucket\{(destination="receiver",le="\+Inf"|le="\+Inf",destination="receiver")\} \d+$/m,
    );
    expect(text).toMatch(
      /^queuebox_outbox_delivery_latency_seconds_sum\{destination="receiver"\} [\d.e+-]+$/m,
    );
    expect(text).toMatch(/^queuebox_outbox_sent_total \d+$/m);
  });
});
