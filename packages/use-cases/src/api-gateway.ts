import type { IngestRequest } from '@queuebox/inbox';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';

/** An HTTP answer: status, JSON body and headers (what the ingestion and the health check answer). */
export interface JsonAnswer {
  readonly status: number;
  readonly body: unknown;
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * The request path without API Gateway's stage prefix: an HTTP API on a named stage (not `$default`) puts
 * `/{stage}` in front of `rawPath`, which no source path contains.
 */
export function requestPathOf(event: APIGatewayProxyEventV2): string {
  const path = event.rawPath || event.requestContext.http.path || '/';
  const stage = event.requestContext.stage;
  if (stage && stage !== '$default') {
    const prefix = `/${stage}`;
    if (path === prefix) return '/';
    if (path.startsWith(`${prefix}/`)) return path.slice(prefix.length);
  }
  return path;
}

/**
 * The ingestion request of an API Gateway HTTP API event (payload format 2.0): the method, the path (stage prefix
 * removed), the headers in any letter case with the `cookie` header put back together from `cookies` (API
 * Gateway moves it there), and the raw body bytes, base64-decoded when `isBase64Encoded`. Pure.
 */
export function ingestRequestOf(event: APIGatewayProxyEventV2): IngestRequest {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(event.headers ?? {})) {
    if (value !== undefined) headers[name] = value;
  }
  if (event.cookies && event.cookies.length > 0) {
    const sent = Object.keys(headers).find((name) => name.toLowerCase() === 'cookie');
    const joined = event.cookies.join('; ');
    if (sent === undefined) headers.cookie = joined;
    else headers[sent] = `${headers[sent]}; ${joined}`;
  }
  const raw = event.body ?? '';
  const body = event.isBase64Encoded ? Buffer.from(raw, 'base64') : Buffer.from(raw, 'utf8');
  return {
    method: event.requestContext.http.method,
    path: requestPathOf(event),
    headers,
    body: new Uint8Array(body.buffer, body.byteOffset, body.byteLength),
  };
}

/** The API Gateway result of a JSON answer: the status, the headers, and the body as JSON text. Pure. */
export function apiGatewayResultOf(answer: JsonAnswer): APIGatewayProxyStructuredResultV2 {
  return {
    statusCode: answer.status,
    headers: { 'content-type': 'application/json', ...answer.headers },
    body: JSON.stringify(answer.body),
    isBase64Encoded: false,
  };
}
