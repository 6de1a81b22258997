import type { JsonValue } from '@queuebox/core';
import type { AuthOptions, FieldLocation } from '../options.ts';

/** Why a request failed authentication. Stable; names no secret. Logged, never sent: every 401 answers alike. */
export type AuthFailureReason =
  | 'missing_header'
  | 'malformed_header'
  | 'timestamp_out_of_tolerance'
  | 'signature_mismatch'
  | 'credentials_mismatch'
  | 'no_secret';

/** The outcome of verifying one request. */
export type AuthResult =
  | {
      readonly ok: true;
      /**
       * The message id the signature covers, for schemes that sign one (Standard Webhooks' `webhook-id`): the
       * idempotency key unless the source configures another, so an unsigned header cannot re-key a replay.
       */
      readonly signedId?: string;
    }
  | { readonly ok: false; readonly reason: AuthFailureReason; readonly message: string };

/**
 * Verifies one request. Pure: reads only its arguments.
 * @param body the raw request body, exactly as received
 * @param headers request headers with lower-cased names
 * @param options the source's `auth` options (secrets resolved)
 * @param now the current time in epoch milliseconds
 */
export type Verifier = (
  body: Uint8Array,
  headers: Readonly<Record<string, string>>,
  options: AuthOptions,
  now: number,
) => AuthResult;

/** The natural idempotency key and event type of a scheme's provider, used when the source sets none. */
export interface SchemeDefaults {
  /** Tried in order; the first location that holds a value wins. */
  readonly idempotencyKey?: readonly FieldLocation[];
  /** One location, or several tried in order (the first that holds a value wins). */
  readonly eventType?: FieldLocation | readonly FieldLocation[];
}

/** One authentication scheme. */
export interface AuthScheme {
  readonly name: string;
  readonly verify: Verifier;
  readonly defaults: SchemeDefaults;
  /** Headers that carry credentials or signatures; they are never stored. Lower-cased. */
  readonly credentialHeaders: (options: AuthOptions) => readonly string[];
  /** Problems with the options, as messages (empty when usable). */
  readonly check: (options: AuthOptions) => readonly string[];
  /**
   * A provider's check of the endpoint rather than a message (Slack's `url_verification`): the JSON body to answer
   * with 200, after the signature was verified; nothing is stored. Undefined for an ordinary message.
   */
  readonly handshake?: (payload: JsonValue) => Readonly<Record<string, unknown>> | undefined;
}
