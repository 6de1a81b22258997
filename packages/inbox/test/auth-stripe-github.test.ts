import { describe, expect, it } from 'vitest';
import { AUTH_SCHEMES, verifyGithub, verifyStripe } from '../src/index.ts';

import { body, failure, hmacHex, NOW, NOW_SEC, options } from './auth-fixtures.ts';

describe('stripe', () => {
  const secret = 'whsec_test_secret';
  const text = '{"id":"evt_1","type":"invoice.paid"}';
  // Stripe: signed_payload = `${t}.${body}`, v1 = hex HMAC-SHA256 with the endpoint secret.
  const header = (t: number, ...signatures: string[]) =>
    [`t=${t}`, ...signatures.map((s) => `v1=${s}`)].join(',');
  const sign = (t: number, key = secret, payload = text) => hmacHex(key, `${t}.${payload}`);

  it('accepts a signature built as Stripe documents it', () => {
    // Prepare
    const headers = { 'stripe-signature': header(NOW_SEC, sign(NOW_SEC)) };
    // Act
    const result = verifyStripe(body(text), headers, options('stripe', [secret]), NOW);
    // Assess
    expect(result).toEqual({ ok: true });
  });

  it('ignores v0 elements and accepts any of several v1 signatures (Stripe rolling a secret)', () => {
    const headers = {
      'stripe-signature': `t=${NOW_SEC},v1=${sign(NOW_SEC, 'whsec_other')},v0=${'ab'.repeat(32)},v1=${sign(NOW_SEC)}`,
    };
    expect(verifyStripe(body(text), headers, options('stripe', [secret]), NOW)).toEqual({ ok: true });
    // The matching one first, another after it (an outside mutation audit: keeping only the last v1 passed).
    const first = { 'stripe-signature': header(NOW_SEC, sign(NOW_SEC), sign(NOW_SEC, 'whsec_other')) };
    expect(verifyStripe(body(text), first, options('stripe', [secret]), NOW)).toEqual({ ok: true });
  });

  it('refuses a signature cut short: a prefix of the right one is no signature (a 1-byte one would pass 1 in 256)', () => {
    for (const hexChars of [2, 8, 62]) {
      const headers = { 'stripe-signature': header(NOW_SEC, sign(NOW_SEC).slice(0, hexChars)) };
      expect(failure(verifyStripe(body(text), headers, options('stripe', [secret]), NOW))).toBe(
        'signature_mismatch',
      );
    }
  });

  it('accepts a rotated secret: the new one while the old one is still configured', () => {
    const headers = { 'stripe-signature': header(NOW_SEC, sign(NOW_SEC, 'whsec_new')) };
    expect(verifyStripe(body(text), headers, options('stripe', [secret, 'whsec_new']), NOW)).toEqual({
      ok: true,
    });
    expect(failure(verifyStripe(body(text), headers, options('stripe', [secret]), NOW))).toBe(
      'signature_mismatch',
    );
  });

  it('refuses a tampered body and a wrong secret', () => {
    const headers = { 'stripe-signature': header(NOW_SEC, sign(NOW_SEC)) };
    expect(failure(verifyStripe(body(`${text} `), headers, options('stripe', [secret]), NOW))).toBe(
      'signature_mismatch',
    );
    expect(failure(verifyStripe(body(text), headers, options('stripe', ['whsec_wrong']), NOW))).toBe(
      'signature_mismatch',
    );
  });

  it('refuses a signature whose timestamp was changed after signing', () => {
    const headers = { 'stripe-signature': header(NOW_SEC + 1, sign(NOW_SEC)) };
    expect(failure(verifyStripe(body(text), headers, options('stripe', [secret]), NOW))).toBe(
      'signature_mismatch',
    );
  });

  it('refuses old and future timestamps beyond the tolerance, both ways, and accepts the edge', () => {
    const at = (t: number, tolerance?: number, now = NOW) =>
      failure(
        verifyStripe(
          body(text),
          { 'stripe-signature': header(t, sign(t)) },
          options('stripe', [secret], tolerance === undefined ? {} : { toleranceSec: tolerance }),
          now,
        ),
      );
    expect(at(NOW_SEC - 301)).toBe('timestamp_out_of_tolerance');
    expect(at(NOW_SEC + 301)).toBe('timestamp_out_of_tolerance');
    expect(at(NOW_SEC - 300)).toBe('ok');
    expect(at(NOW_SEC - 30, 10)).toBe('timestamp_out_of_tolerance');
    // Now counted in whole seconds, as Stripe's and Svix's own verifiers count it: 300 s and 999 ms is still 300 s.
    expect(at(NOW_SEC - 300, undefined, NOW + 999)).toBe('ok');
    expect(at(NOW_SEC + 300, undefined, NOW + 999)).toBe('ok');
    expect(at(NOW_SEC - 301, undefined, NOW + 999)).toBe('timestamp_out_of_tolerance');
    expect(at(NOW_SEC + 301, undefined, NOW + 999)).toBe('timestamp_out_of_tolerance');
  });

  it('refuses a missing header, a header without v1, and a header without a timestamp', () => {
    const verify = (headers: Record<string, string>) =>
      failure(verifyStripe(body(text), headers, options('stripe', [secret]), NOW));
    expect(verify({})).toBe('missing_header');
    expect(verify({ 'stripe-signature': `t=${NOW_SEC}` })).toBe('malformed_header');
    expect(verify({ 'stripe-signature': `v1=${sign(NOW_SEC)}` })).toBe('malformed_header');
    expect(verify({ 'stripe-signature': `t=${NOW_SEC},t=${NOW_SEC},v1=${sign(NOW_SEC)}` })).toBe(
      'malformed_header',
    );
  });

  it('names $.id and $.type as its natural idempotency key and event type', () => {
    expect(AUTH_SCHEMES.stripe.defaults).toEqual({
      idempotencyKey: [{ path: '$.id' }],
      eventType: { path: '$.type' },
    });
  });
});

