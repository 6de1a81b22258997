import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { ConfigError, type OutgoingMessage } from '@queuebox/core';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  classifyStatus,
  createHttpPublisher,
  IDEMPOTENCY_HEADER,
  MAX_RETRY_AFTER_PAUSE_MS,
  maskCardNumbers,
} from '../src/http-publisher.ts';
import { closedPort, type HttpReceiver, startHttpReceiver } from './support/http-receiver.ts';

const SECRET = `whsec_${Buffer.from('a test key of 24 bytes!!').toString('base64')}`;

const aMessage = (over: Partial<OutgoingMessage> = {}): OutgoingMessage => ({
  id: '1001',
  topic: 'orders.created',
  key: 'order-1',
  payload: { orderId: 1, total: 9.5 },
  headers: {},
  attempt: 0,
  ...over,
});

/** Verifies a delivery the way a Standard Webhooks receiver does (written from the spec, not from our signer). */
function verifyStandardWebhook(secret: string, headers: Record<string, string>, rawBody: string): boolean {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (!id || !timestamp || !signatures) return false;
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > 300) return false;
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${rawBody}`).digest();
  return signatures.split(' ').some((entry) => {
    const [version, signature] = entry.split(',', 2);
    const given = Buffer.from(signature ?? '', 'base64');
    return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected);
  });
}

describe('classifyStatus', () => {
  it.each([
    [200, 'sent'],
    [204, 'sent'],
    [299, 'sent'],
    [408, 'retry'],
    [425, 'retry'],
    [429, 'retry'],
    [500, 'retry'],
    [503, 'retry'],
    [400, 'retry'],
    [401, 'retry'],
    [404, 'retry'],
    [409, 'retry'],
    [410, 'retry'],
    [422, 'retry'],
    [301, 'retry'],
    [101, 'retry'],
  ])('%i → %s', (status, expected) => {
    expect(classifyStatus(status)).toBe(expected);
  });
});

describe('createHttpPublisher against a loopback receiver', () => {
  let receiver: HttpReceiver;

  beforeEach(async () => {
    receiver = await startHttpReceiver();
  });
  afterEach(async () => {
    await receiver.close();
  });

  it('posts the JSON payload with the idempotency header, static and row headers, and a verifiable signature', async () => {
    // Prepare
    const publisher = createHttpPublisher({
      type: 'http',
      url: receiver.url,
      headers: { Authorization: 'Bearer configured', 'X-Static': 's' },
      signing: { scheme: 'standard-webhooks', secrets: [SECRET] },
    });
    const message = aMessage({
      headers: {
        'X-Correlation-Id': 'corr-1',
        authorization: 'Bearer from-row',
        'Content-Length': '999',
        Host: 'elsewhere.example',
        'Idempotency-Key': 'forged',
      },
    });
    // Act
    const outcome = await publisher.publish(message);
    await publisher.close();
    // Assess
    expect(outcome).toEqual({ kind: 'sent' });
    const [request] = receiver.requests;
    expect(request?.method).toBe('POST');
    expect(request?.url).toBe('/hooks');
    expect(JSON.parse(request?.body ?? '')).toEqual({ orderId: 1, total: 9.5 });
    expect(request?.headers).toMatchObject({
      'content-type': 'application/json',
      'idempotency-key': '1001',
      authorization: 'Bearer configured',
      'x-static': 's',
      'x-correlation-id': 'corr-1',
      'webhook-id': '1001',
    });
    expect(request?.headers.host).not.toBe('elsewhere.example');
    expect(request?.headers['content-length']).toBe(String(Buffer.byteLength(request?.body ?? '')));
    expect(verifyStandardWebhook(SECRET, request?.headers ?? {}, request?.body ?? '')).toBe(true);
    expect(verifyStandardWebhook(SECRET, request?.headers ?? {}, '{"orderId":2}')).toBe(false);
  });

  it('delivers row headers HTTP cannot carry as is: odd values percent-encoded, invalid names left out', async () => {
    // Prepare
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url });
    const message = aMessage({
      headers: {
        'x-idempotency-key': '订单-1',
        'X-Correlation-Id': 'line\r\nInjected: yes',
        'x-plain': 'a b\tc',
        'x-latin': 'caf\u00e9 \u00ff',
        'bad name': 'dropped',
        'x-empty': '',
      },
    });
    // Act
    const outcome = await publisher.publish(message);
    await publisher.close();
    // Assess
    expect(outcome).toEqual({ kind: 'sent' });
    const headers = receiver.requests[0]?.headers ?? {};
    expect(headers['x-idempotency-key']).toBe(encodeURIComponent('订单-1'));
    expect(decodeURIComponent(headers['x-correlation-id'] ?? '')).toBe('line\r\nInjected: yes');
    expect(headers.injected).toBeUndefined();
    expect(headers['x-plain']).toBe('a b\tc');
    // Latin-1 travels as its own bytes (node:http reads header bytes as Latin-1), not as UTF-8.
    expect(headers['x-latin']).toBe('caf\u00e9 \u00ff');
    expect(headers['x-empty']).toBe('');
    expect(Object.keys(headers)).not.toContain('bad name');
  });

  it("leaves a row's hop-by-hop, framing and Proxy headers out of the request", async () => {
    // Prepare: a row as an application (or a relay before the inbox stopped storing Proxy-*) could have written it.
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url });
    const message = aMessage({
      headers: {
        Connection: 'close',
        'Keep-Alive': 'timeout=1',
        'Transfer-Encoding': 'chunked',
        TE: 'trailers',
        Trailer: 'x-late',
        Upgrade: 'websocket',
        Host: 'evil.example',
        'Content-Length': '1',
        Expect: '100-continue',
        Proxy: 'http://evil.example:3128',
        'Proxy-Authorization': 'Basic eA==',
        'Proxy-Connection': 'keep-alive',
        'Proxy-Status': 'edge',
        'X-Kept': 'yes',
      },
    });
    // Act
    const first = await publisher.publish(message);
    const second = await publisher.publish(aMessage({ id: '1002' }));
    await publisher.close();
    // Assess: both went out on one intact connection, with only the row's own header.
    expect([first, second]).toEqual([{ kind: 'sent' }, { kind: 'sent' }]);
    expect(receiver.connections).toBe(1);
    const headers = receiver.requests[0]?.headers ?? {};
    expect(headers['x-kept']).toBe('yes');
    expect(headers.host).toBe(new URL(receiver.url).host);
    expect(headers['content-length']).toBe(String(Buffer.byteLength(receiver.requests[0]?.body ?? '')));
    expect(JSON.parse(receiver.requests[0]?.body ?? '')).toEqual(message.payload);
    for (const name of ['transfer-encoding', 'te', 'trailer', 'upgrade', 'expect', 'keep-alive', 'proxy']) {
      expect(headers[name], name).toBeUndefined();
    }
    expect(Object.keys(headers).filter((h) => h.startsWith('proxy-'))).toEqual([]);
  });

  it('signs with each secret so a receiver on either key of a rotation accepts', async () => {
    // Prepare
    const other = `whsec_${Buffer.from('the next key, rotated in').toString('base64')}`;
    const publisher = createHttpPublisher({
      type: 'http',
      url: receiver.url,
      signing: { scheme: 'standard-webhooks', secrets: [other, SECRET] },
    });
    // Act
    await publisher.publish(aMessage());
    // Assess
    const headers = receiver.requests[0]?.headers ?? {};
    const body = receiver.requests[0]?.body ?? '';
    expect(verifyStandardWebhook(SECRET, headers, body)).toBe(true);
    expect(verifyStandardWebhook(other, headers, body)).toBe(true);
  });

  it('uses the configured method and sends no signature headers without signing', async () => {
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url, method: 'put' });
    await publisher.publish(aMessage());
    expect(receiver.requests[0]?.method).toBe('PUT');
    expect(receiver.requests[0]?.headers['webhook-signature']).toBeUndefined();
    expect(receiver.requests[0]?.headers[IDEMPOTENCY_HEADER.toLowerCase()]).toBe('1001');
  });

  it('retries a 4xx as a 5xx, with the response body in the error (the row goes dead only at its last attempt)', async () => {
    // Prepare
    receiver.handle((request, response) => {
      const status = JSON.parse(request.body).status as number;
      response.writeHead(status, { 'content-type': 'application/json' }).end(`{"error":"status ${status}"}`);
    });
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url });
    // Act
    const [bad, missing, conflict, broken, unavailable] = await Promise.all(
      [400, 404, 409, 500, 503].map((status) => publisher.publish(aMessage({ payload: { status } }))),
    );
    // Assess
    expect(bad).toEqual({ kind: 'retry', error: 'HTTP 400 Bad Request: {"error":"status 400"}' });
    expect(missing?.kind).toBe('retry');
    expect(conflict?.kind).toBe('retry');
    expect(broken).toEqual({
      kind: 'retry',
      error: 'HTTP 500 Internal Server Error: {"error":"status 500"}',
    });
    expect(unavailable?.kind).toBe('retry');
  });

  it.each([408, 425, 429])('retries a %i', async (status) => {
    receiver.handle((_request, response) => {
      response.writeHead(status).end();
    });
    const outcome = await createHttpPublisher({ type: 'http', url: receiver.url }).publish(aMessage());
    expect(outcome.kind).toBe('retry');
  });

  it('does not follow a redirect; the row is retried', async () => {
    receiver.handle((_request, response) => {
      response.writeHead(302, { location: 'http://127.0.0.1:1/elsewhere' }).end();
    });
    const outcome = await createHttpPublisher({ type: 'http', url: receiver.url }).publish(aMessage());
    expect(outcome).toEqual({
      kind: 'retry',
      error: 'HTTP 302 Found (Location: http://127.0.0.1:1/elsewhere)',
    });
    expect(receiver.requests).toHaveLength(1);
  });

  it('passes Retry-After out, in seconds or as an HTTP-date', async () => {
    // Prepare
    const inAMinute = new Date(Date.now() + 60_000).toUTCString();
    receiver.handle((request, response) => {
      const value = request.body.includes('date') ? inAMinute : '7';
      response.writeHead(429, { 'retry-after': value }).end();
    });
    // One publisher each: the first answer pauses its destination (see the next test).
    const publish = (payload: string) =>
      createHttpPublisher({ type: 'http', url: receiver.url }).publish(aMessage({ payload }));
    // Act
    const seconds = await publish('seconds');
    const date = await publish('date');
    // Assess
    expect(seconds).toMatchObject({ kind: 'retry', retryAfterMs: 7000 });
    expect(date.kind).toBe('retry');
    const dateMs = date.kind === 'retry' ? (date.retryAfterMs ?? -1) : -1;
    // HTTP-dates have whole seconds, so up to one second is lost.
    expect(dateMs).toBeGreaterThan(58_000);
    expect(dateMs).toBeLessThanOrEqual(60_000);
  });

  it('spaces the rows it gives back for want of a connection by the destination’s pace, so a slow backlog is not claimed again all at once', async () => {
    // Prepare: a destination that answers in 200 ms, 2 connections (one answer every ~100 ms while both are busy)
    receiver.handle(async (_request, response) => {
      await new Promise((resolve) => setTimeout(resolve, 200));
      response.writeHead(200).end('ok');
    });
    const publisher = createHttpPublisher({
      type: 'http',
      url: receiver.url,
      maxConcurrency: 2,
      laneWaitMs: 150,
    });
    // Warm: enough answers with both connections busy to know the pace
    await Promise.all(Array.from({ length: 6 }, () => publisher.publish(aMessage())));

    // Act: a backlog of 40 at once
    const outcomes = await Promise.all(Array.from({ length: 40 }, () => publisher.publish(aMessage())));

    // Assess: the rows given back are due one answer interval apart, not all a lane wait later (they all were,
    // 150 ms, before)
    const delays = outcomes
      .filter((o) => o.kind === 'retry' && o.unstarted === true)
      .map((o) => (o.kind === 'retry' ? (o.retryAfterMs ?? 0) : 0))
      .sort((a, b) => a - b);
    expect(delays.length).toBeGreaterThan(30);
    expect(delays[0]).toBeGreaterThanOrEqual(150);
    // ~36 rows × ~100 ms: the last is due seconds later (generous bounds for a loaded machine)
    expect(delays[delays.length - 1]).toBeGreaterThan(1_500);
    expect(new Set(delays).size).toBeGreaterThan(delays.length / 2);
    await publisher.close?.();
  });

  it('sends nothing while a destination that answered with Retry-After waits, and gives the messages back untried', async () => {
    // Prepare: 429 with Retry-After: 5, then 503 with Retry-After: 0 (no pause), then 200; a clock the test moves.
    const answers: Array<[number, Record<string, string>]> = [
      [429, { 'retry-after': '5' }],
      [503, { 'retry-after': '0' }],
      [500, {}],
    ];
    receiver.handle((_request, response) => {
      const [status, headers] = answers.shift() ?? [200, {}];
      response.writeHead(status, headers).end();
    });
    let now = Date.parse('2026-12-07T05:00:00Z');
    const publisher = createHttpPublisher(
      { type: 'http', url: receiver.url },
      { clock: { now: () => now }, monotonic: () => now },
    );
    // Act
    const limited = await publisher.publish(aMessage({ id: '1' }));
    now += 2_000;
    const during = await publisher.publish(aMessage({ id: '2' }));
    now += 3_000;
    const unpausing = await publisher.publish(aMessage({ id: '3' }));
    const afterZero = await publisher.publish(aMessage({ id: '4' }));
    const afterNone = await publisher.publish(aMessage({ id: '5' }));
    await publisher.close();
    // Assess: the limited request counts (a retry with its Retry-After); the message sent 2 s into the 5 s pause is
    // not sent and is due when the pause ends; the pause is over at 5 s; Retry-After: 0 and no Retry-After pause
    // nothing.
    expect(limited).toMatchObject({ kind: 'retry', retryAfterMs: 5000 });
    expect(limited).not.toHaveProperty('unstarted');
    expect(during).toEqual({
      kind: 'retry',
      error: 'destination "http" asked for a pause (Retry-After) until 2026-12-07T05:00:05.000Z',
      unstarted: true,
      retryAfterMs: 3000,
    });
    expect(unpausing).toMatchObject({
      kind: 'retry',
      error: 'HTTP 503 Service Unavailable',
      retryAfterMs: 0,
    });
    expect(afterZero).toEqual({ kind: 'retry', error: 'HTTP 500 Internal Server Error' });
    expect(afterNone).toEqual({ kind: 'sent' });
    expect(receiver.requests.map((r) => r.headers[IDEMPOTENCY_HEADER.toLowerCase()])).toEqual([
      '1',
      '3',
      '4',
      '5',
    ]);
  });

  it('pauses for a 429 or a 503 only: a Retry-After on another status concerns that request alone', async () => {
    // Prepare: a 413 for one large row (RFC 9110 lets it say when to try again), then a 400, both with Retry-After.
    const answers: Array<[number, Record<string, string>]> = [
      [413, { 'retry-after': '60' }],
      [400, { 'retry-after': '60' }],
    ];
    receiver.handle((_request, response) => {
      const [status, headers] = answers.shift() ?? [200, {}];
      response.writeHead(status, headers).end();
    });
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url });
    // Act
    const large = await publisher.publish(aMessage({ id: '1' }));
    const bad = await publisher.publish(aMessage({ id: '2' }));
    const next = await publisher.publish(aMessage({ id: '3' }));
    await publisher.close();
    // Assess: each row keeps its Retry-After for its own retry; nothing else waits.
    expect(large).toMatchObject({ kind: 'retry', retryAfterMs: 60_000 });
    expect(bad).toMatchObject({ kind: 'retry', retryAfterMs: 60_000 });
    expect(next).toEqual({ kind: 'sent' });
    expect(receiver.requests).toHaveLength(3);
  });

  it('pauses a destination at most MAX_RETRY_AFTER_PAUSE_MS, whatever its Retry-After', async () => {
    // Prepare: a destination that asks for a day.
    receiver.handle((_request, response) => {
      response.writeHead(429, { 'retry-after': '86400' }).end();
    });
    let now = Date.parse('2026-12-07T05:00:00Z');
    const publisher = createHttpPublisher(
      { type: 'http', url: receiver.url },
      { clock: { now: () => now }, monotonic: () => now },
    );
    // Act
    await publisher.publish(aMessage({ id: '1' }));
    const paused = await publisher.publish(aMessage({ id: '2' }));
    now += MAX_RETRY_AFTER_PAUSE_MS;
    const after = await publisher.publish(aMessage({ id: '3' }));
    await publisher.close();
    // Assess
    expect(paused).toMatchObject({ unstarted: true, retryAfterMs: MAX_RETRY_AFTER_PAUSE_MS });
    expect(after).toMatchObject({ kind: 'retry', retryAfterMs: 86_400_000 });
    expect(after).not.toHaveProperty('unstarted');
    expect(receiver.requests).toHaveLength(2);
  });

  it('keeps a Retry-After pause on the monotonic clock: a wall clock stepped back does not lengthen it', async () => {
    // Prepare: a 429 with Retry-After: 5; the wall clock (`clock`) and the monotonic one moved apart by the test.
    receiver.handle((_request, response) => {
      if (receiver.requests.length === 1) response.writeHead(429, { 'retry-after': '5' }).end();
      else response.writeHead(200).end();
    });
    let wall = Date.parse('2026-12-07T05:00:00Z');
    let mono = 1_000;
    const publisher = createHttpPublisher(
      { type: 'http', url: receiver.url },
      { clock: { now: () => wall }, monotonic: () => mono },
    );
    // Act: 2 s pass, the wall clock steps back 120 s (NTP), 3 s more pass
    await publisher.publish(aMessage({ id: '1' }));
    wall += 2_000 - 120_000;
    mono += 2_000;
    const during = await publisher.publish(aMessage({ id: '2' }));
    wall += 3_000;
    mono += 3_000;
    const after = await publisher.publish(aMessage({ id: '3' }));
    await publisher.close();
    // Assess: the pause ends 5 s after the 429, not 125 s (as on the wall clock before); its end in the message is
    // wall time.
    expect(during).toEqual({
      kind: 'retry',
      error: 'destination "http" asked for a pause (Retry-After) until 2026-12-07T04:58:05.000Z',
      unstarted: true,
      retryAfterMs: 3000,
    });
    expect(after).toEqual({ kind: 'sent' });
    expect(receiver.requests).toHaveLength(2);
  });

  describe('by default (performance.now), with only Date faked and stepped', () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    it('ends a Retry-After pause when its time has passed, though the wall clock stepped back 120 s', async () => {
      // Prepare
      vi.useFakeTimers({ toFake: ['Date'], now: Date.parse('2026-12-07T05:00:00Z') });
      receiver.handle((_request, response) => {
        if (receiver.requests.length === 1) response.writeHead(429, { 'retry-after': '1' }).end();
        else response.writeHead(200).end();
      });
      const publisher = createHttpPublisher({ type: 'http', url: receiver.url });
      // Act
      const limited = await publisher.publish(aMessage({ id: '1' }));
      vi.setSystemTime(Date.now() - 120_000);
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      const after = await publisher.publish(aMessage({ id: '2' }));
      await publisher.close();
      // Assess
      expect(limited).toMatchObject({ kind: 'retry', retryAfterMs: 1000 });
      expect(after).toEqual({ kind: 'sent' });
    });

    it('does not take connections for stuck because the wall clock stepped forward', async () => {
      // Prepare: one connection, held by a first request; laneWaitMs 150
      vi.useFakeTimers({ toFake: ['Date'], now: Date.parse('2026-12-07T05:00:00Z') });
      const held: (() => void)[] = [];
      receiver.handle((_request, response) => {
        held.push(() => response.writeHead(204).end());
      });
      const publisher = createHttpPublisher({
        type: 'http',
        url: receiver.url,
        maxConcurrency: 1,
        laneWaitMs: 150,
      });
      const first = publisher.publish(aMessage({ id: '1' }));
      while (held.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      // Act: the wall clock steps forward 120 s; a second row wants the connection
      vi.setSystemTime(Date.now() + 120_000);
      const second = await publisher.publish(aMessage({ id: '2' }));
      held[0]?.();
      await first;
      await publisher.close();
      // Assess: given back after its lane wait, due again in about that long, not in MAX_LANE_RELEASE_DELAY_MS
      // (30 s: the step counted as time the connection was stuck)
      expect(second).toMatchObject({ kind: 'retry', unstarted: true });
      expect(second.kind === 'retry' && second.retryAfterMs).toBeLessThan(5_000);
    });
  });

  it('retries a request that gets no answer within timeoutMs', async () => {
    // Prepare: the receiver never answers.
    receiver.handle(() => undefined);
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url, timeoutMs: 200 });
    // Act
    const outcome = await publisher.publish(aMessage());
    // Assess
    expect(outcome).toEqual({ kind: 'retry', error: 'timeout after 200 ms' });
  });

  it('retries when the connection is refused', async () => {
    // Prepare
    const port = await closedPort();
    const publisher = createHttpPublisher({ type: 'http', url: `http://127.0.0.1:${port}/hooks` });
    // Act
    const outcome = await publisher.publish(aMessage());
    // Assess
    expect(outcome.kind).toBe('retry');
    expect(outcome.kind === 'retry' && outcome.error).toMatch(/^network error: .*ECONNREFUSED/);
  });

  it('keeps only a short excerpt (256 bytes) of a long error body', async () => {
    // Prepare
    const long = 'x'.repeat(100_000);
    receiver.handle((_request, response) => {
      response.writeHead(500).end(long);
    });
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url });
    // Act
    const outcome = await publisher.publish(aMessage());
    // Assess
    const error = outcome.kind === 'retry' ? outcome.error : '';
    expect(error).toBe(`HTTP 500 Internal Server Error: ${'x'.repeat(256)}… (truncated at 256 bytes)`);
  });

  it('takes our own header values out of an error body that echoes the request, even where the excerpt ends', async () => {
    // Prepare: a destination that answers 400 with the request's headers, as some debugging endpoints do.
    receiver.handle((request, response) => {
      response.writeHead(400).end(`${'p'.repeat(240)} ${JSON.stringify(request.headers)}`);
    });
    const token = 'tok_0123456789abcdef';
    const publisher = createHttpPublisher({
      type: 'http',
      url: receiver.url,
      headers: { Authorization: `Bearer ${token}`, Cookie: 'session=s3cr3t-cookie' },
      signing: { scheme: 'standard-webhooks', secrets: [SECRET] },
    });
    // Act
    const outcome = await publisher.publish(aMessage());
    const short = await createHttpPublisher({
      type: 'http',
      url: receiver.url,
      headers: { 'X-Key': token },
      maxErrorBodyBytes: 250,
    }).publish(aMessage());
    // Assess
    const error = outcome.kind === 'retry' ? outcome.error : '';
    expect(error).toMatch(/^HTTP 400 Bad Request: p+ /);
    expect(error).not.toContain(token);
    expect(error).not.toContain('s3cr3t-cookie');
    expect(error).not.toContain('tok_');
    const cut = short.kind === 'retry' ? short.error : '';
    expect(cut).not.toContain('tok_0');
  });

  it('masks card numbers in the excerpt of an answer that echoes the payload, and keeps no body with maxErrorBodyBytes 0', async () => {
    // Prepare: the receiver answers 400 echoing the request body, with a card number in its reason phrase too.
    receiver.handle((request, response) => {
      response.writeHead(400, 'Refused 4111 1111 1111 1111').end(`{"echo":${request.body}}`);
    });
    const payload = {
      card: { number: '4111111111111111', amex: '3782-822463-10005' },
      orderId: '1234567890123456',
      phone: '+44 20 7946 0958',
    };
    // Act
    const masked = await createHttpPublisher({ type: 'http', url: receiver.url }).publish(
      aMessage({ payload }),
    );
    const bare = await createHttpPublisher({ type: 'http', url: receiver.url, maxErrorBodyBytes: 0 }).publish(
      aMessage({ payload }),
    );
    // Assess: the Luhn-valid numbers are gone (in the body and the reason phrase); an order id of card length that
    // fails the check, and a phone number, stay.
    const error = masked.kind === 'retry' ? masked.error : '';
    expect(error).toBe(
      'HTTP 400 Refused ***: {"echo":{"card":{"number":"***","amex":"***"},"orderId":"1234567890123456","phone":"+44 20 7946 0958"}}',
    );
    expect(bare).toEqual({ kind: 'retry', error: 'HTTP 400 Refused ***' });
  });

  it('masks a card number beside other digits (an expiry, a reference) in an error excerpt', () => {
    expect(maskCardNumbers('card 4111 1111 1111 1111 12/25 cvc 123')).toBe('card *** 12/25 cvc 123');
    expect(maskCardNumbers('ref 12 4111-1111-1111-1111')).toBe('ref 12 ***');
    expect(maskCardNumbers('pan 4111 1111 1111 1111 exp 1225')).toBe('pan *** exp 1225');
    // After other digits, in a run longer than any card number (review).
    expect(maskCardNumbers('Order 2024 4111 1111 1111 1111')).toBe('Order 2024 ***');
    expect(maskCardNumbers('2025-12-07 4111 1111 1111 1111')).toBe('2025-12-07 ***');
    expect(maskCardNumbers('ref 123 456 4111 1111 1111 1111')).toBe('ref 123 456 ***');
    expect(maskCardNumbers('{"pan":"5500005555555559","n":12}')).toBe('{"pan":"***","n":12}');
    // Digits that are no card number stay: a 16-digit id failing the check, a phone number.
    expect(maskCardNumbers('order 1234567890123456, +44 20 7946 0958')).toBe(
      'order 1234567890123456, +44 20 7946 0958',
    );
  });

  it("sends its own Content-Type: a row carrying the sender's text/html never reaches the destination", async () => {
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url });
    await publisher.publish(
      aMessage({ headers: { 'content-type': 'text/html; charset=iso-8859-1', 'X-Other': 'o' } }),
    );
    await publisher.close();
    expect(receiver.requests[0]?.headers['content-type']).toBe('application/json');
    expect(receiver.requests[0]?.headers['x-other']).toBe('o');
  });

  it('never has more than maxConcurrency requests in flight', async () => {
    // Prepare: answer requests in waves of three, so a cap below three would hang and one above would show.
    const held: (() => void)[] = [];
    receiver.handle((_request, response) => {
      held.push(() => response.writeHead(204).end());
      if (held.length === 3) for (const answer of held.splice(0)) answer();
    });
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url, maxConcurrency: 3 });
    // Act
    const outcomes = await Promise.all(
      Array.from({ length: 12 }, (_, i) => publisher.publish(aMessage({ id: String(i + 1) }))),
    );
    // Assess
    expect(outcomes.every((o) => o.kind === 'sent')).toBe(true);
    expect(receiver.maxInFlight).toBe(3);
    expect(new Set(receiver.requests.map((r) => r.headers['idempotency-key'])).size).toBe(12);
  });

  it('reuses one kept-alive connection for sequential requests', async () => {
    // Prepare
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url });
    // Act
    for (let i = 0; i < 10; i++)
      expect((await publisher.publish(aMessage({ id: String(i) }))).kind).toBe('sent');
    await publisher.close();
    // Assess: without keep-alive there would be ten.
    expect(receiver.requests).toHaveLength(10);
    expect(receiver.connections).toBe(1);
  });

  it('sends once more on a fresh connection when the server drops a kept-alive one as the request arrives', async () => {
    // Prepare: the server closes each connection when a second request arrives on it, without answering — what
    // a server closing an idle connection at the moment we reuse it looks like.
    const served = new WeakMap<object, number>();
    receiver.handle((_request, response) => {
      const count = (served.get(response.socket as object) ?? 0) + 1;
      served.set(response.socket as object, count);
      if (count > 1) response.socket?.destroy();
      else response.writeHead(200).end('ok');
    });
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url });
    // Act
    const first = await publisher.publish(aMessage({ id: '1' }));
    const second = await publisher.publish(aMessage({ id: '2' }));
    await publisher.close();
    // Assess
    expect([first, second]).toEqual([{ kind: 'sent' }, { kind: 'sent' }]);
    expect(receiver.requests.map((r) => r.headers['idempotency-key'])).toEqual(['1', '2', '2']);
    expect(receiver.connections).toBe(2);
  });

  it('retries, without a second try, when a fresh connection is dropped before an answer', async () => {
    receiver.handle((_request, response) => {
      response.socket?.destroy();
    });
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url });
    const outcome = await publisher.publish(aMessage());
    await publisher.close();
    expect(outcome.kind).toBe('retry');
    expect(outcome.kind === 'retry' && outcome.error).toMatch(/^network error: .*other side closed/);
    expect(receiver.requests).toHaveLength(1);
  });

  it('answers retry when the caller aborts before the destination answered, and unstarted when before it was sent', async () => {
    // Prepare: the receiver never answers.
    receiver.handle(() => undefined);
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url });
    const controller = new AbortController();
    // Act
    const pending = publisher.publish(aMessage(), controller.signal);
    await new Promise((resolve) => setTimeout(resolve, 50));
    controller.abort();
    const outcome = await pending;
    const already = await publisher.publish(aMessage({ id: '2' }), controller.signal);
    await publisher.close();
    // Assess
    expect(outcome).toEqual({ kind: 'retry', error: 'aborted before the destination answered' });
    expect(already).toEqual({ kind: 'retry', error: 'aborted before it was sent', unstarted: true });
    expect(receiver.requests).toHaveLength(1);
  });

  it('refuses a static header no request can carry (a secret read with its line break), naming neither value nor secret', () => {
    let error: unknown;
    try {
      createHttpPublisher({
        type: 'http',
        name: 'billing',
        url: receiver.url,
        headers: {
          Authorization: 'Bearer sk_live_abcdefghijklmnop\n',
          'X-Tenant': 'caf\u00e9',
          'X-Emoji': 'ok \u{1F600}',
          'Transfer-Encoding': 'chunked',
          Expect: '100-continue',
          'Content-Length': '10',
        },
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const issues = (error as ConfigError).issues;
    expect(issues.map((i) => i.path)).toEqual([
      'destinations.billing.headers.Authorization',
      'destinations.billing.headers.X-Emoji',
      'destinations.billing.headers.Transfer-Encoding',
      'destinations.billing.headers.Expect',
      'destinations.billing.headers.Content-Length',
    ]);
    expect(issues[0]?.message).toMatch(/U\+000A, .*trailing line break/);
    expect(issues[1]?.message).toMatch(/U\+1F600,/);
    expect(JSON.stringify(issues)).not.toContain('sk_live');
    expect(receiver.requests).toHaveLength(0);
  });

  it('signs when the request is sent, not when it began waiting for a connection', async () => {
    // Prepare: one connection; the first request is held while the second waits behind it, and meanwhile ten
    // minutes pass (the clock starts ten minutes ago and is moved to now before the first is answered).
    let now = Date.now() - 600_000;
    const clock = { now: () => now };
    const held: (() => void)[] = [];
    receiver.handle((_request, response) => {
      if (held.length === 0 && receiver.requests.length === 1) held.push(() => response.writeHead(204).end());
      else response.writeHead(204).end();
    });
    const publisher = createHttpPublisher(
      {
        type: 'http',
        url: receiver.url,
        maxConcurrency: 1,
        signing: { scheme: 'standard-webhooks', secrets: [SECRET] },
      },
      { clock },
    );
    // Act
    const first = publisher.publish(aMessage({ id: '1' }));
    const second = publisher.publish(aMessage({ id: '2' }));
    while (held.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    now = Date.now();
    held[0]?.();
    const outcomes = await Promise.all([first, second]);
    await publisher.close();
    // Assess: the second carries the time it was sent, so a verifier with a 5-minute tolerance accepts it.
    expect(outcomes).toEqual([{ kind: 'sent' }, { kind: 'sent' }]);
    const late = receiver.requests[1];
    expect(late?.headers['webhook-id']).toBe('2');
    expect(late?.headers['webhook-timestamp']).toBe(String(Math.floor(now / 1000)));
    expect(verifyStandardWebhook(SECRET, late?.headers ?? {}, late?.body ?? '')).toBe(true);
  });

  it('takes the status line as the answer when the body is still arriving at the timeout', async () => {
    // Prepare: the receiver sends its status and the start of a body, then nothing more.
    receiver.handle((request, response) => {
      const { status } = JSON.parse(request.body) as { status: number };
      const headers = status === 503 ? { 'retry-after': '7' } : {};
      response.writeHead(status, headers).write(status === 200 ? 'ok, and then' : '{"error":"trickl');
    });
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url, timeoutMs: 300 });
    // Act
    const ok = await publisher.publish(aMessage({ id: '1', payload: { status: 200 } }));
    const bad = await publisher.publish(aMessage({ id: '2', payload: { status: 400 } }));
    const busy = await publisher.publish(aMessage({ id: '3', payload: { status: 503 } }));
    await publisher.close();
    // Assess: the verdict of each status, with what arrived of the body; each connection with an unread body
    // is closed, not used for the next request.
    expect(ok).toEqual({ kind: 'sent' });
    expect(bad).toEqual({ kind: 'retry', error: 'HTTP 400 Bad Request: {"error":"trickl' });
    expect(busy).toEqual({
      kind: 'retry',
      error: 'HTTP 503 Service Unavailable: {"error":"trickl',
      retryAfterMs: 7000,
    });
    expect(receiver.requests).toHaveLength(3);
    expect(receiver.connections).toBe(3);
  });

  it('takes the status line as the answer when the caller aborts while the body is still arriving', async () => {
    // Prepare
    receiver.handle((_request, response) => {
      response.writeHead(202).write('accepted, and then');
    });
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url });
    const controller = new AbortController();
    // Act
    const pending = publisher.publish(aMessage(), controller.signal);
    while (receiver.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    await new Promise((resolve) => setTimeout(resolve, 50));
    controller.abort();
    const outcome = await pending;
    await publisher.close();
    // Assess
    expect(outcome).toEqual({ kind: 'sent' });
  });

  it('reads past informational 1xx answers to the final status', async () => {
    // Prepare: 102 Processing and two 103 Early Hints before the final answer (RFC 9110 §15.2).
    receiver.handle((request, response) => {
      const { status } = JSON.parse(request.body) as { status: number };
      response.writeProcessing();
      response.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
      response.writeEarlyHints({ link: '</app.js>; rel=preload; as=script' });
      setTimeout(() => response.writeHead(status).end(status === 200 ? 'ok' : 'no such hook'), 20);
    });
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url });
    // Act
    const ok = await publisher.publish(aMessage({ id: '1', payload: { status: 200 } }));
    const missing = await publisher.publish(aMessage({ id: '2', payload: { status: 404 } }));
    const third = await publisher.publish(aMessage({ id: '3', payload: { status: 200 } }));
    await publisher.close();
    // Assess: the final statuses decide, nothing of the 1xx is kept, and the connection stays usable.
    expect(ok).toEqual({ kind: 'sent' });
    expect(missing).toEqual({ kind: 'retry', error: 'HTTP 404 Not Found: no such hook' });
    expect(third).toEqual({ kind: 'sent' });
    expect(receiver.connections).toBe(1);
  });

  it('retries, without sending again at once, when the connection is reset after a 103 Early Hints', async () => {
    receiver.handle((_request, response) => {
      response.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
      setTimeout(() => response.socket?.destroy(), 20);
    });
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url });
    const outcome = await publisher.publish(aMessage());
    await publisher.close();
    expect(outcome.kind).toBe('retry');
    expect(outcome.kind === 'retry' && outcome.error).toMatch(/^network error: .*other side closed/);
    expect(receiver.requests).toHaveLength(1);
  });

  it('reads past an unsolicited 100 Continue to the final status, sending once (undici alone refuses it)', async () => {
    receiver.handle((_request, response) => {
      response.writeContinue();
      setTimeout(() => response.writeHead(200).end('ok'), 20);
    });
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url });
    const outcome = await publisher.publish(aMessage());
    await publisher.close();
    expect(outcome).toEqual({ kind: 'sent' });
    expect(receiver.requests).toHaveLength(1);
  });

  it.each([
    ['a partial status line', 'HTTP/1.1 200 OK\r\nContent-Le'],
    ['an unsolicited 100 Continue', 'HTTP/1.1 100 Continue\r\n\r\n'],
  ])(
    'sends once, on a kept-alive connection too, when the server closes after %s of its answer',
    async (_what, partial) => {
      // Prepare: the first request is answered in full (the connection is kept alive), the second gets the first
      // bytes of an answer, then the connection ends.
      receiver.handle((request, response) => {
        if (request.headers['idempotency-key'] === '1') response.writeHead(200).end('ok');
        else response.socket?.end(partial);
      });
      const publisher = createHttpPublisher({ type: 'http', url: receiver.url });
      // Act
      const first = await publisher.publish(aMessage({ id: '1' }));
      const second = await publisher.publish(aMessage({ id: '2' }));
      const fresh = createHttpPublisher({ type: 'http', url: receiver.url });
      const third = await fresh.publish(aMessage({ id: '3' }));
      await publisher.close();
      await fresh.close();
      // Assess
      expect(first).toEqual({ kind: 'sent' });
      expect(second.kind).toBe('retry');
      expect(third.kind).toBe('retry');
      expect(receiver.requests.map((r) => r.headers['idempotency-key'])).toEqual(['1', '2', '3']);
    },
  );

  it('takes the values of the URL query (a function key, a token) out of an error that echoes the request', async () => {
    // Prepare: the receiver answers 400 with the URL it was asked for, raw and decoded.
    receiver.handle((request, response) => {
      const query = Object.fromEntries(new URL(request.url, 'http://x').searchParams);
      response.writeHead(400).end(JSON.stringify({ url: request.url, query }));
    });
    const publisher = createHttpPublisher({
      type: 'http',
      url: `${receiver.url}?code=AZURE-FUNCTION-KEY-123&api_key=k%2By%2Fz%3D%3D&token=t+o+k+e+n&v=1`,
    });
    // Act
    const outcome = await publisher.publish(aMessage());
    await publisher.close();
    // Assess
    expect(receiver.requests[0]?.url).toBe(
      '/hooks?code=AZURE-FUNCTION-KEY-123&api_key=k%2By%2Fz%3D%3D&token=t+o+k+e+n&v=1',
    );
    const error = outcome.kind === 'retry' ? outcome.error : '';
    expect(error).toMatch(/^HTTP 400 Bad Request: /);
    for (const secret of ['AZURE-FUNCTION-KEY', 'k%2By%2Fz%3D%3D', 'k+y/z==', 't+o+k+e+n', 't o k e n']) {
      expect(error).not.toContain(secret);
    }
    expect(error).toContain('code=***');
    expect(error).toContain('v=1');
  });

  it('keeps short query values without a credential name readable, and takes long path segments out (Slack, Discord)', async () => {
    // Prepare: a receiver that names the request's path and query in its error.
    receiver.handle((request, response) => {
      response
        .writeHead(422)
        .end(`bad request to ${request.url}: schema version 2024 rejects null, strict true`);
    });
    const secret = 'XXXXXXXXXXXXXXXXXXXXXXXX';
    const publisher = createHttpPublisher({
      type: 'http',
      url: `${receiver.url}/services/T0001/B0001/${secret}?version=2024&strict=true&allow=null`,
      maxErrorBodyBytes: 1024,
    });
    // Act
    const outcome = await publisher.publish(aMessage());
    await publisher.close();
    // Assess
    const error = outcome.kind === 'retry' ? outcome.error : '';
    expect(error).not.toContain(secret);
    expect(error).toContain('/services/T0001/B0001/***?version=2024&strict=true&allow=null');
    expect(error).toContain('schema version 2024 rejects null, strict true');
  });

  it('takes our values out of the reason phrase and keeps at most 64 characters of it', async () => {
    // Prepare: a destination that echoes our token and signature in its status line, then a very long one.
    const token = 'tok_abcdefghijklmnopqrstuvwxyz';
    receiver.handle((request, response) => {
      const phrase =
        request.headers['idempotency-key'] === '1'
          ? `Bad token Bearer ${token} sig ${request.headers['webhook-signature']}`
          : 'x'.repeat(15_000);
      response.writeHead(401, phrase).end();
    });
    const publisher = createHttpPublisher({
      type: 'http',
      url: receiver.url,
      headers: { Authorization: `Bearer ${token}` },
      signing: { scheme: 'standard-webhooks', secrets: [SECRET] },
    });
    // Act
    const echoed = await publisher.publish(aMessage({ id: '1' }));
    const long = await publisher.publish(aMessage({ id: '2' }));
    await publisher.close();
    // Assess
    const signature = receiver.requests[0]?.headers['webhook-signature'] ?? '';
    expect(signature).not.toBe('');
    expect(echoed).toEqual({ kind: 'retry', error: 'HTTP 401 Bad token *** sig ***' });
    expect(long).toEqual({ kind: 'retry', error: `HTTP 401 ${'x'.repeat(64)}…` });
  });

  it('takes a credential given as the URL user name out of an error (a key with an empty password)', async () => {
    const key = 'sk_live_51Habcdefghijkl';
    receiver.handle((request, response) => {
      response.writeHead(401).end(`unknown key ${request.headers.authorization} = ${key}`);
    });
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url.replace('//', `//${key}:@`) });
    const outcome = await publisher.publish(aMessage());
    await publisher.close();
    expect(receiver.requests[0]?.headers.authorization).toBe(
      `Basic ${Buffer.from(`${key}:`).toString('base64')}`,
    );
    expect(outcome).toEqual({ kind: 'retry', error: 'HTTP 401 Unauthorized: unknown key *** = ***' });
  });

  it('takes each signature of a rotation out of an error, not only the whole header', async () => {
    // Prepare: a verifier that names the signatures it could not match, one by one and without the version.
    const other = `whsec_${Buffer.from('the next key, rotated in').toString('base64')}`;
    receiver.handle((request, response) => {
      const [first, second] = (request.headers['webhook-signature'] ?? '').split(' ');
      response.writeHead(401).end(`no match: got ${first}; also ${second?.slice('v1,'.length)}`);
    });
    const publisher = createHttpPublisher({
      type: 'http',
      url: receiver.url,
      signing: { scheme: 'standard-webhooks', secrets: [SECRET, other] },
    });
    // Act
    const outcome = await publisher.publish(aMessage());
    await publisher.close();
    // Assess
    const signatures = (receiver.requests[0]?.headers['webhook-signature'] ?? '').split(' ');
    expect(signatures).toHaveLength(2);
    const error = outcome.kind === 'retry' ? outcome.error : '';
    expect(error).toBe('HTTP 401 Unauthorized: no match: got ***; also ***');
    for (const signature of signatures) expect(error).not.toContain(signature.slice('v1,'.length));
  });

  it("never passes a row's own webhook-* or svix-* signature headers on, signing or not", async () => {
    // Prepare
    const forged = {
      'webhook-id': 'forged-id',
      'Webhook-Timestamp': '1',
      'webhook-signature': 'v1,Zm9yZ2Vk',
      'svix-id': 'forged-id',
      'Svix-Timestamp': '1',
      'svix-signature': 'v1,Zm9yZ2Vk',
      'X-Kept': 'k',
    };
    const unsigned = createHttpPublisher({ type: 'http', url: receiver.url });
    const signed = createHttpPublisher({
      type: 'http',
      url: receiver.url,
      signing: { scheme: 'standard-webhooks', secrets: [SECRET] },
    });
    // Act
    const outcomes = [
      await unsigned.publish(aMessage({ headers: forged })),
      await signed.publish(aMessage({ headers: forged })),
    ];
    await unsigned.close();
    await signed.close();
    // Assess
    expect(outcomes).toEqual([{ kind: 'sent' }, { kind: 'sent' }]);
    const [plain, withSignature] = receiver.requests.map((r) => r.headers);
    for (const name of [
      'webhook-id',
      'webhook-timestamp',
      'webhook-signature',
      'svix-id',
      'svix-timestamp',
      'svix-signature',
    ]) {
      expect(plain?.[name]).toBeUndefined();
    }
    expect(plain?.['x-kept']).toBe('k');
    expect(withSignature).toMatchObject({ 'webhook-id': '1001', 'x-kept': 'k' });
    expect(withSignature?.['webhook-timestamp']).not.toBe('1');
    expect(withSignature?.['webhook-signature']).not.toContain('Zm9yZ2Vk');
    for (const name of ['svix-id', 'svix-timestamp', 'svix-signature'])
      expect(withSignature?.[name]).toBeUndefined();
    expect(verifyStandardWebhook(SECRET, withSignature ?? {}, receiver.requests[1]?.body ?? '')).toBe(true);
  });

  it('sends one of row headers whose names differ only in letter case: the last, as a transform would merge them', async () => {
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url });
    const outcome = await publisher.publish(
      aMessage({
        headers: { 'X-Trace': 'first', 'x-other': 'o', 'x-trace': 'last', 'X-TRACE': 'really last' },
      }),
    );
    await publisher.close();
    expect(outcome).toEqual({ kind: 'sent' });
    expect(receiver.requests[0]?.headers['x-trace']).toBe('really last');
    expect(receiver.requests[0]?.headers['x-other']).toBe('o');
  });

  it('answers retry after close instead of sending', async () => {
    const publisher = createHttpPublisher({ type: 'http', url: receiver.url });
    await publisher.close();
    expect((await publisher.publish(aMessage())).kind).toBe('retry');
    expect(receiver.requests).toHaveLength(0);
  });
});

