import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { CONFIG_DEFAULTS } from '@queuebox/core';
import type { AuthOptions } from '../options.ts';
import type { AuthFailureReason, AuthResult } from './types.ts';

/** The passing result. */
export const OK: AuthResult = { ok: true };

/** A failing result. */
export function fail(reason: AuthFailureReason, message: string): AuthResult {
  return { ok: false, reason, message };
}

/** UTF-8 bytes of a string. */
export function utf8(text: string): Buffer {
  return Buffer.from(text, 'utf8');
}

function digest(bytes: Uint8Array): Buffer {
  return createHash('sha256').update(bytes).digest();
}

/**
 * Constant-time equality of two byte strings of any lengths. Both sides are hashed first, so `timingSafeEqual`
 * always sees equal-length buffers and neither the length nor the content of the expected value leaks.
 */
export function safeEqual(a: Uint8Array, b: Uint8Array): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

/**
 * Whether any candidate equals any expected value. Every pair is compared (no early exit), so the time taken does
 * not tell which secret or which signature matched.
 */
export function anyEqual(candidates: readonly Uint8Array[], expected: readonly Uint8Array[]): boolean {
  let found = false;
  for (const candidate of candidates) {
    for (const value of expected) {
      if (safeEqual(candidate, value)) found = true;
    }
  }
  return found;
}

/**
 * Constant-time equality of a received signature and a computed MAC. The MAC's length is public (the algorithm's
 * digest size), so a signature of another length is simply unequal; equal lengths go straight to
 * `timingSafeEqual`, without hashing both sides as {@link safeEqual} must for secrets of unknown length.
 */
function macEqual(signature: Uint8Array, mac: Uint8Array): boolean {
  return signature.byteLength === mac.byteLength && timingSafeEqual(signature, mac);
}

/** Passes when `candidate` equals one of `secrets` (as UTF-8, via `anyEqual`); else `credentials_mismatch`. */
export function verifyCredential(
  candidate: Uint8Array,
  secrets: readonly string[],
  mismatch: string,
): AuthResult {
  return anyEqual([candidate], secrets.map(utf8)) ? OK : fail('credentials_mismatch', mismatch);
}

const HEX = /^(?:[0-9a-fA-F]{2})+$/;
const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;

/** Decodes a hex or base64 (standard or URL-safe, padding optional) signature; undefined when malformed. */
export function decodeSignature(text: string, encoding: 'hex' | 'base64'): Buffer | undefined {
  if (encoding === 'hex') return HEX.test(text) ? Buffer.from(text, 'hex') : undefined;
  return BASE64.test(text) ? Buffer.from(text, 'base64') : undefined;
}

/**
 * The trimmed value of the header `label` (looked up by its lower-cased name), or the `missing_header` failure when
 * it is absent or blank.
 */
export function requiredHeader(
  headers: Readonly<Record<string, string>>,
  label: string,
): string | AuthResult {
  const value = headers[label.toLowerCase()]?.trim();
  return value === undefined || value === '' ? missing(label) : value;
}

/** How a header carries one signature: after `prefix` (default none), in `encoding`. */
export interface SignatureFormat {
  /** The header's name as messages show it. */
  readonly label: string;
  readonly prefix?: string;
  readonly encoding: 'hex' | 'base64';
}

/** The signature bytes of a header value in `format`, or the `malformed_header` failure. */
export function decodeSignatureHeader(value: string, format: SignatureFormat): Buffer | AuthResult {
  const prefix = format.prefix ?? '';
  if (!value.startsWith(prefix))
    return fail('malformed_header', `The ${format.label} header lacks ${prefix}`);
  const signature = decodeSignature(value.slice(prefix.length), format.encoding);
  return signature ?? fail('malformed_header', `The ${format.label} header is not ${format.encoding}`);
}

/** What `verifyHmacSignatures` compares. */
export interface HmacCheck {
  /** Default sha256. */
  readonly algorithm?: 'sha256' | 'sha512';
  /** One key per active secret; a string is used as its UTF-8 bytes. */
  readonly keys: readonly (Uint8Array | string)[];
  /** The signed content, in order (e.g. a timestamp prefix, then the raw body); strings count as UTF-8. */
  readonly message: readonly (Uint8Array | string)[];
  /** The signatures the request carries, decoded. */
  readonly signatures: readonly Uint8Array[];
  /** The failure message when none matches. Default "The signature does not match the body". */
  readonly mismatch?: string;
}

/**
 * Passes when any signature equals the HMAC of the message under any key (several keys while a secret rotates,
 * several signatures while the sender rotates). Constant time for a signature of the digest's length, every pair
 * compared.
 */
