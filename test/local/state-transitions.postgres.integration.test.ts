/**
 * Every state change the real runtime makes stays in the specification's tables ("How QueueBox works", "Outbox
 * states" and "Inbox states"). Row-level AFTER triggers, installed by this test only, record each insert, state
 * change and claim-token change of the schema's `outbox` and `inbox` rows; the runtime runs as `npm start` runs it
 * (a child process on PostgreSQL), the application side uses the public client (`enqueue`, `openPullWorker`) and the
 * operator side the `/admin` API. The test then checks that every recorded change is a row of the tables (the
 * operator's requeues and replay listed apart, allowed only for the rows the test acted on), and that every change
 * each path was meant to make was seen, so it cannot pass on a quiet run.
 *
 * Paths: delivered at once; retried (500, 500, then 204); attempts used up (dead), then requeued and delivered; no
 * route (dead at once); a route transform that rejects (dead); claims whose lease expired (taken through the store
 * with a short lease before the runtime started) reclaimed to pending and delivered, or dead with no attempt left;
 * webhooks of a push source relayed and delivered, a duplicate, one refused by its transform (no row), one whose
 * topic renders empty (dead, requeued, dead again), a relay claim whose lease expired reclaimed and relayed; a pull
 * source worked by `openPullWorker`: completed, retried then given up, refused, taken over after its lease expired,
 * given up at claim with no attempt left, and a dead row requeued and completed; a replay of a sent row; and, when
 * RabbitMQ is here, an AMQP source: one message stored and relayed, one its transform rejects and one that is not
 * JSON, both stored dead.
 */
import { randomBytes } from 'node:crypto';
import { enqueue, openPullWorker, type PullClient } from '@queuebox/client';
import { findRabbitMq, requireServices, useTestStore } from '@queuebox/testing';
import amqp, { type Channel, type ChannelModel } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  classify,
  describeOffSpec,
  type OperatorActions,
  pairName,
  pathOf,
  readTransitions,
  recorderSql,
  type Sink,
  startSink,
  type Table,
} from './state-transitions-support.ts';
import {
  baseUrlOf,
  cleanup,
  postWebhook,
  type QueueBoxProcess,
  startQueueBox,
  TEST_SECRET,
} from './support.ts';

const needs = await requireServices('state transition audit', ['postgres']);
/**
 * RabbitMQ is optional: with it, an AMQP source adds the inbox's `(store) → dead` (a rejected transform, a body that
 * is not JSON); without it that row of the table is not exercised.
 */
const rabbit = needs.skipReason ? undefined : await findRabbitMq();
const amqpUrl = rabbit?.available ? rabbit.url : undefined;
const amqpQueue = `aud_st.${randomBytes(4).toString('hex')}.in`;