describe('createHttpPublisher over https', () => {
  it('speaks TLS to an https URL and refuses a certificate it cannot verify, sending nothing', async () => {
    // Prepare: a TLS server on 127.0.0.1 with a self-signed certificate (test material, packages/outbox/test/support/tls).
    const tls = (name: string) => readFileSync(new URL(`./support/tls/${name}`, import.meta.url));
    let requests = 0;
    const server = createHttpsServer(
      { key: tls('self-signed.key'), cert: tls('self-signed.crt') },
      (_req, res) => {
        requests++;
        res.writeHead(200).end('ok');
      },
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const publisher = createHttpPublisher({ type: 'http', url: `https://127.0.0.1:${port}/hooks` });
    // Act
    const outcome = await publisher.publish(aMessage());
    await publisher.close();
    await new Promise((resolve) => server.close(resolve));
    // Assess: the handshake failed on the certificate, which only an https transport reports.
    expect(outcome.kind).toBe('retry');
    expect(outcome.kind === 'retry' && outcome.error).toMatch(/^network error: .*self-signed certificate/);
    expect(requests).toBe(0);
  });
});

describe('createHttpPublisher options', () => {
  it('refuses a missing or non-http URL, GET, and a bad secret, listing every problem', () => {
    let error: unknown;
    try {
      createHttpPublisher({
        type: 'http',
        name: 'billing',
        url: 'ftp://example.com',
        method: 'GET',
        signing: { scheme: 'standard-webhooks', secrets: ['%%%'] },
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).issues.map((i) => i.path)).toEqual([
      'destinations.billing.signing.secrets[0]',
    ]);
  });

  it('names url and method problems', () => {
    let error: unknown;
    try {
      createHttpPublisher({ type: 'http', name: 'billing', method: 'GET' });
    } catch (e) {
      error = e;
    }
    expect((error as ConfigError).issues.map((i) => i.path)).toEqual([
      'destinations.billing.url',
      'destinations.billing.method',
    ]);
  });
});
