import { topicPatternProblem } from '@queuebox/core';
import * as z from 'zod';
import { text, transformSchema } from './fields.ts';

// `routes`: topic pattern → destination; the first match wins.

export const routeSchema = z.strictObject({
  match: z
    .string()
    .superRefine((pattern, ctx) => {
      const problem = topicPatternProblem(pattern);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    })
    .describe('Topic pattern: dot-separated segments, "*" one segment, "#" zero or more.'),
  destination: text().describe('Name of a configured destination.'),
  transform: transformSchema.optional().describe('Runs before the destination transform.'),
});
