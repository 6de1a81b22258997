/**
 * Stands in for ESM imports of `node:http` in the Lambda bundles (scripts/bundle/aliases.ts): the same module
 * object, taken with require(). Node 24 builds the ESM namespace of a built-in module by reading every export, and
 * node:http's `WebSocket`, `CloseEvent` and `MessageEvent` are getters that load undici: ≈ 30 ms of every cold
 * start for classes no function uses (`import { STATUS_CODES } from 'node:http'` in @middy/util is enough).
 * require() hands back the module without reading them. Those three are the exports left out here; asking for one
 * by name fails the build.
 */

import type * as NodeHttp from 'node:http';
import { createRequire } from 'node:module';

const http = createRequire(import.meta.url)('node:http') as typeof NodeHttp;

export default http;
export const {
  METHODS,
  STATUS_CODES,
  Agent,
  ClientRequest,
  IncomingMessage,
  OutgoingMessage,
  Server,
  ServerResponse,
  createServer,
  validateHeaderName,
  validateHeaderValue,
  get,
  request,
  setMaxIdleHTTPParsers,
  setGlobalProxyFromEnv,
  globalAgent,
  maxHeaderSize,
} = http;
