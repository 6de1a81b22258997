/**
 * What the fault suite enqueues and what it expects to arrive: bulk keyed enqueue through @queuebox/client, a
 * receiver that records every delivery by outbox id, key and sequence and judges losses, duplicates and per-key
 * order, and views of the rows' states.
 * Nothing here imports vitest, so bench/soak.ts can use it too.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type EnqueueMessage, enqueueMany } from '@queuebox/client';
import type pg from 'pg';

// ------------------------------------------------------------------------------------------------------------
// Messages: what the test enqueues, and what it expects to arrive

/** What a test message is: its key and its place in the key's sequence (0, 1, 2, … in insert order). */
export interface Expected {
  readonly key: string;
  readonly seq: number;
}

/** The payload of a test message; the receiver reads `key` and `seq` back from it. */
export interface TestPayload {
  readonly key: string;
  readonly seq: number;
  readonly run: string;
}

/**
 * Enqueues `count` messages over `keys` keys (message i has key `k<i % keys>` and sequence `⌊i / keys⌋`) with
 * `enqueueMany` of @queuebox/client, `perTransaction` messages per transaction, on topic `topic`. Answers the
 * expected key and sequence of every new outbox id.
 */
export async function enqueueKeyed(
  pool: pg.Pool,
  options: {
    readonly schema: string;
    readonly count: number;
    readonly keys: number;
    readonly topic: string;
    readonly run: string;
    readonly perTransaction?: number;
    readonly maxAttempts?: number;
    /** First message number (to enqueue more of the same run later). Default 0. */
    readonly from?: number;
  },
): Promise<Map<string, Expected>> {
  const expected = new Map<string, Expected>();
  const perTransaction = options.perTransaction ?? 500;
  const from = options.from ?? 0;
  for (let start = from; start < from + options.count; start += perTransaction) {
    const end = Math.min(from + options.count, start + perTransaction);
    const messages: EnqueueMessage[] = [];
    for (let i = start; i < end; i += 1) {
      const key = `k${i % options.keys}`;
      const seq = Math.floor(i / options.keys);
      const payload: TestPayload = { key, seq, run: options.run };
      messages.push({ topic: options.topic, key, payload, maxAttempts: options.maxAttempts ?? 25 });
    }
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const ids = await enqueueMany(client, messages, { schema: options.schema });
      await client.query('COMMIT');
      ids.forEach((id, i) => {
        const payload = messages[i]?.payload as TestPayload;
        expected.set(id, { key: payload.key, seq: payload.seq });
      });
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }
  return expected;
}

// ------------------------------------------------------------------------------------------------------------
// The receiver

/** One delivery as the receiver saw it. */
export interface Arrival {
  /**
   * The outbox row id: the part of the `Idempotency-Key` header (the message id, `<install id>-<row id>`) after its
   * last `-`. These tests deliver from one schema, so the row id names the message.
   */
  readonly id: string;
  readonly key: string | undefined;
  readonly seq: number | undefined;
  /** The `x-idempotency-key` relay header: the inbox idempotency key of a relayed message. */
  readonly inboxKey: string | undefined;
  /** Position among all arrivals (0-based). */
  readonly index: number;
  /** Headers, when the receiver keeps them. */
  readonly headers?: IncomingHttpHeaders;
  /** The raw body, when the receiver keeps headers. */
  readonly body?: string;
}

/** A real HTTP destination on 127.0.0.1 that answers 204 and records every delivery. */
export interface RecordingReceiver {
  readonly url: string;
  readonly arrivals: Arrival[];
  /** Distinct outbox ids received so far. */
  readonly distinct: () => number;
  close(): Promise<void>;
}

/**
 * Starts a recording receiver. `keepHeaders` keeps each delivery's headers and body (small runs only).
 * `answer` may change the status for a delivery (default 204).
 */