describe('github', () => {
  it("accepts GitHub's documented test vector", () => {
    // docs.github.com, "Validating webhook deliveries": secret "It's a Secret to Everybody", payload "Hello, World!"
    const headers = {
      'x-hub-signature-256': 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17',
    };
    const result = verifyGithub(
      body('Hello, World!'),
      headers,
      options('github', ["It's a Secret to Everybody"]),
    );
    expect(result).toEqual({ ok: true });
  });

  it('refuses a tampered body, a wrong secret, a missing header and a missing prefix', () => {
    const good = `sha256=${hmacHex('s3cret', '{"a":1}')}`;
    const verify = (text: string, headers: Record<string, string>, secret = 's3cret') =>
      failure(verifyGithub(body(text), headers, options('github', [secret])));
    expect(verify('{"a":1}', { 'x-hub-signature-256': good })).toBe('ok');
    expect(verify('{"a":2}', { 'x-hub-signature-256': good })).toBe('signature_mismatch');
    expect(verify('{"a":1}', { 'x-hub-signature-256': good }, 'other')).toBe('signature_mismatch');
    expect(verify('{"a":1}', {})).toBe('missing_header');
    expect(verify('{"a":1}', { 'x-hub-signature-256': good.slice('sha256='.length) })).toBe(
      'malformed_header',
    );
    expect(verify('{"a":1}', { 'x-hub-signature-256': 'sha256=zz' })).toBe('malformed_header');
  });

  it('refuses a signature cut short (a prefix of the right one)', () => {
    const good = `sha256=${hmacHex('gh-secret', '{"a":1}')}`;
    for (const hexChars of [2, 32]) {
      const headers = { 'x-hub-signature-256': good.slice(0, 'sha256='.length + hexChars) };
      expect(verifyGithub(body('{"a":1}'), headers, options('github', ['gh-secret']), NOW).ok).toBe(false);
    }
  });

  it('accepts a rotated secret', () => {
    const headers = { 'x-hub-signature-256': `sha256=${hmacHex('new', 'x')}` };
    expect(verifyGithub(body('x'), headers, options('github', ['old', 'new']))).toEqual({ ok: true });
  });

  it('names X-GitHub-Delivery and X-GitHub-Event as its natural key and event type', () => {
    expect(AUTH_SCHEMES.github.defaults).toEqual({
      idempotencyKey: [{ header: 'X-GitHub-Delivery' }],
      eventType: { header: 'X-GitHub-Event' },
    });
  });
});
