/**
 * The running runtime the hostile-input suite talks to: a real process on PostgreSQL with every authentication
 * scheme configured and its secrets, a recording receiver, and the requests that record every answer (`post`,
 * `raw`, `send`) for the checks at the end. Call inside the suite's `describe`.
 */
import { randomBytes } from 'node:crypto';
import { usePostgresSchema } from '@queuebox/testing';
import { afterAll, beforeAll, expect } from 'vitest';
import { baseUrlOf, cleanup, type QueueBoxProcess, startQueueBox } from '../local/support.ts';
import { type RecordingReceiver, startRecordingReceiver } from './support/deliveries.ts';
import { SEED } from './support/fuzz.ts';
import { killAll } from './support/processes.ts';
import { faultConfigYaml, withPassword } from './support/runtime-config.ts';
import { credentials, type Secrets, type Source, sourcesYaml } from './support/signers.ts';
import { leakedSecrets, outputOf, type RawAnswer, rawHttp } from './support/wire.ts';

/** inbox.maxBodyBytes of the runtime. */
export const MAX_BODY_BYTES = 256 * 1024;

/** One answer of the server, kept for the checks at the end. */
export interface Answer {
  readonly category: string;
  readonly status: number | undefined;
  readonly body: string;
}

/** What the inbox took: the row it must hold for (source, idempotency key). */
export interface Taken {
  readonly source: Source;
  readonly idempotencyKey: string;
  readonly eventType: string | null;
  readonly aggregateId: string | null;
  readonly correlationId: string | null;
  readonly payload: unknown;
  readonly id: string;
}

/** Starts the runtime before the suite's tests and stops it after them. */
export function useHostileRuntime(url: string) {
  const { pool, schema } = usePostgresSchema(url, 'faults_hostile', 4);
  const processes: QueueBoxProcess[] = [];
  let receiver: RecordingReceiver;
  let runtime: QueueBoxProcess;
  let base: string;
  let port: number;
  const answers: Answer[] = [];
  const taken = new Map<string, Taken>();
  const tried: Record<string, number> = {};
  const secrets: Secrets = {
    sw: `whsec_${randomBytes(24).toString('base64')}`,
    hm: `hm-${randomBytes(16).toString('hex')}`,
    stripe: `whsec_stripe${randomBytes(16).toString('hex')}`,
    github: `gh-${randomBytes(16).toString('hex')}`,
    shopify: `shp-${randomBytes(16).toString('hex')}`,
    slack: `slk-${randomBytes(16).toString('hex')}`,
    bearer: `tok-${randomBytes(16).toString('hex')}`,
    basic: `fuzz-user:pw-${randomBytes(12).toString('hex')}`,
    admin: `adm-${randomBytes(16).toString('hex')}`,
    signing: `whsec_${randomBytes(24).toString('base64')}`,
    databasePassword: `db-pw-${randomBytes(8).toString('hex')}`,
  };

  afterAll(async () => {
    await killAll(processes);
    await cleanup();
    await receiver?.close();
  });

  beforeAll(async () => {
    console.info(`[faults: hostile input] seed ${SEED} (QUEUEBOX_FUZZ_SEED=${SEED} replays it)`);
    receiver = await startRecordingReceiver({ keepHeaders: true });
    runtime = await startQueueBox({
      yaml: faultConfigYaml({
        database: {
          url: withPassword(url, secrets.databasePassword as string),
          schema: schema.name,
        },
        receiverUrl: receiver.url,
        sourcesYaml: sourcesYaml(secrets),
        adminToken: secrets.admin,
        signingSecret: secrets.signing,
        maxBodyBytes: MAX_BODY_BYTES,
        claimTimeoutMs: 30_000,
        maxAttempts: 3,
      }),
    });
    processes.push(runtime);
    base = await baseUrlOf(runtime);
    port = Number(new URL(base).port);
  });

  /** POSTs through fetch and records the answer. */
  async function post(
    category: string,
    path: string,
    body: Buffer | string,
    headers: Record<string, string>,
    method = 'POST',
  ): Promise<Answer> {
    tried[category] = (tried[category] ?? 0) + 1;
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { 'content-type': 'application/json', ...headers },
      ...(method === 'GET' || method === 'HEAD' ? {} : { body }),
    });
    const answer = { category, status: response.status, body: await response.text() };
    answers.push(answer);
    return answer;
  }

  /** Sends raw bytes and records the answer. */
  async function raw(category: string, request: Buffer | string, timeoutMs?: number): Promise<RawAnswer> {
    tried[category] = (tried[category] ?? 0) + 1;
    const answer = await rawHttp(port, request, timeoutMs);
    answers.push({ category, status: answer.status, body: answer.text });
    return answer;
  }

  /** Sends a valid message to `source`; records what the inbox must hold when it answers 202. */
  async function send(
    category: string,
    source: Source,
    message: { id: string; type: string; agg?: string; corr?: string; [k: string]: unknown },
    extraHeaders: Record<string, string> = {},
  ): Promise<Answer> {
    const body = Buffer.from(JSON.stringify(message));
    const headers = { ...credentials(source, body, secrets[source] as string), ...extraHeaders };
    if (source === 'bearer') {
      headers['idempotency-key'] = message.id;
      if (message.agg !== undefined) headers['x-aggregate-id'] = message.agg;
    }
    const answer = await post(category, `/inbox/${source}`, body, headers);
    if (answer.status === 202) {
      const idempotencyKey = source === 'sw' ? (headers['webhook-id'] as string) : message.id;
      taken.set(`${source}\u0001${idempotencyKey}`, {
        source,
        idempotencyKey,
        eventType: message.type,
        aggregateId: message.agg ?? null,
        correlationId: source === 'bearer' || source === 'sw' ? null : (message.corr ?? null),
        payload: message,
        id: (JSON.parse(answer.body) as { id: string }).id,
      });
    }
    return answer;
  }

  const inboxRows = async () =>
    (
      await pool.query<{
        id: string;
        source: string;
        idempotency_key: string;
        event_type: string | null;
        aggregate_id: string | null;
        correlation_id: string | null;
        payload: unknown;
        headers: Record<string, string>;
        state: string;
      }>(
        `SELECT id::text AS id, source, idempotency_key, event_type, aggregate_id, correlation_id, payload, headers, state
         FROM "${schema.name}".inbox ORDER BY inbox.id`,
      )
    ).rows;
  const rowFor = async (source: string, key: string) =>
    (await inboxRows()).find((r) => r.source === source && r.idempotency_key === key);

  return {
    pool,
    schema,
    secrets,
    answers,
    taken,
    tried,
    post,
    raw,
    send,
    inboxRows,
    rowFor,
    get runtime() {
      return runtime;
    },
    get base() {
      return base;
    },
    get port() {
      return port;
    },
    get receiver() {
      return receiver;
    },
  };
}

