/** The inbox auth schemes without a provider: safeEqual, generic HMAC, bearer and basic. Provider schemes: auth-*.test.ts. */
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { AuthOptions } from '../src/index.ts';
import { AUTH_SCHEMES, safeEqual, verifyBasic, verifyBearer, verifyHmac } from '../src/index.ts';

import { body, failure, hmacHex, NOW, options } from './auth-fixtures.ts';

describe('safeEqual', () => {
  it('compares byte strings of any lengths', () => {
    expect(safeEqual(Buffer.from('abc'), Buffer.from('abc'))).toBe(true);
    expect(safeEqual(Buffer.from('abc'), Buffer.from('abd'))).toBe(false);
    expect(safeEqual(Buffer.from('abc'), Buffer.from('abcd'))).toBe(false);
    expect(safeEqual(Buffer.alloc(0), Buffer.from('a'))).toBe(false);
  });
});

describe('generic hmac', () => {
  const text = '{"order":42}';

  it('verifies sha256 hex with a prefix', () => {
    const opts = options('hmac', ['k1'], { header: 'X-Signature', prefix: 'sha256=' });
    const headers = { 'x-signature': `sha256=${hmacHex('k1', text)}` };
    expect(verifyHmac(body(text), headers, opts)).toEqual({ ok: true });
    expect(failure(verifyHmac(body(text), { 'x-signature': hmacHex('k1', text) }, opts))).toBe(
      'malformed_header',
    );
  });

  it('verifies sha512 base64, and a rotated secret', () => {
    const signature = createHmac('sha512', 'k2').update(text).digest('base64');
    const opts = options('hmac', ['k1', 'k2'], { header: 'X-Sig', algorithm: 'sha512', encoding: 'base64' });
    expect(verifyHmac(body(text), { 'x-sig': signature }, opts)).toEqual({ ok: true });
    const sha256 = createHmac('sha256', 'k2').update(text).digest('base64');
    expect(failure(verifyHmac(body(text), { 'x-sig': sha256 }, opts))).toBe('signature_mismatch');
  });

  it('refuses a tampered body, a wrong secret and a missing header', () => {
    const opts = options('hmac', ['k1'], { header: 'X-Signature' });
    const headers = { 'x-signature': hmacHex('k1', text) };
    expect(failure(verifyHmac(body('{"order":43}'), headers, opts))).toBe('signature_mismatch');
    expect(failure(verifyHmac(body(text), headers, { ...opts, secrets: ['k9'] }))).toBe('signature_mismatch');
    expect(failure(verifyHmac(body(text), {}, opts))).toBe('missing_header');
  });

  it('requires a header in its options', () => {
    expect(AUTH_SCHEMES.hmac.check(options('hmac', ['k']))).toContain(
      'auth.header is required by the hmac scheme',
    );
    expect(AUTH_SCHEMES.hmac.check(options('hmac', [''], { header: 'x' }))).toHaveLength(1);
  });
});

describe('bearer and basic', () => {
  it('bearer: accepts any configured token, case-insensitive scheme word, and refuses others', () => {
    const opts = options('bearer', ['tok-old', 'tok-new']);
    expect(verifyBearer(body(), { authorization: 'Bearer tok-new' }, opts)).toEqual({ ok: true });
    expect(verifyBearer(body(), { authorization: 'bearer tok-old' }, opts)).toEqual({ ok: true });
    expect(failure(verifyBearer(body(), { authorization: 'Bearer tok-ne' }, opts))).toBe(
      'credentials_mismatch',
    );
    expect(failure(verifyBearer(body(), { authorization: 'Basic dG9rLW5ldw==' }, opts))).toBe(
      'malformed_header',
    );
    expect(failure(verifyBearer(body(), {}, opts))).toBe('missing_header');
  });

  it('basic: accepts user:password pairs as RFC 7617 encodes them', () => {
    const opts = options('basic', ['alice:wonder', 'bob:builder']);
    const encode = (pair: string) => `Basic ${Buffer.from(pair, 'utf8').toString('base64')}`;
    expect(verifyBasic(body(), { authorization: encode('bob:builder') }, opts)).toEqual({ ok: true });
    expect(failure(verifyBasic(body(), { authorization: encode('bob:wonder') }, opts))).toBe(
      'credentials_mismatch',
    );
    expect(failure(verifyBasic(body(), { authorization: 'Basic !!' }, opts))).toBe('malformed_header');
    expect(failure(verifyBasic(body(), {}, opts))).toBe('missing_header');
    expect(AUTH_SCHEMES.basic.check(options('basic', ['no-colon']))).toHaveLength(1);
  });

  it('every scheme refuses when no secret is configured', () => {
    for (const [name, scheme] of Object.entries(AUTH_SCHEMES)) {
      const result = scheme.verify(
        body(),
        {},
        options(name as AuthOptions['scheme'], [], { header: 'x' }),
        NOW,
      );
      expect(failure(result), name).toBe('no_secret');
    }
  });
});
