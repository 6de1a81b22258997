/**
 * Provider-signed requests that a well-behaved provider could send but that QueueBox answered badly, each signed by
 * the provider's own npm package and posted over real HTTP to the local runtime's request handler on a real
 * PostgreSQL: a signed event that holds a number PostgreSQL refuses as written (`1.0e-16383`), answered 500 on every
 * retry before, and a signed event sent with `Transfer-Encoding: gzip, chunked`, whose compressed bytes Node hands
 * over undecoded, answered 401 before. Each is refused with a clear 4xx and leaves no row; the same event sent
 * plainly is then stored once. And a signed event through a JSONata transform operator (`$ ~> |$|{…}|`), which
 * rounded every number of the payload before (JSONata's own `$clone`), is stored with every digit.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { createIngestion, type Sources } from '@queuebox/inbox';
import { createLogger, createQueueBoxMetrics, createRequestHandler } from '@queuebox/local';
import { useTestStore } from '@queuebox/testing';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const db = useTestStore('providers_hostile', { storePoolSize: 4 });

const SECRETS = {
  stripe: `whsec_${randomBytes(16).toString('hex')}`,
  standard: `whsec_${randomBytes(24).toString('base64')}`,
};

const sources: Sources = {
  stripe: {
    type: 'http',
    auth: { scheme: 'stripe', secrets: [SECRETS.stripe] },
    topic: 'stripe.{{ eventType }}',
  },
  standard: { type: 'http', auth: { scheme: 'standard-webhooks', secrets: [SECRETS.standard] } },
  // The usual JSONata way to add a field and keep the rest: the transform operator.
  marked: {
    type: 'http',
    auth: { scheme: 'stripe', secrets: [SECRETS.stripe] },
    transform: { jsonata: '$ ~> |$|{"received_by": "queuebox"}|' },
  },
};

let server: Server;
let port: number;

beforeAll(async () => {
  const ingestion = createIngestion({ store: db.store.inbox, sources, inbox: { basePath: '/inbox' } });
  await ingestion.ready();
  server = createServer(
    createRequestHandler({
      ingestion,
      basePath: '/inbox',
      ping: () => db.store.ping(),
      metrics: createQueueBoxMetrics({ sources: Object.keys(sources) }),
      logger: createLogger({ level: 'error' }),
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server?.close(() => resolve()));
});

interface Answer {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

/** POSTs `body` as it is with `headers` (a `Transfer-Encoding` naming chunked makes Node send it in chunks). */
function post(source: string, headers: Record<string, string>, body: string | Uint8Array): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const sent = request(
      { host: '127.0.0.1', port, method: 'POST', path: `/inbox/${source}`, headers },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>,
          }),
        );
        response.on('error', reject);
      },
    );
    sent.on('error', reject);
    sent.end(body);
  });
}

const stripe = new Stripe('sk_test_hostile');
const stripeHeaders = (body: string, timestamp?: number) => ({
  'content-type': 'application/json',
  'stripe-signature': stripe.webhooks.generateTestHeaderString({
    payload: body,
    secret: SECRETS.stripe,
    timestamp,
  }),
});

describe('signed events QueueBox cannot store as written', () => {
  it('answers 400 invalid_json to a Stripe-signed event holding 1.0e-16383, on the retry too, and stores nothing', async () => {
    // Prepare: 1.0e-16383 is 10^-16383, in range, but PostgreSQL reads its scale from the text: 16384 digits after
    // the point (the trailing zero counts), one more than numeric holds. The insert failed: 500, and Stripe retries a
    // 5xx for three days.
    const id = `evt_${randomUUID().replaceAll('-', '')}`;
    const body = `{"id":"${id}","object":"event","type":"invoice.paid","data":{"object":{"id":"in_1","rate":1.0e-16383}}}`;
    const headers = stripeHeaders(body);
    expect(stripe.webhooks.constructEvent(body, headers['stripe-signature'], SECRETS.stripe).id).toBe(id);
    // Act
    const first = await post('stripe', headers, body);
    const retry = await post('stripe', stripeHeaders(body, Math.floor(Date.now() / 1000) + 5), body);
    // Assess
    for (const answer of [first, retry]) {
      expect(answer).toEqual({
        status: 400,
        body: {
          error: 'invalid_json',
          message: expect.stringMatching(/more than 16383 digits after the decimal point/),
        },
      });
    }
    expect(await db.countInbox('stripe', id)).toBe(0);
  });

  it('stores the same value written as PostgreSQL takes it (1e-16383), once', async () => {
    const id = `evt_${randomUUID().replaceAll('-', '')}`;
    const body = `{"id":"${id}","object":"event","type":"invoice.paid","data":{"object":{"id":"in_1","rate":1e-16383}}}`;
    expect(await post('stripe', stripeHeaders(body), body)).toEqual({
      status: 202,
      body: { status: 'accepted', id: expect.any(String) },
    });
    expect(await post('stripe', stripeHeaders(body), body)).toEqual({
      status: 200,
      body: { status: 'duplicate' },
    });
    expect(await db.countInbox('stripe', id)).toBe(1);
  });
});

