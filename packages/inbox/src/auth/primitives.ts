import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { AuthOptions } from '../options.ts';
import { DEFAULTS } from '../options.ts';
import type { AuthFailureReason, AuthResult } from './types.ts';

/** The passing result. */
export const OK: AuthResult = { ok: true };

/** A failing result. */
export function fail(reason: AuthFailureReason, message: string): AuthResult {
  return { ok: false, reason, message };
}

/** HMAC of `parts` concatenated, as raw bytes. */
export function hmac(
  algorithm: 'sha256' | 'sha512',
  key: Uint8Array | string,
  ...parts: Uint8Array[]
): Buffer {
  const mac = createHmac(algorithm, key);
  for (const part of parts) mac.update(part);
  return mac.digest();
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

const HEX = /^(?:[0-9a-fA-F]{2})+$/;
const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;

/** Decodes a hex or base64 (standard or URL-safe, padding optional) signature; undefined when malformed. */
export function decodeSignature(text: string, encoding: 'hex' | 'base64'): Buffer | undefined {
  if (encoding === 'hex') return HEX.test(text) ? Buffer.from(text, 'hex') : undefined;
  return BASE64.test(text) ? Buffer.from(text, 'base64') : undefined;
}

const SECONDS = /^\d{1,15}$/;

/**
 * Checks a Unix-seconds timestamp against now, in both directions (a clock ahead of ours is as suspicious as a
 * replay). Undefined when it passes.
 */
export function checkTimestamp(text: string, options: AuthOptions, now: number): AuthResult | undefined {
  if (!SECONDS.test(text))
    return fail('malformed_header', 'The signature timestamp is not a Unix time in seconds');
  const tolerance = options.toleranceSec ?? DEFAULTS.toleranceSec;
  if (Math.abs(now / 1000 - Number(text)) > tolerance) {
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
