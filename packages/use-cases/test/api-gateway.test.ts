import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { apiGatewayResultOf, ingestRequestOf, requestPathOf } from '../src/api-gateway.ts';

function anEvent(
  overrides: Partial<APIGatewayProxyEventV2> = {},
  stage = '$default',
): APIGatewayProxyEventV2 {
  return {
    version: '2.0',
    routeKey: 'POST /inbox/{source}',
    rawPath: '/inbox/stripe',
    rawQueryString: 'a=1',
    headers: { 'content-type': 'application/json' },
    requestContext: {
      accountId: '123456789012',
      apiId: 'api',
      domainName: 'api.example',
      domainPrefix: 'api',
      http: {
        method: 'POST',
        path: '/inbox/stripe',
        protocol: 'HTTP/1.1',
        sourceIp: '203.0.113.1',
        userAgent: 'x',
      },
      requestId: 'r1',
      routeKey: 'POST /inbox/{source}',
      stage,
      time: '30/Nov/2026:06:00:00 +0000',
      timeEpoch: 1_796_000_000_000,
    },
    isBase64Encoded: false,
    ...overrides,
  };
}

describe('ingestRequestOf', () => {
  it('decodes a base64 body to the exact bytes, including bytes that are not UTF-8', () => {
    const bytes = Buffer.from([0x7b, 0x7d, 0xff, 0x00]);
    const event = anEvent({ body: bytes.toString('base64'), isBase64Encoded: true });

    const request = ingestRequestOf(event);

    expect(Buffer.from(request.body)).toEqual(bytes);
  });

  it('takes a plain body as UTF-8 text', () => {
    const request = ingestRequestOf(anEvent({ body: '{"name":"Zoë"}' }));

    expect(Buffer.from(request.body).toString('utf8')).toBe('{"name":"Zoë"}');
  });

  it('answers an empty body when the event has none', () => {
    expect(ingestRequestOf(anEvent()).body.byteLength).toBe(0);
  });

  it('keeps header names as sent and puts the cookies back into one cookie header', () => {
    const event = anEvent({
      headers: { 'Webhook-Id': 'msg_1', 'X-Mixed-CASE': 'v' },
      cookies: ['a=1', 'b=2'],
    });

    const request = ingestRequestOf(event);

    expect(request.headers).toEqual({ 'Webhook-Id': 'msg_1', 'X-Mixed-CASE': 'v', cookie: 'a=1; b=2' });
  });

  it('appends cookies to a Cookie header that is still there, in any letter case', () => {
    const request = ingestRequestOf(anEvent({ headers: { Cookie: 'z=0' }, cookies: ['a=1'] }));

    expect(request.headers).toEqual({ Cookie: 'z=0; a=1' });
  });

  it('takes the method from the request context and the path without the query string', () => {
    const request = ingestRequestOf(anEvent());

    expect(request.method).toBe('POST');
    expect(request.path).toBe('/inbox/stripe');
  });
});

describe('requestPathOf', () => {
  it('removes a named stage from the front of rawPath', () => {
    expect(requestPathOf(anEvent({ rawPath: '/prod/inbox/stripe' }, 'prod'))).toBe('/inbox/stripe');
    expect(requestPathOf(anEvent({ rawPath: '/prod' }, 'prod'))).toBe('/');
  });

  it('leaves the path alone on the $default stage and when the stage is not a prefix', () => {
    expect(requestPathOf(anEvent({ rawPath: '/prod/inbox/stripe' }))).toBe('/prod/inbox/stripe');
    expect(requestPathOf(anEvent({ rawPath: '/production/x' }, 'prod'))).toBe('/production/x');
  });
});

describe('apiGatewayResultOf', () => {
  it('answers the status, JSON text and headers, with a JSON content type', () => {
    const result = apiGatewayResultOf({
      status: 405,
      body: { error: 'method_not_allowed' },
      headers: { allow: 'POST' },
    });

    expect(result).toEqual({
      statusCode: 405,
      headers: { 'content-type': 'application/json', allow: 'POST' },
      body: '{"error":"method_not_allowed"}',
      isBase64Encoded: false,
    });
  });
});
