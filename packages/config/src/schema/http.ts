import * as z from 'zod';
import { int, text } from './fields.ts';

// `http`: the local HTTP server.

export const httpSchema = z.strictObject({
  port: int(0, 65_535).default(8080).describe('Local HTTP port (0 picks a free port). Default 8080.'),
  host: text()
    .default('127.0.0.1')
    .describe(
      'Local HTTP bind address. Default 127.0.0.1 (this machine only); 0.0.0.0 listens on every interface.',
    ),
});
