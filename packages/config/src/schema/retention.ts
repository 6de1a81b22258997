import * as z from 'zod';
import { int } from './fields.ts';

// `retention`: clean-up of finished rows by the maintenance tick.

export const retentionSchema = z.strictObject({
  keepSentHours: int(0)
    .default(168)
    .describe(
      'Delete sent outbox and processed inbox rows older than this; 0 keeps them. Default 168 (7 days).',
    ),
  keepDeadHours: int(0)
    .default(720)
    .describe('Delete dead rows older than this; 0 keeps them. Default 720 (30 days).'),
  batchSize: int(1, 10_000).default(1000).describe('Rows deleted per statement. Default 1000.'),
});