/** What {@link useHostileRuntime} gives a test file. */
export type HostileRuntime = ReturnType<typeof useHostileRuntime>;

/**
 * The last test of every hostile-input file: the runtime is still the same healthy process, the inbox holds exactly
 * the messages answered 202 (as sent, without credential headers), every application error answer is JSON with a
 * stable code, nothing but the unstorable-JSON cases answered 5xx, and no configured secret shows up in the logs,
 * stderr or any answer.
 */
export async function assessHostileRuntime(h: HostileRuntime, label: string): Promise<void> {
  // Assess: alive, one start, healthy
  expect(h.runtime.child.exitCode).toBeNull();
  expect(h.runtime.logs.filter((l) => l.message === 'listening')).toHaveLength(1);
  expect((await fetch(`${h.base}/health`)).status).toBe(200);
  // The inbox holds exactly the messages answered 202, as they were sent.
  const rows = await h.inboxRows();
  const held = new Map(rows.map((r) => [`${r.source}\u0001${r.idempotency_key}`, r]));
  expect([...held.keys()].sort()).toEqual([...h.taken.keys()].sort());
  for (const [key, expected] of h.taken) {
    const row = held.get(key);
    expect(row?.id, key).toBe(expected.id);
    expect(row?.payload, key).toEqual(expected.payload);
    expect(row?.event_type ?? null, key).toBe(expected.eventType);
    // No credential header was stored.
    for (const name of [
      'authorization',
      'x-sig',
      'stripe-signature',
      'x-hub-signature-256',
      'x-shopify-hmac-sha256',
      'x-slack-signature',
      'webhook-signature',
    ]) {
      expect(row?.headers[name], `${key} ${name}`).toBeUndefined();
    }
  }
  // Answers of the application (not of node's HTTP parser) are JSON with a stable error code; no 5xx outside
  // the unstorable-JSON cases, which have their own test.
  const fromApplication = h.answers.filter(
    (a) => a.status !== undefined && a.status >= 400 && a.body.startsWith('{'),
  );
  for (const answer of fromApplication) {
    const body = JSON.parse(answer.body) as { error?: unknown; message?: unknown };
    expect(typeof body.error, answer.body).toBe('string');
    expect(typeof body.message, answer.body).toBe('string');
  }
  expect(h.answers.filter((a) => a.category !== 'unstorable' && (a.status ?? 0) >= 500)).toEqual([]);
  // No secret in the logs, stderr, or any answer.
  expect(leakedSecrets(outputOf(h.runtime), h.secrets)).toEqual([]);
  expect(leakedSecrets(h.answers.map((a) => a.body).join('\n'), h.secrets)).toEqual([]);
  const total = Object.values(h.tried).reduce((a, b) => a + b, 0);
  console.info(
    `[${label}] seed ${SEED}: ${total} hostile or probing requests (${Object.entries(h.tried)
      .map(([k, v]) => `${k} ${v}`)
      .join(
        ', ',
      )}), ${h.taken.size} accepted and stored exactly, process alive, no secret in ${h.runtime.logs.length} log lines`,
  );
}