/** Lease of the claims taken through the store before the runtime starts, left to expire. */
const SHORT_LEASE_MS = 1500;
/** Lease of a pull claim left to expire. */
const PULL_SHORT_LEASE_MS = 300;
/** Longest wait for one step of a path. */
const STEP_MS = 20_000;
/** Longest run of the driving test (it takes about 4 s here). */
const DRIVE_MS = 60_000;
const ADMIN_TOKEN = 'aud-st-admin-token-0123456789abcdef';
const SOURCE_TYPES = { hooks: 'http', picky: 'http', jobs: 'http', 'orders-in': 'amqp' } as const;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(probe: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + STEP_MS;
  for (;;) {
    if (await probe()) return;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${STEP_MS} ms`);
    await sleep(50);
  }
}

function configYaml(options: {
  url: string;
  schema: string;
  port: number;
  sink: string;
  amqpUrl: string | undefined;
}): string {
  const amqpSource = options.amqpUrl
    ? `  orders-in:
    type: amqp
    url: ${JSON.stringify(options.amqpUrl)}
    queue: ${amqpQueue}
    transform: { jsonata: "kind = 'bad' ? $reject('refused by the test') : $" }
`
    : '';
  return `database:
  url: ${JSON.stringify(options.url)}
  schema: ${options.schema}
http:
  port: ${options.port}
  host: 127.0.0.1
admin:
  token: ${ADMIN_TOKEN}
inbox:
  relay:
    pollIntervalMs: 50
outbox:
  pollIntervalMs: 50
  maxAttempts: 5
  backoff: { baseMs: 100, maxMs: 300 }
sources:
  hooks:
    type: http
    auth: { scheme: standard-webhooks, secrets: [${TEST_SECRET}] }
    eventTypePath: $.type
    aggregateIdPath: $.data.id
  picky:
    type: http
    auth: { scheme: standard-webhooks, secrets: [${TEST_SECRET}] }
    eventTypePath: $.type
    transform: { jsonata: "type = 'bad' ? $reject('refused by the test') : $" }
  jobs:
    type: http
    mode: pull
    auth: { scheme: standard-webhooks, secrets: [${TEST_SECRET}] }
    eventTypePath: $.type
    maxAttempts: 2
${amqpSource}destinations:
  ok: { type: http, url: ${options.sink}/ok, timeoutMs: 5000 }
  flaky: { type: http, url: ${options.sink}/flaky, timeoutMs: 5000 }
  fail: { type: http, url: ${options.sink}/fail, timeoutMs: 5000 }
routes:
  - { match: "xform.#", destination: ok, transform: { jsonata: "$reject('refused by the test transform')" } }
  - { match: "ok.#", destination: ok }
  - { match: "flaky.#", destination: flaky }
  - { match: "fail.#", destination: fail }
  - { match: "orders-in", destination: ok }
logLevel: info
`;
}

describe.skipIf(needs.skipReason)('state transitions of the real runtime on PostgreSQL', () => {
  const db = useTestStore('state_tr', { url: needs.url.postgres });
  let sink: Sink;
  let queuebox: QueueBoxProcess;
  let base: string;
  let worker: PullClient | undefined;
  let broker: ChannelModel | undefined;
  let channel: Channel | undefined;
  /** Row ids of each path, by name (outbox `o:` / inbox `i:`). */
  const rows: Record<string, string> = {};
  const operator: { requeued: Record<Table, string[]>; replayInserts: string[] } = {
    requeued: { outbox: [], inbox: [] },
    replayInserts: [],
  };

  const stateOf = async (table: Table, id: string) => {
    const { rows: found } = await db.pool.query<{ state: string; attempt: number }>(
      `SELECT state, attempt FROM "${db.schema}".${table} WHERE id = $1::bigint`,
      [id],
    );
    return found[0];
  };
  const reaches = (table: Table, id: string, state: string) =>
    until(async () => (await stateOf(table, id))?.state === state, `${table} row ${id} ${state}`);
  const forwardedOf = async (inboxId: string): Promise<string | undefined> => {
    const { rows: found } = await db.pool.query<{ id: string }>(
      `SELECT id::text AS id FROM "${db.schema}".outbox WHERE headers->>'x-inbox-id' = $1`,
      [inboxId],
    );
    return found[0]?.id;
  };
  const admin = async (path: string) => {
    const response = await fetch(`${base}/admin/${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: '{}',
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };
  const webhook = async (source: string, key: string, payload: unknown, status = 202) => {
    const answer = await postWebhook(`${base}/inbox/${source}`, key, payload);
    expect(answer.status, `${source} ${key}: ${JSON.stringify(answer.body)}`).toBe(status);
    return answer.body;
  };

  beforeAll(async () => {
    await db.pool.query(recorderSql(db.schema));
    sink = await startSink(2);

    // Claims whose lease expires: taken through the store with a short lease before the runtime runs (it would
    // otherwise claim the rows first) and never settled.
    const [reclaimed, reclaimedDead] = await db.store.outbox.insert([
      { topic: 'ok.reclaimed', payload: { path: 'reclaimed' }, maxAttempts: 3 },
      { topic: 'ok.reclaimed-dead', payload: { path: 'reclaimed-dead' }, maxAttempts: 1 },
    ]);
    rows['o:reclaimed'] = reclaimed as string;
    rows['o:reclaimed-dead'] = reclaimedDead as string;
    const outboxClaim = await db.store.outbox.claim({ batchSize: 10, leaseMs: SHORT_LEASE_MS });
    expect(outboxClaim.map((r) => r.id).sort()).toEqual([reclaimed, reclaimedDead].sort());
    const stored = await db.store.inbox.store({
      source: 'hooks',
      idempotencyKey: 'relay-reclaimed',
      eventType: 'ok.relay-reclaimed',
      payload: { type: 'ok.relay-reclaimed' },
      maxAttempts: 5,
    });
    rows['i:relay-reclaimed'] = stored.id;
    const relayClaim = await db.store.inbox.claimForRelay({
      sources: ['hooks'],
      batchSize: 10,
      leaseMs: SHORT_LEASE_MS,
    });
    expect(relayClaim.map((r) => r.id)).toEqual([stored.id]);

    if (amqpUrl) {
      broker = await amqp.connect(amqpUrl);
      channel = await broker.createChannel();
      await channel.assertQueue(amqpQueue, { durable: false });
    }
    queuebox = await startQueueBox({
      yaml: configYaml({ url: needs.url.postgres, schema: db.schema, port: 0, sink: sink.url, amqpUrl }),
    });
    base = await baseUrlOf(queuebox);
    if (amqpUrl)
      await queuebox.waitForLog((l) => l.message === 'consuming' && l.source === 'orders-in', 'the consumer');
  });

  afterAll(async () => {
    await worker?.close();
    await cleanup();
    await sink?.close();
    await channel?.deleteQueue(amqpQueue).catch(() => undefined);
    await broker?.close();
  });

  it(
    'drives every path through the runtime, the client and the admin API',
    async () => {
      // The application's outbox rows, in one transaction.
      const client = await db.pool.connect();
      try {
        await client.query('BEGIN');
        const put = (topic: string, path: string, extra: { key?: string; maxAttempts?: number } = {}) =>
          enqueue(client, { topic, payload: { path }, ...extra }, { schema: db.schema });
        rows['o:ok'] = await put('ok.plain', 'ok');
        rows['o:ok-keyed'] = await put('ok.keyed', 'ok-keyed', { key: 'k-1' });
        rows['o:flaky'] = await put('flaky.one', 'flaky', { maxAttempts: 5 });
        rows['o:fail'] = await put('fail.one', 'fail', { maxAttempts: 3 });
        rows['o:unrouted'] = await put('nowhere.at.all', 'unrouted');
        rows['o:xform'] = await put('xform.one', 'xform');
        await client.query('COMMIT');
      } finally {
        client.release();
      }

      // Webhooks of the push sources.
      rows['i:wh-ok'] = (await webhook('hooks', 'wh-ok', { type: 'ok.webhook', data: { id: 'a-1' } }))
        .id as string;
      expect(await webhook('hooks', 'wh-ok', { type: 'ok.webhook', data: { id: 'a-1' } }, 200)).toEqual({
        status: 'duplicate',
      });
      rows['i:wh-empty'] = (await webhook('hooks', 'wh-empty', { data: { id: 'a-2' } })).id as string;
      await webhook('picky', 'pk-bad', { type: 'bad' }, 422);
      rows['i:pk-good'] = (await webhook('picky', 'pk-good', { type: 'ok.picky' })).id as string;

      // Messages of the AMQP source (when RabbitMQ is here): one stored and relayed, two stored dead.
      const amqpRows = async () => {
        const { rows: found } = await db.pool.query<{ key: string; id: string }>(
          `SELECT idempotency_key AS key, id::text AS id FROM "${db.schema}".inbox WHERE source = 'orders-in'`,
        );
        return new Map(found.map((r) => [r.key, r.id]));
      };
      if (channel) {
        const publish = (body: string, messageId: string) =>
          channel?.sendToQueue(amqpQueue, Buffer.from(body), { messageId, contentType: 'application/json' });
        publish(JSON.stringify({ kind: 'good' }), 'amqp-good');
        publish(JSON.stringify({ kind: 'bad' }), 'amqp-rejected');
        publish('this is not json', 'amqp-not-json');
        await until(async () => (await amqpRows()).size === 3, 'three AMQP messages stored');
        const stored = await amqpRows();
        for (const key of ['amqp-good', 'amqp-rejected', 'amqp-not-json'])
          rows[`i:${key}`] = stored.get(key) as string;
        await reaches('inbox', rows['i:amqp-rejected'] as string, 'dead');
        await reaches('inbox', rows['i:amqp-not-json'] as string, 'dead');
      }

      for (const name of ['o:ok', 'o:ok-keyed', 'o:flaky', 'o:reclaimed'])
        await reaches('outbox', rows[name] as string, 'sent');
      for (const name of ['o:fail', 'o:unrouted', 'o:xform', 'o:reclaimed-dead'])
        await reaches('outbox', rows[name] as string, 'dead');
      expect(await stateOf('outbox', rows['o:flaky'] as string)).toEqual({ state: 'sent', attempt: 2 });
      expect(await stateOf('outbox', rows['o:fail'] as string)).toEqual({ state: 'dead', attempt: 3 });
      for (const name of ['i:wh-ok', 'i:pk-good', 'i:relay-reclaimed', ...(channel ? ['i:amqp-good'] : [])]) {
        const id = rows[name] as string;
        await reaches('inbox', id, 'processed');
        const forwarded = await forwardedOf(id);
        expect(forwarded, `outbox row forwarded from ${name}`).toBeDefined();
        rows[`o:from-${name}`] = forwarded as string;
        await reaches('outbox', forwarded as string, 'sent');
      }
      await reaches('inbox', rows['i:wh-empty'] as string, 'dead');
      const { rows: refused } = await db.pool.query(
        `SELECT 1 FROM "${db.schema}".inbox WHERE idempotency_key = 'pk-bad'`,
      );
      expect(refused).toEqual([]);

      // The pull source, one row at a time, through the public pull API.
      worker = await openPullWorker({ url: needs.url.postgres, schema: db.schema, source: 'jobs' });
      const job = async (key: string) => (await webhook('jobs', key, { type: 'job', n: key })).id as string;
      const claimOne = async (leaseMs: number, id: string) => {
        const claimed = await worker?.claim(1, leaseMs);
        expect(claimed?.map((r) => r.id)).toEqual([id]);
        return claimed?.[0] as NonNullable<typeof claimed>[number];
      };

      rows['i:job-done'] = await job('job-done');
      await worker.markProcessed(await claimOne(30_000, rows['i:job-done']));

      rows['i:job-retried'] = await job('job-retried');
      expect(await worker.retry(await claimOne(30_000, rows['i:job-retried']), 0, 'busy')).toBe('pending');
      const again = await claimOne(30_000, rows['i:job-retried']);
      expect(again.attempt).toBe(1);
      expect(await worker.retry(again, 0, 'still busy')).toBe('dead');

      rows['i:job-refused'] = await job('job-refused');
      await worker.markDead(await claimOne(30_000, rows['i:job-refused']), 'refused by the test worker');

      rows['i:job-taken-over'] = await job('job-taken-over');
      const lost = await claimOne(PULL_SHORT_LEASE_MS, rows['i:job-taken-over']);
      await sleep(PULL_SHORT_LEASE_MS + 300);
      const takenOver = await claimOne(30_000, rows['i:job-taken-over']);
      expect(takenOver.claimToken).not.toBe(lost.claimToken);
      expect(takenOver.attempt).toBe(1);
      await worker.markProcessed(takenOver);

      rows['i:job-given-up'] = await job('job-given-up');
      await claimOne(PULL_SHORT_LEASE_MS, rows['i:job-given-up']);
      await sleep(PULL_SHORT_LEASE_MS + 300);
      expect((await claimOne(PULL_SHORT_LEASE_MS, rows['i:job-given-up'])).attempt).toBe(1);
      await sleep(PULL_SHORT_LEASE_MS + 300);
      expect(await worker.claim(10, 30_000)).toEqual([]);
      expect(await stateOf('inbox', rows['i:job-given-up'])).toEqual({ state: 'dead', attempt: 2 });

      // The operator: requeues of dead rows and a replay of a sent one.
      sink.failing = false;
      expect((await admin(`outbox/${rows['o:fail']}/requeue`)).status).toBe(200);
      operator.requeued.outbox.push(rows['o:fail'] as string);
      await reaches('outbox', rows['o:fail'] as string, 'sent');

      const replay = await admin(`outbox/${rows['o:ok']}/replay`);
      expect(replay.status).toBe(201);
      rows['o:replay'] = String(replay.body.id);
      operator.replayInserts.push(rows['o:replay']);
      await reaches('outbox', rows['o:replay'], 'sent');

      expect((await admin(`inbox/${rows['i:wh-empty']}/requeue`)).status).toBe(200);
      operator.requeued.inbox.push(rows['i:wh-empty'] as string);
      await until(async () => {
        const path = pathOf(await readTransitions(db.pool, db.schema), 'inbox', rows['i:wh-empty'] as string);
        return path.filter((step) => step === 'processing → dead').length === 2;
      }, 'the requeued empty-topic webhook dead again');

      expect((await admin(`inbox/${rows['i:job-refused']}/requeue`)).status).toBe(200);
      operator.requeued.inbox.push(rows['i:job-refused']);
      await worker.markProcessed(await claimOne(30_000, rows['i:job-refused']));

      // A graceful stop settles or releases what it holds.
      expect(await queuebox.stop()).toBe(0);
    },
    DRIVE_MS,
  );

  it('records only transitions of the specification’s tables, and operator moves only where the test made them', async () => {
    const transitions = await readTransitions(db.pool, db.schema);
    const { offSpec, operator: moves } = classify(transitions, operator as OperatorActions, SOURCE_TYPES);

    expect(describeOffSpec(offSpec)).toEqual([]);
    expect(moves.map((m) => `${m.kind} ${m.t.table} row ${m.t.id}`).sort()).toEqual(
      [
        `outbox requeue: dead → pending outbox row ${rows['o:fail']}`,
        `outbox replay: (insert) → pending outbox row ${rows['o:replay']}`,
        `inbox requeue: dead → pending inbox row ${rows['i:wh-empty']}`,
        `inbox requeue: dead → pending inbox row ${rows['i:job-refused']}`,
      ].sort(),
    );
  });

  it('saw every transition each path was meant to make', async () => {
    const transitions = await readTransitions(db.pool, db.schema);
    const path = (name: string) => {
      const table: Table = name.startsWith('o:') ? 'outbox' : 'inbox';
      return pathOf(transitions, table, rows[name] ?? `missing ${name}`);
    };
    const delivered = ['(insert) → pending', 'pending → processing', 'processing → sent'];
    const expected: Record<string, string[]> = {
      'o:ok': delivered,
      'o:ok-keyed': delivered,
      'o:flaky': [
        '(insert) → pending',
        'pending → processing',
        'processing → pending',
        'pending → processing',
        'processing → pending',
        'pending → processing',
        'processing → sent',
      ],
      'o:fail': [
        '(insert) → pending',
        'pending → processing',
        'processing → pending',
        'pending → processing',
        'processing → pending',
        'pending → processing',
        'processing → dead',
        'dead → pending',
        'pending → processing',
        'processing → sent',
      ],
      'o:unrouted': ['(insert) → pending', 'pending → processing', 'processing → dead'],
      'o:xform': ['(insert) → pending', 'pending → processing', 'processing → dead'],
      'o:reclaimed': [
        '(insert) → pending',
        'pending → processing',
        'processing → pending',
        'pending → processing',
        'processing → sent',
      ],
      'o:reclaimed-dead': ['(insert) → pending', 'pending → processing', 'processing → dead'],
      'o:replay': delivered,
      'o:from-i:wh-ok': delivered,
      'o:from-i:pk-good': delivered,
      'o:from-i:relay-reclaimed': delivered,
      'i:wh-ok': ['(store) → pending', 'pending → processing', 'processing → processed'],
      'i:pk-good': ['(store) → pending', 'pending → processing', 'processing → processed'],
      'i:relay-reclaimed': [
        '(store) → pending',
        'pending → processing',
        'processing → pending',
        'pending → processing',
        'processing → processed',
      ],
      'i:wh-empty': [
        '(store) → pending',
        'pending → processing',
        'processing → dead',
        'dead → pending',
        'pending → processing',
        'processing → dead',
      ],
      'i:job-done': ['(store) → pending', 'pending → processing', 'processing → processed'],
      'i:job-retried': [
        '(store) → pending',
        'pending → processing',
        'processing → pending',
        'pending → processing',
        'processing → dead',
      ],
      'i:job-refused': [
        '(store) → pending',
        'pending → processing',
        'processing → dead',
        'dead → pending',
        'pending → processing',
        'processing → processed',
      ],
      'i:job-taken-over': [
        '(store) → pending',
        'pending → processing',
        'processing → processing',
        'processing → processed',
      ],
      'i:job-given-up': [
        '(store) → pending',
        'pending → processing',
        'processing → processing',
        'processing → processing',
        'processing → dead',
      ],
    };
    if (amqpUrl) {
      expected['i:amqp-good'] = ['(store) → pending', 'pending → processing', 'processing → processed'];
      expected['o:from-i:amqp-good'] = delivered;
      expected['i:amqp-rejected'] = ['(store) → dead'];
      expected['i:amqp-not-json'] = ['(store) → dead'];
    }
    // A row's own path may hold more steps (a batch released untried goes back to pending and is claimed again),
    // so each expected path must appear in order within the recorded one.
    const inOrder = (recorded: string[], wanted: string[]) => {
      let at = 0;
      for (const step of recorded) if (step === wanted[at]) at += 1;
      return at === wanted.length;
    };
    const missing = Object.entries(expected)
      .filter(([name, wanted]) => !inOrder(path(name), wanted))
      .map(([name, wanted]) => `${name}: wanted ${wanted.join(', ')}; recorded ${path(name).join(', ')}`);
    expect(missing).toEqual([]);

    // Every row of both tables was exercised, and nothing else (the webhook the transform refused stored nothing).
    const seen = new Set(transitions.map(pairName));
    expect([...seen].sort()).toEqual(
      [
        'outbox: (insert) → pending',
        'outbox: pending → processing',
        'outbox: processing → sent',
        'outbox: processing → pending',
        'outbox: processing → dead',
        'outbox: dead → pending',
        'inbox: (store) → pending',
        ...(amqpUrl ? ['inbox: (store) → dead'] : []),
        'inbox: pending → processing',
        'inbox: processing → processed',
        'inbox: processing → pending',
        'inbox: processing → processing',
        'inbox: processing → dead',
        'inbox: dead → pending',
      ].sort(),
    );
  });
});
