import { JsonPathSyntaxError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import type { SourceOptions } from '../src/index.ts';
import {
  AUTH_SCHEMES,
  ExtractionError,
  extractFields,
  keptHeaders,
  normalizeHeaders,
  planExtraction,
  storableHeaders,
} from '../src/index.ts';

const aSource = (overrides: Partial<SourceOptions> = {}): SourceOptions => ({ type: 'http', ...overrides });

describe('extractFields', () => {
  it('reads each field from its configured path or header (headers case-insensitive)', () => {
    // Prepare
    const plan = planExtraction(
      aSource({
        idempotencyKey: { header: 'Idempotency-Key' },
        eventTypePath: '$.type',
        aggregateIdPath: '$.data.object.id',
        correlationIdHeader: 'X-Request-Id',
      }),
    );
    const headers = normalizeHeaders({ 'IDEMPOTENCY-KEY': 'k-1', 'X-Request-ID': 'req-9' });
    // Act
    const fields = extractFields(plan, {
      payload: { type: 'invoice.paid', data: { object: { id: 42 } } },
      headers: headers,
    });
    // Assess
    expect(fields).toEqual({
      idempotencyKey: 'k-1',
      eventType: 'invoice.paid',
      aggregateId: '42',
      correlationId: 'req-9',
    });
  });

  it('uses the scheme defaults and the X-Correlation-Id header when the source sets nothing', () => {
    const plan = planExtraction(aSource(), AUTH_SCHEMES.github.defaults);
    const headers = normalizeHeaders({
      'X-GitHub-Delivery': 'd-1',
      'X-GitHub-Event': 'push',
      'x-correlation-id': 'c-1',
    });
    expect(extractFields(plan, { payload: {}, headers: headers })).toEqual({
      idempotencyKey: 'd-1',
      eventType: 'push',
      aggregateId: null,
      correlationId: 'c-1',
    });
  });

  it('tries the default key locations in order (svix-id when webhook-id is absent)', () => {
    const plan = planExtraction(aSource(), AUTH_SCHEMES['standard-webhooks'].defaults);
    expect(
      extractFields(plan, { payload: { type: 't' }, headers: { 'svix-id': 'msg_2' } }).idempotencyKey,
    ).toBe('msg_2');
    expect(
      extractFields(plan, { payload: { type: 't' }, headers: { 'svix-id': 'msg_2', 'webhook-id': 'msg_1' } })
        .idempotencyKey,
    ).toBe('msg_1');
  });

  it('falls back to the Idempotency-Key header without configuration or scheme default', () => {
    const plan = planExtraction(aSource());
    expect(extractFields(plan, { payload: {}, headers: { 'idempotency-key': 'abc' } }).idempotencyKey).toBe(
      'abc',
    );
  });

  it('takes the event type from a header when eventTypeFromHeader is a name or true', () => {
    expect(
      extractFields(planExtraction(aSource({ eventTypeFromHeader: 'X-Kind' })), {
        payload: {},
        headers: { 'idempotency-key': 'k', 'x-kind': 'a' },
      }).eventType,
    ).toBe('a');
    expect(
      extractFields(planExtraction(aSource({ eventTypeFromHeader: true })), {
        payload: {},
        headers: { 'idempotency-key': 'k', 'x-event-type': 'b' },
      }).eventType,
    ).toBe('b');
    const shopify = planExtraction(aSource({ eventTypeFromHeader: true }), AUTH_SCHEMES.shopify.defaults);
    expect(
      extractFields(shopify, {
        payload: {},
        headers: { 'x-shopify-webhook-id': 'w', 'x-shopify-topic': 'orders/create' },
      }).eventType,
    ).toBe('orders/create');
    // Shopify's Events deliveries carry Shopify-Topic only; the scheme's default finds it, with or without
    // eventTypeFromHeader.
    for (const source of [aSource(), aSource({ eventTypeFromHeader: true })]) {
      expect(
        extractFields(planExtraction(source, AUTH_SCHEMES.shopify.defaults), {
          payload: {},
          headers: { 'shopify-webhook-id': 'w', 'shopify-topic': 'products/update' },
        }).eventType,
      ).toBe('products/update');
    }
  });

  it('reads the event type from eventTypePath when eventTypeFromHeader is false', () => {
    // Prepare
    const plan = planExtraction(aSource({ eventTypePath: '$.type', eventTypeFromHeader: false }));
    // Act
    const fields = extractFields(plan, {
      payload: { type: 'invoice.paid' },
      headers: { 'idempotency-key': 'k', 'x-event-type': 'from-header' },
    });
    // Assess
    expect(fields.eventType).toBe('invoice.paid');
    expect(plan.eventType.map((l) => l.label)).toEqual(['$.type']);
  });

  it('treats absent, null and empty optional fields as null', () => {
    const plan = planExtraction(
      aSource({ idempotencyKey: { path: '$.id' }, eventTypePath: '$.type', aggregateIdPath: '$.agg' }),
    );
    expect(extractFields(plan, { payload: { id: 'x', type: null, agg: '' }, headers: {} })).toEqual({
      idempotencyKey: 'x',
      eventType: null,
      aggregateId: null,
      correlationId: null,
    });
  });

  it('fails clearly for a missing key, a non-scalar value and an over-long value', () => {
    const plan = planExtraction(aSource({ idempotencyKey: { path: '$.id' }, eventTypePath: '$.type' }));
    const problem = (payload: unknown) => {
      try {
        extractFields(plan, { payload: payload as never, headers: {} });
        return 'none';
      } catch (error) {
        expect(error).toBeInstanceOf(ExtractionError);
        const e = error as ExtractionError;
        return `${e.field}:${e.problem}:${e.message}`;
      }
    };
    expect(problem({})).toBe('idempotencyKey:missing:The message has no idempotency key ($.id)');
    expect(problem({ id: '' })).toMatch(/^idempotencyKey:missing/);
    expect(problem({ id: { a: 1 } })).toBe(
      'idempotencyKey:not_scalar:The idempotency key at $.id must be a string or a number',
    );
    expect(problem({ id: true })).toMatch(/^idempotencyKey:not_scalar/);
    expect(problem({ id: 'k', type: ['a'] })).toBe(
      'eventType:not_scalar:The event type at $.type must be a string or a number',
    );
    expect(problem({ id: 'k'.repeat(601) })).toMatch(/^idempotencyKey:too_long/);
    expect(problem({ id: 'k'.repeat(600) })).toBe('none');
    expect(problem({ id: 12.5 })).toBe('none');
  });

  it('refuses a bad configured path when planning', () => {
    expect(() => planExtraction(aSource({ eventTypePath: 'type' }))).toThrow(JsonPathSyntaxError);
  });
});

describe('headers', () => {
  it('normalizes names to lower case and joins repeated values', () => {
    expect(normalizeHeaders({ 'X-A': ['1', '2'], 'x-a': '3', 'X-B': undefined, Host: 'h' })).toEqual({
      'x-a': '1, 2, 3',
      host: 'h',
    });
  });

  it('stores neither hop-by-hop headers, credentials, signature headers nor headers named by Connection', () => {
    // Prepare
    const headers = normalizeHeaders({
      'Content-Type': 'application/json',
      'User-Agent': 'Stripe/1.0',
      Authorization: 'Bearer secret',
      Cookie: 'a=b',
      Connection: 'keep-alive, X-Hop',
      'X-Hop': 'v',
      'Keep-Alive': 'timeout=5',
      'Transfer-Encoding': 'chunked',
      'Content-Length': '10',
      Host: 'example',
      'Stripe-Signature': 't=1,v1=ab',
      'X-Correlation-Id': 'c-1',
    });
    // Act
    const stored = storableHeaders(
      headers,
      AUTH_SCHEMES.stripe.credentialHeaders({ scheme: 'stripe', secrets: ['s'] }),
    );
    // Assess
    expect(stored).toEqual({
      'user-agent': 'Stripe/1.0',
      'x-correlation-id': 'c-1',
    });
  });

  it("stores no proxy, forwarding, browser or transfer headers, nor any scheme's signature or credential headers", () => {
    // Prepare: what one hostile delivery carried (issue 13), on a bearer source that knows no signature header.
    const headers = normalizeHeaders({
      'Content-Type': 'text/html; charset=iso-8859-1',
      'X-Forwarded-For': '10.0.0.1',
      'X-Forwarded-Host': 'evil.example',
      'X-Forwarded-Proto': 'http',
      Forwarded: 'for=10.0.0.1',
      'X-Real-IP': '10.0.0.1',
      Via: '1.1 proxy',
      'Accept-Encoding': 'gzip',
      'Sec-Fetch-Site': 'cross-site',
      'Sec-CH-UA': '"x"',
      Origin: 'https://evil.example',
      Referer: 'https://evil.example/page',
      'X-Hub-Signature-256': 'sha256=ab',
      'Svix-Signature': 'v1,ab',
      'X-Shopify-Hmac-Sha256': 'ab',
      'X-Slack-Signature': 'v0=ab',
      'X-Auth-Token': 'stolen',
      'X-Api-Key': 'k',
      'X-Session-Token': 's',
      Proxy: 'http://evil.example:3128',
      'Proxy-Status': 'edge; error=timeout',
      'Proxy-Authentication-Info': 'nextnonce="secret"',
      'X-HTTP-Method-Override': 'DELETE',
      'X-Http-Method': 'DELETE',
      'X-Method-Override': 'DELETE',
      'X-Original-URL': '/admin/delete-all',
      'X-Original-URI': '/admin/delete-all',
      'X-Rewrite-URL': '/admin/delete-all',
      'X-Amzn-Oidc-Accesstoken': 'eyJ0',
      'X-Amzn-Oidc-Data': 'eyJ1',
      'X-Goog-Iap-Jwt-Assertion': 'eyJ2',
      'Webhook-Id': 'msg_1',
      'X-Slack-Request-Timestamp': '1',
      'Idempotency-Key': 'k-1',
      'X-Order-Region': 'eu',
    });
    // Act
    const stored = storableHeaders(
      headers,
      AUTH_SCHEMES.bearer.credentialHeaders({ scheme: 'bearer', secrets: ['t'] }),
    );
    // Assess
    expect(stored).toEqual({
      'webhook-id': 'msg_1',
      'x-slack-request-timestamp': '1',
      'idempotency-key': 'k-1',
      'x-order-region': 'eu',
    });
  });

  it('stores no platform key, run-together token, identity-proxy or client-address header (an outside audit)', () => {
    // Prepare: what reached a third-party destination before (credentials of Azure, Event Grid, API Management and
    // homegrown schemes; the user and client as identity-aware proxies describe them), beside headers to keep.
    const unstored = [
      'X-Functions-Key',
      'Ocp-Apim-Subscription-Key',
      'Aeg-Sas-Key',
      'X-Access-Key',
      'X-Webhook-Key',
      'X-Client-Key',
      'Private-Key',
      'X-AuthToken',
      'X-AccessToken',
      'x_api_key',
      'api_key',
      'X-Signature256',
      'X-HmacSha256',
      'Cf-Access-Authenticated-User-Email',
      'X-Goog-Authenticated-User-Email',
      'X-MS-Client-Principal',
      'X-MS-Client-Principal-Name',
      'X-SSL-Client-Cert',
      'X-Client-Cert',
      'Cf-Connecting-Ipv6',
      'Fly-Client-Ip',
      'X-AppEngine-User-IP',
      'CloudFront-Viewer-Address',
      'X-Envoy-External-Address',
      'X-Azure-ClientIP',
      'X-Vercel-Forwarded-For',
    ];
    const kept = {
      'Idempotency-Key': 'k-1',
      'X-Event-Key': 'repo:push',
      'X-Partition-Key': 'p',
      'X-GitHub-Event': 'push',
      'User-Agent': 'Stripe/1.0',
    };
    const headers = normalizeHeaders({
      ...Object.fromEntries(unstored.map((n) => [n, 'secret-ish'])),
      ...kept,
    });
    // Act
    const stored = storableHeaders(headers, []);
    // Assess
    expect(stored).toEqual(Object.fromEntries(Object.entries(kept).map(([n, v]) => [n.toLowerCase(), v])));
  });

  it('stores none of the credential names CREDENTIAL_NAME documents, keeping the keys named for what they identify', () => {
    // Prepare: the examples of CREDENTIAL_NAME's doc comment, and a session id.
    const unstored = [
      'X-Sig',
      'X-Auth-Token',
      'X-Hub-Signature-256',
      'X-Goog-Iap-Jwt-Assertion',
      'x_api_key',
      'X-Functions-Key',
      'Ocp-Apim-Subscription-Key',
      'X-AuthToken',
      'X-AccessToken',
      'X-Signature256',
      'X-HmacSha256',
      'X-Session-Id',
    ];
    const headers = normalizeHeaders({
      ...Object.fromEntries(unstored.map((n) => [n, 'secret-ish'])),
      'Idempotency-Key': 'k-1',
      'X-Event-Key': 'repo:push',
    });
    // Act
    const stored = storableHeaders(headers, []);
    // Assess
    expect(stored).toEqual({ 'idempotency-key': 'k-1', 'x-event-key': 'repo:push' });
  });

  it('stores none of the client-address, client-certificate and hop-by-hop headers UNSTORED_HEADERS names', () => {
    // Prepare
    const unstored = [
      'True-Client-IP',
      'X-Client-IP',
      'X-Cluster-Client-IP',
      'Fastly-Client-IP',
      'X-Azure-SocketIP',
      'X-Original-Forwarded-For',
      'X-Client-Verify',
      'Trailer',
    ];
    const headers = normalizeHeaders({
      ...Object.fromEntries(unstored.map((n) => [n, '1.2.3.4'])),
      'X-Kept': 'k',
    });
    // Act
    const stored = storableHeaders(headers, []);
    // Assess
    expect(stored).toEqual({ 'x-kept': 'k' });
  });

  it("drops a scheme's signature header by its name alone, when no credential pattern matches it", () => {
    // Prepare: a generic hmac source whose signature header looks like nothing else.
    const credentials = AUTH_SCHEMES.hmac.credentialHeaders({
      scheme: 'hmac',
      secrets: ['s'],
      header: 'X-Check',
    });
    // Act
    const stored = storableHeaders({ 'x-check': 'abc', 'x-other': '1' }, credentials);
    // Assess
    expect(stored).toEqual({ 'x-other': '1' });
  });

  it('keeps only the headers a source lists in keepHeaders, never a credential even when listed', () => {
    const headers = { 'x-order-region': 'eu', 'x-other': '1', 'x-auth-token': 't', 'user-agent': 'u' };
    const keep = keptHeaders({ type: 'http', keepHeaders: ['X-Order-Region', 'X-Auth-Token'] });
    expect(storableHeaders(headers, [], keep)).toEqual({ 'x-order-region': 'eu' });
    expect(keptHeaders({ type: 'http' })).toBeUndefined();
  });

  it('drops the configured signature header of the generic hmac scheme', () => {
    const credentials = AUTH_SCHEMES.hmac.credentialHeaders({
      scheme: 'hmac',
      secrets: ['s'],
      header: 'X-Sig',
    });
    expect(storableHeaders({ 'x-sig': 'abc', 'x-other': '1' }, credentials)).toEqual({ 'x-other': '1' });
    // The same list again (its lower-cased names are kept): still dropped; a header that only an earlier
    // request's Connection named is stored now.
    expect(
      storableHeaders({ 'x-sig': 'abd', connection: 'x-hop', 'x-hop': 'v', 'x-other': '2' }, credentials),
    ).toEqual({ 'x-other': '2' });
    expect(storableHeaders({ 'x-sig': 'abd', 'x-hop': 'v' }, credentials)).toEqual({ 'x-hop': 'v' });
  });
});