export function verifyHmacSignatures(check: HmacCheck): AuthResult {
  const expected = check.keys.map((key) => {
    const mac = createHmac(check.algorithm ?? 'sha256', key);
    for (const part of check.message) mac.update(part);
    return mac.digest();
  });
  // Every pair is compared (no early exit), so the time taken does not tell which key or signature matched.
  let found = false;
  for (const signature of check.signatures) {
    for (const mac of expected) {
      if (macEqual(signature, mac)) found = true;
    }
  }
  return found ? OK : fail('signature_mismatch', check.mismatch ?? 'The signature does not match the body');
}

/**
 * The common webhook signature: one header carrying `format.prefix` + the HMAC (`format.algorithm`, default sha256)
 * of the raw body (GitHub, Shopify, generic HMAC). Missing header, malformed value or mismatch fail as usual.
 */
export function verifyBodySignature(
  body: Uint8Array,
  headers: Readonly<Record<string, string>>,
  keys: readonly (Uint8Array | string)[],
  format: SignatureFormat & { readonly algorithm?: 'sha256' | 'sha512' },
): AuthResult {
  const value = requiredHeader(headers, format.label);
  if (typeof value !== 'string') return value;
  const signature = decodeSignatureHeader(value, format);
  if (!(signature instanceof Uint8Array)) return signature;
  return verifyHmacSignatures({
    algorithm: format.algorithm,
    keys,
    message: [body],
    signatures: [signature],
  });
}

const SECONDS = /^\d{1,15}$/;

/**
 * Checks a Unix-seconds timestamp against now, in both directions (a clock ahead of ours is as suspicious as a
 * replay). Undefined when it passes.
 */
export function checkTimestamp(text: string, options: AuthOptions, now: number): AuthResult | undefined {
  if (!SECONDS.test(text))
    return fail('malformed_header', 'The signature timestamp is not a Unix time in seconds');
  const tolerance = options.toleranceSec ?? CONFIG_DEFAULTS.source.toleranceSec;
  // Now in whole seconds, as the providers' own verifiers (Stripe, Svix, Standard Webhooks) count it.
  if (Math.abs(Math.floor(now / 1000) - Number(text)) > tolerance) {
    return fail('timestamp_out_of_tolerance', `The signature timestamp is more than ${tolerance} s from now`);
  }
  return undefined;
}

/** The non-empty secrets of a scheme. */
export function secretsOf(options: AuthOptions): readonly string[] {
  return options.secrets.filter((s) => s.length > 0);
}

/** The failure to report when a source has no usable secret. */
export const NO_SECRET: AuthResult = fail('no_secret', 'The source has no active secret');

/** A scheme's verification once the source's secrets are known to be there. */
export type SecretCheck = (
  body: Uint8Array,
  headers: Readonly<Record<string, string>>,
  secrets: readonly string[],
  options: AuthOptions,
  now: number,
) => AuthResult;

/**
 * A Verifier that answers `no_secret` when the source has no non-empty secret and otherwise runs `check` with them,
 * so a scheme is only its header parsing and signed-message construction. `now` defaults to the system clock; only
 * schemes with a timestamp read it.
 */
export function secretVerifier(
  check: SecretCheck,
): (
  body: Uint8Array,
  headers: Readonly<Record<string, string>>,
  options: AuthOptions,
  now?: number,
) => AuthResult {
  return (body, headers, options, now = Date.now()) => {
    const secrets = secretsOf(options);
    return secrets.length === 0 ? NO_SECRET : check(body, headers, secrets, options, now);
  };
}

/**
 * The credentials of `Authorization: <scheme> <credentials>`: group 1 of `pattern`, or the failure (missing header;
 * `malformed_header` saying the value is not `what`).
 */
export function authorizationCredentials(
  headers: Readonly<Record<string, string>>,
  pattern: RegExp,
  what: string,
): string | AuthResult {
  const value = requiredHeader(headers, 'Authorization');
  if (typeof value !== 'string') return value;
  return pattern.exec(value)?.[1] ?? fail('malformed_header', `The Authorization header is not ${what}`);
}

/** The common check: at least one non-empty secret, and a positive tolerance. */
export function checkCommon(options: AuthOptions): string[] {
  const issues: string[] = [];
  if (!options.secrets.some((s) => s.length > 0))
    issues.push('auth.secrets needs at least one non-empty secret');
  if (options.toleranceSec !== undefined && !(options.toleranceSec > 0)) {
    issues.push('auth.toleranceSec must be a positive number of seconds');
  }
  return issues;
}

/** A missing-header failure. */
export function missing(header: string): AuthResult {
  return fail('missing_header', `The ${header} header is missing`);
}
