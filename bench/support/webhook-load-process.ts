/**
 * The load generator of the inbox benchmark, as its own process: `connections` keep-alive node:http connections,
 * each posting one signed webhook after another (a closed loop: the next request leaves when the answer came).
 * A share of the requests repeats an earlier, accepted delivery byte for byte (same body, signature and delivery
 * id), as a provider's retry would. Requests that start during the warm-up are not counted.
 */
import { createHmac } from 'node:crypto';
import { Agent, request } from 'node:http';
import { childInput, toParent } from './child.ts';

/** What the parent passes. */
export interface LoadInput {
  /** e.g. `http://127.0.0.1:40123/inbox/bench` */
  readonly url: string;
  /** The source's HMAC secret, signature header and its prefix (generic hmac, sha256, hex). */
  readonly secret: string;
  readonly signatureHeader: string;
  readonly signaturePrefix: string;
  /** The header carrying the idempotency key. */
  readonly idHeader: string;
  readonly connections: number;
  readonly warmupSeconds: number;
  readonly seconds: number;
  /** Share of requests that repeat an accepted delivery, e.g. 0.2. */
  readonly duplicateShare: number;
  /** Distinct aggregate ids (the outbox keys after the relay). */
  readonly aggregates: number;
}

/** What the process reports once. */
export interface LoadReport {
  readonly type: 'done';
  /** Counted requests (started after the warm-up), by answer status; `error` for a failed connection. */
  readonly byStatus: Record<string, number>;
  /** Counted requests that were repeats, and how many of them got `200 duplicate`. */
  readonly duplicatesSent: number;
  readonly duplicatesAnswered: number;
  /** Latency of counted requests in ms, as sorted percentiles. */
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
  /** Seconds of the counted window. */
  readonly windowSeconds: number;
  /** Every 202 over the whole run, warm-up included (to compare with the rows stored). */
  readonly acceptedTotal: number;
  /** Every request over the whole run, warm-up included (for CPU per request). */
  readonly requestsTotal: number;
  readonly cpuSeconds: number;
}

interface Delivery {
  readonly id: string;
  readonly body: string;
  readonly signature: string;
  readonly duplicate: boolean;
}

const input = childInput<LoadInput>();
const target = new URL(input.url);
const agent = new Agent({ keepAlive: true, maxSockets: input.connections });
// Accepted originals that a repeat may pick; bounded so that memory does not grow with the run.
const accepted: Delivery[] = [];
const KEEP = 20_000;
let sequence = 0;

function nextDelivery(): Delivery {
  if (accepted.length > 0 && Math.random() < input.duplicateShare) {
    const original = accepted[Math.floor(Math.random() * accepted.length)] as Delivery;
    return { ...original, duplicate: true };
  }
  sequence++;
  const id = `evt_${process.pid}_${sequence}`;
  const body = JSON.stringify({
    id,
    type: 'order.created',
    data: { id: `order-${sequence % input.aggregates}`, amount: 1234, currency: 'EUR' },
    note: 'benchmark webhook of modest size',
  });
  const signature = `${input.signaturePrefix}${createHmac('sha256', input.secret).update(body).digest('hex')}`;
  return { id, body, signature, duplicate: false };
}

function post(delivery: Delivery): Promise<number | 'error'> {
  return new Promise((resolve) => {
    const outgoing = request(
      target,
      {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(delivery.body)),
          [input.signatureHeader]: delivery.signature,
          [input.idHeader]: delivery.id,
        },
      },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode ?? 0));
        response.on('error', () => resolve('error'));
      },
    );
    outgoing.on('error', () => resolve('error'));
    outgoing.end(delivery.body);
  });
}

const cpuAtStart = process.cpuUsage();
const started = performance.now();
const countFrom = started + input.warmupSeconds * 1000;
const countUntil = countFrom + input.seconds * 1000;
const byStatus: Record<string, number> = {};
const latencies: number[] = [];
let duplicatesSent = 0;
let duplicatesAnswered = 0;
let acceptedTotal = 0;
let requestsTotal = 0;

async function connection(): Promise<void> {
  for (;;) {
    const sentAt = performance.now();
    if (sentAt >= countUntil) return;
    const delivery = nextDelivery();
    const status = await post(delivery);
    const answeredAt = performance.now();
    requestsTotal++;
    if (status === 202) {
      acceptedTotal++;
      if (accepted.length < KEEP) accepted.push(delivery);
      else accepted[Math.floor(Math.random() * KEEP)] = delivery;
    }
    if (sentAt < countFrom) continue;
    byStatus[String(status)] = (byStatus[String(status)] ?? 0) + 1;
    latencies.push(answeredAt - sentAt);
    if (delivery.duplicate) {
      duplicatesSent++;
      if (status === 200) duplicatesAnswered++;
    }
  }
}

await Promise.all(Array.from({ length: input.connections }, connection));
agent.destroy();
latencies.sort((a, b) => a - b);
const at = (p: number) =>
  latencies[Math.min(latencies.length - 1, Math.max(0, Math.ceil(p * latencies.length) - 1))] ?? 0;
const cpu = process.cpuUsage(cpuAtStart);
toParent({
  type: 'done',
  byStatus,
  duplicatesSent,
  duplicatesAnswered,
  p50: at(0.5),
  p90: at(0.9),
  p99: at(0.99),
  max: latencies[latencies.length - 1] ?? 0,
  windowSeconds: input.seconds,
  acceptedTotal,
  requestsTotal,
  cpuSeconds: (cpu.user + cpu.system) / 1e6,
} satisfies LoadReport);
process.disconnect();
