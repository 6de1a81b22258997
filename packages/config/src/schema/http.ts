import * as z from 'zod';
import { int, text } from './fields.ts';

// `http`: the local HTTP server.

/** The most `http.maxConnections`: far above what one process serves, so only a mistyped value is refused. */
const MAX_CONNECTIONS = 100_000;

export const httpSchema = z.strictObject({
  port: int(0, 65_535)
    .default(8080)
    .describe('Local HTTP port (0 picks a free port). Default 8080; at most 65535.'),
  host: text()
    .default('127.0.0.1')
    .describe(
      'Local HTTP bind address. Default 127.0.0.1 (this machine only); 0.0.0.0 listens on every interface.',
    ),
  requestTimeoutMs: int(1000, 3_600_000)
    .default(30_000)
    .describe(
      "Longest time a request may take to arrive, headers and body, before it is answered 408 and its connection closed (its headers alone: at most 10 s). A body is held in memory until it has arrived whole (its signature covers every byte), so a sender that trickles bytes would otherwise hold up to inbox.maxBodyBytes for Node's 5 minutes. Default 30000; at most 3600000 (1 h).",
    ),
  maxConnections: int(1, MAX_CONNECTIONS)
    .default(256)
    .describe(
      `Most connections served at once; the next 64 are answered (/health served, anything else 503 overloaded with Retry-After), the rest 503 at once and closed. With requestTimeoutMs it bounds the memory that unfinished bodies can hold: maxConnections × inbox.maxBodyBytes. Default 256; at most ${MAX_CONNECTIONS}.`,
    ),
});
