import * as z from 'zod';
import { int, MAX_RETENTION_HOURS } from './fields.ts';

// `retention`: clean-up of finished rows by the maintenance tick.

export const retentionSchema = z.strictObject({
  keepSentHours: int(0, MAX_RETENTION_HOURS)
    .default(168)
    .describe(
      `Delete sent outbox and processed inbox rows older than this; 0 keeps them. Default 168 (7 days); at most ${MAX_RETENTION_HOURS} (100 years). The inbox deduplicates a key only while its row exists: keep processed rows longer than your providers retry (Stripe up to 3 days), or a retry of a deleted key is stored and delivered again.`,
    ),
  keepDeadHours: int(0, MAX_RETENTION_HOURS)
    .default(720)
    .describe(
      `Delete dead rows older than this; 0 keeps them. Default 720 (30 days); at most ${MAX_RETENTION_HOURS} (100 years).`,
    ),
  batchSize: int(1, 10_000)
    .default(1000)
    .describe('Rows deleted per statement. Default 1000; at most 10000.'),
});