describe('Transfer-Encoding: gzip, chunked', () => {
  it('answers 415 to a Stripe-signed event compressed as a transfer coding, stores nothing, then takes it plain', async () => {
    // Prepare: the signature covers the JSON; a proxy compressing hop by hop sends it gzip-coded in chunks, and
    // Node's server takes off only the chunked framing. Before, the gzip bytes met the signature check: a 401 that
    // blamed the credentials.
    const id = `evt_${randomUUID().replaceAll('-', '')}`;
    const body = JSON.stringify({
      id,
      object: 'event',
      type: 'invoice.paid',
      data: { object: { id: 'in_2' } },
    });
    const headers = stripeHeaders(body);
    // Act
    const coded = await post(
      'stripe',
      { ...headers, 'transfer-encoding': 'gzip, chunked' },
      new Uint8Array(gzipSync(body)),
    );
    const countAfterCoded = await db.countInbox('stripe', id);
    const chunked = await post('stripe', { ...headers, 'transfer-encoding': 'chunked' }, body);
    // Assess
    expect(coded).toEqual({
      status: 415,
      body: { error: 'unsupported_media_type', message: expect.stringMatching(/transfer coding/) },
    });
    expect(countAfterCoded).toBe(0);
    expect(chunked).toEqual({ status: 202, body: { status: 'accepted', id: expect.any(String) } });
    expect(await db.countInbox('stripe', id)).toBe(1);
  });

  it('answers 415 to a Standard Webhooks delivery (standardwebhooks Webhook.sign) sent gzip-coded, and stores nothing', async () => {
    const id = `msg_${randomUUID()}`;
    const at = new Date();
    const body = JSON.stringify({ type: 'invoice.paid', data: { n: 1 } });
    const headers = {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': new StandardWebhook(SECRETS.standard).sign(id, at, body),
      'transfer-encoding': 'gzip, chunked',
    };
    const answer = await post('standard', headers, new Uint8Array(gzipSync(body)));
    expect(answer).toMatchObject({ status: 415, body: { error: 'unsupported_media_type' } });
    expect(await db.countInbox('standard', id)).toBe(0);
  });
});

describe('a JSONata transform operator over a Stripe-signed event', () => {
  it('stores every number of the event with the digits Stripe sent, in the fields the expression never names', async () => {
    // Prepare: a 19-digit id (kept as its source text), a double with 17 significant digits, 2^53 + 1.
    const id = `evt_${randomUUID().replaceAll('-', '')}`;
    const body =
      `{"id":"${id}","object":"event","type":"charge.succeeded","data":{"object":{"id":"ch_1",` +
      '"merchant_ref":1234567890123456789,"fx_rate":1.0842021724855044,"ledger_seq":9007199254740993}}}';
    // Act
    const answer = await post('marked', stripeHeaders(body), body);
    // Assess: read as PostgreSQL holds it, not through a JSON.parse that would round it again.
    expect(answer.status).toBe(202);
    const { rows } = await db.pool.query<{ object: string; marked: string }>(
      `SELECT payload->'data'->>'object' AS object, payload->>'received_by' AS marked
         FROM "${db.schema}".inbox WHERE source = 'marked' AND idempotency_key = $1`,
      [id],
    );
    expect(rows).toEqual([
      {
        object:
          '{"id": "ch_1", "fx_rate": 1.0842021724855044, "ledger_seq": 9007199254740993, "merchant_ref": 1234567890123456789}',
        marked: 'queuebox',
      },
    ]);
  });
});
