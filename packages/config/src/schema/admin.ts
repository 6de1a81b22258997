import * as z from 'zod';
import { isUnresolvedReference } from './fields.ts';

// `admin`: access to the local /admin routes (on AWS: IAM).

/** The shortest `admin.token`: a token anyone could guess opens requeue, replay and purge. */
export const ADMIN_TOKEN_MIN_LENGTH = 16;

/**
 * What an `admin.token` may hold: visible ASCII, no space (RFC 6750's b64token is a subset). The token travels as
 * `Authorization: Bearer <token>`, which the admin API reads as one word, and Node hands header bytes over as
 * Latin-1: a token with a space or a character beyond ASCII could never match.
 */
export const ADMIN_TOKEN_PATTERN = /^[\x21-\x7e]+$/;

export const adminSchema = z
  .strictObject({
    token: z
      .string()
      .refine((value) => isUnresolvedReference(value) || value.length >= ADMIN_TOKEN_MIN_LENGTH, {
        message: `must be at least ${ADMIN_TOKEN_MIN_LENGTH} characters`,
      })
      // Never echo the value: it is a credential.
      .refine((value) => isUnresolvedReference(value) || value === '' || ADMIN_TOKEN_PATTERN.test(value), {
        message:
          'must be visible ASCII characters without spaces (letters, digits, punctuation such as - . _ ~ + / =): it is sent as "Authorization: Bearer <token>", so a space or a character beyond ASCII could never match',
      })
      .optional()
      .describe(
        `Bearer token for the local /admin routes (AWS uses IAM), at least ${ADMIN_TOKEN_MIN_LENGTH} visible ASCII characters without spaces. When absent, local admin routes are off.`,
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
