import * as z from 'zod';
import { isUnresolvedReference } from './fields.ts';

// `admin`: access to the local /admin routes (on AWS: IAM).

/** The shortest `admin.token`: a token anyone could guess opens requeue, replay and purge. */
export const ADMIN_TOKEN_MIN_LENGTH = 16;

export const adminSchema = z
  .strictObject({
    token: z
      .string()
      .refine((value) => isUnresolvedReference(value) || value.length >= ADMIN_TOKEN_MIN_LENGTH, {
        message: `must be at least ${ADMIN_TOKEN_MIN_LENGTH} characters`,
      })
      .optional()
      .describe(
        `Bearer token for the local /admin routes (AWS uses IAM), at least ${ADMIN_TOKEN_MIN_LENGTH} characters. When absent, local admin routes are off.`,
      ),
    protectMetrics: z
      .boolean()
      .default(false)
      .describe(
        'Require the admin token (Authorization: Bearer) on the local GET /metrics too. Default false.',
      ),
  })
  .superRefine((a, ctx) => {
    if (a.protectMetrics && a.token === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['protectMetrics'],
        message: 'needs admin.token, the token /metrics asks for',
      });
    }
  });