export async function startRecordingReceiver(
  options: { readonly keepHeaders?: boolean; readonly answer?: (arrival: Arrival) => number } = {},
): Promise<RecordingReceiver> {
  const arrivals: Arrival[] = [];
  const seen = new Set<string>();
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const messageId = String(request.headers['idempotency-key'] ?? '');
      // <install id>-<row id>[-<uid>] (core's rowIdOfMessageId: this file imports nothing of core).
      const id = messageId.split('-')[1] ?? '';
      let key: string | undefined;
      let seq: number | undefined;
      try {
        const payload = JSON.parse(body) as Partial<TestPayload>;
        if (typeof payload.key === 'string') key = payload.key;
        if (typeof payload.seq === 'number') seq = payload.seq;
      } catch {
        // A body that is not a test payload is still recorded by id.
      }
      const inboxKey = request.headers['x-idempotency-key'];
      const arrival: Arrival = {
        id,
        inboxKey: typeof inboxKey === 'string' ? inboxKey : undefined,
        key,
        seq,
        index: arrivals.length,
        ...(options.keepHeaders ? { headers: request.headers, body } : {}),
      };
      arrivals.push(arrival);
      seen.add(id);
      response.writeHead(options.answer?.(arrival) ?? 204);
      response.end();
    });
  });
  // Deliveries come over keep-alive connections; the default 5 s idle timeout would only add reconnects.
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    arrivals,
    distinct: () => seen.size,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What the arrivals say against what was enqueued. */
export interface DeliveryVerdict {
  /** Enqueued ids that never arrived. */
  readonly missing: readonly string[];
  /** Arrived ids that were never enqueued (or whose body does not match the enqueued key/sequence). */
  readonly foreign: readonly string[];
  /** Ids that arrived more than once, with how many times. */
  readonly duplicates: ReadonlyMap<string, number>;
  /** Extra arrivals in total (sum of count − 1 over duplicates). */
  readonly extraArrivals: number;
  /**
   * Per-key order violations: a key whose first deliveries did not come as sequence 0, 1, 2, … (each message's
   * first arrival is the next sequence of its key). A redelivery of a sequence already seen is not a violation.
   */
  readonly orderViolations: readonly string[];
}

/** Judges `arrivals` against `expected` (outbox id → key and sequence). */
export function judgeDeliveries(
  arrivals: readonly Arrival[],
  expected: ReadonlyMap<string, Expected>,
): DeliveryVerdict {
  const counts = new Map<string, number>();
  const foreign = new Set<string>();
  const nextSeq = new Map<string, number>();
  const orderViolations: string[] = [];
  for (const arrival of arrivals) {
    const count = (counts.get(arrival.id) ?? 0) + 1;
    counts.set(arrival.id, count);
    const wanted = expected.get(arrival.id);
    if (wanted === undefined || wanted.key !== arrival.key || wanted.seq !== arrival.seq) {
      foreign.add(arrival.id);
      continue;
    }
    if (count > 1) continue;
    const next = nextSeq.get(wanted.key) ?? 0;
    if (wanted.seq !== next && orderViolations.length < 20) {
      orderViolations.push(
        `key ${wanted.key}: first delivery of sequence ${wanted.seq} (id ${arrival.id}, arrival ${arrival.index}) when ${next} was next`,
      );
    }
    nextSeq.set(wanted.key, Math.max(next, wanted.seq + 1));
  }
  const duplicates = new Map<string, number>();
  let extraArrivals = 0;
  for (const [id, count] of counts) {
    if (count > 1) {
      duplicates.set(id, count);
      extraArrivals += count - 1;
    }
  }
  const missing = [...expected.keys()].filter((id) => !counts.has(id));
  return { missing, foreign: [...foreign], duplicates, extraArrivals, orderViolations };
}

// ------------------------------------------------------------------------------------------------------------
// Database views

/** Rows per state of `schema`.`table`. */
export async function statesOf(
  pool: pg.Pool,
  schema: string,
  table: 'outbox' | 'inbox',
): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ state: string; n: number }>(
    `SELECT state, count(*)::int AS n FROM "${schema}"."${table}" GROUP BY state`,
  );
  return Object.fromEntries(rows.map((r) => [r.state, r.n]));
}

/** Ids of the outbox rows in state processing, with their lease. */
export async function processingRows(
  pool: pg.Pool,
  schema: string,
): Promise<Map<string, { leaseUntil: Date; attempt: number }>> {
  const { rows } = await pool.query<{ id: string; lease_until: Date; attempt: number }>(
    `SELECT id::text AS id, lease_until, attempt FROM "${schema}".outbox WHERE state = 'processing'`,
  );
  return new Map(rows.map((r) => [r.id, { leaseUntil: r.lease_until, attempt: r.attempt }]));
}
