import { describe, expect, it } from 'vitest';
import type { AuthOptions } from '../src/index.ts';
import { AUTH_SCHEMES, normalizeHeaders, verifyStandardWebhooks } from '../src/index.ts';

import { body, failure, hmacB64, options } from './auth-fixtures.ts';

describe('standard webhooks / svix', () => {
  // The test vector of the Standard Webhooks / Svix reference libraries.
  const vector = {
    secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
    timestamp: 1614265330,
    payload: '{"test": 2432232314}',
    signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
  };
  const at = vector.timestamp * 1000;
  const headersOf = (
    prefix: 'webhook' | 'svix',
    signature = vector.signature,
    timestamp = vector.timestamp,
  ) => ({
    [`${prefix}-id`]: vector.id,
    [`${prefix}-timestamp`]: String(timestamp),
    [`${prefix}-signature`]: signature,
  });
  const opts = (secrets = [vector.secret], extra: Partial<AuthOptions> = {}) =>
    options('standard-webhooks', secrets, extra);
  const sign = (key: string, id: string, t: number, payload: string) =>
    `v1,${hmacB64(Buffer.from(key.replace(/^whsec_/, ''), 'base64'), `${id}.${t}.${payload}`)}`;

  it('accepts the reference test vector with webhook- and with svix- headers', () => {
    expect(verifyStandardWebhooks(body(vector.payload), headersOf('webhook'), opts(), at)).toEqual({
      ok: true,
      signedId: vector.id,
    });
    expect(verifyStandardWebhooks(body(vector.payload), headersOf('svix'), opts(), at)).toEqual({
      ok: true,
      signedId: vector.id,
    });
  });

  it('accepts any of several space-separated signatures, skipping other versions', () => {
    const headers = headersOf('webhook', `v1a,${'A'.repeat(86)}== v1,${'B'.repeat(43)}= ${vector.signature}`);
    expect(verifyStandardWebhooks(body(vector.payload), headers, opts(), at)).toEqual({
      ok: true,
      signedId: vector.id,
    });
  });

  it('reads a webhook-signature header the sender repeated, as Node (`, `) and API Gateway (`,`) join it', () => {
    const bad = `v1,${'B'.repeat(43)}=`;
    for (const joined of [
      normalizeHeaders({ 'webhook-signature': [vector.signature, bad] })['webhook-signature'],
      normalizeHeaders({ 'webhook-signature': [bad, vector.signature] })['webhook-signature'],
      `${vector.signature},${bad}`,
      `${bad},${vector.signature}`,
    ]) {
      const headers = headersOf('webhook', joined);
      expect(verifyStandardWebhooks(body(vector.payload), headers, opts(), at)).toEqual({
        ok: true,
        signedId: vector.id,
      });
    }
    // A v1 with no signature after it is no signature.
    expect(
      failure(verifyStandardWebhooks(body(vector.payload), headersOf('webhook', 'v1,'), opts(), at)),
    ).toBe('malformed_header');
  });

  it('refuses webhook-* and svix-* headers whose signatures disagree, id and timestamp alike', () => {
    const headers = {
      ...headersOf('webhook'),
      ...headersOf('svix', `v1,${'A'.repeat(43)}=`),
    };
    expect(failure(verifyStandardWebhooks(body(vector.payload), headers, opts(), at))).toBe(
      'malformed_header',
    );
  });

  it('accepts a rotated secret, with or without the whsec_ prefix', () => {
    const fresh = 'whsec_dGhpcyBpcyBhIG5ldyBzZWNyZXQga2V5IQ==';
    const headers = headersOf('webhook', sign(fresh, vector.id, vector.timestamp, vector.payload));
    expect(verifyStandardWebhooks(body(vector.payload), headers, opts([vector.secret, fresh]), at)).toEqual({
      ok: true,
      signedId: vector.id,
    });
    expect(
      verifyStandardWebhooks(body(vector.payload), headers, opts([fresh.slice('whsec_'.length)]), at),
    ).toEqual({ ok: true, signedId: vector.id });
    expect(failure(verifyStandardWebhooks(body(vector.payload), headers, opts(), at))).toBe(
      'signature_mismatch',
    );
  });

  it('refuses a tampered body, a wrong secret and a changed id', () => {
    expect(
      failure(verifyStandardWebhooks(body('{"test": 2432232315}'), headersOf('webhook'), opts(), at)),
    ).toBe('signature_mismatch');
    expect(
      failure(
        verifyStandardWebhooks(
          body(vector.payload),
          headersOf('webhook'),
          opts(['whsec_dGhpcyBpcyBhIG5ldyBzZWNyZXQga2V5IQ==']),
          at,
        ),
      ),
    ).toBe('signature_mismatch');
    const headers = { ...headersOf('webhook'), 'webhook-id': 'msg_other' };
    expect(failure(verifyStandardWebhooks(body(vector.payload), headers, opts(), at))).toBe(
      'signature_mismatch',
    );
  });

  it('returns the signed id, and refuses webhook- and svix- headers that disagree (an unsigned id re-keying a replay)', () => {
    const svix = headersOf('svix');
    expect(verifyStandardWebhooks(body(vector.payload), svix, opts(), at)).toEqual({
      ok: true,
      signedId: vector.id,
    });
    const extras: Record<string, string>[] = [
      { 'webhook-id': 'r1' },
      { 'webhook-id': 'r2' },
      { 'webhook-timestamp': '1' },
    ];
    for (const extra of extras) {
      expect(failure(verifyStandardWebhooks(body(vector.payload), { ...svix, ...extra }, opts(), at))).toBe(
        'malformed_header',
      );
    }
    // A sender that sends both sets with the same values is not refused.
    const both = { ...headersOf('svix'), ...headersOf('webhook') };
    expect(verifyStandardWebhooks(body(vector.payload), both, opts(), at)).toEqual({
      ok: true,
      signedId: vector.id,
    });
  });

  it('treats secrets that decode to fewer than 24 bytes as no secret, and reports them as configuration problems', () => {
    // whsec_A decodes to no key at all: a request signed with the empty key must not pass.
    const empty = sign('whsec_', vector.id, vector.timestamp, vector.payload);
    for (const weak of ['whsec_A', 'whsec_', 'whsec_c2hvcnQ=']) {
      const headers = headersOf(
        'webhook',
        weak === 'whsec_c2hvcnQ=' ? sign(weak, vector.id, vector.timestamp, vector.payload) : empty,
      );
      expect(failure(verifyStandardWebhooks(body(vector.payload), headers, opts([weak]), at)), weak).toBe(
        'no_secret',
      );
      expect(AUTH_SCHEMES['standard-webhooks'].check(opts([weak])).join(' '), weak).toMatch(
        /at least 24 bytes|base64/,
      );
    }
    expect(AUTH_SCHEMES['standard-webhooks'].check(opts())).toEqual([]);
  });

  it('refuses timestamps beyond the tolerance in both directions', () => {
    expect(
      failure(verifyStandardWebhooks(body(vector.payload), headersOf('webhook'), opts(), at + 301_000)),
    ).toBe('timestamp_out_of_tolerance');
    expect(
      failure(verifyStandardWebhooks(body(vector.payload), headersOf('webhook'), opts(), at - 301_000)),
    ).toBe('timestamp_out_of_tolerance');
    expect(verifyStandardWebhooks(body(vector.payload), headersOf('webhook'), opts(), at + 299_000)).toEqual({
      ok: true,
      signedId: vector.id,
    });
  });

  it('refuses missing headers and a signature list without v1', () => {
    const { 'webhook-id': _id, ...noId } = headersOf('webhook');
    const { 'webhook-timestamp': _t, ...noTimestamp } = headersOf('webhook');
    expect(failure(verifyStandardWebhooks(body(vector.payload), {}, opts(), at))).toBe('missing_header');
    expect(failure(verifyStandardWebhooks(body(vector.payload), noId, opts(), at))).toBe('missing_header');
    expect(failure(verifyStandardWebhooks(body(vector.payload), noTimestamp, opts(), at))).toBe(
      'missing_header',
    );
    expect(
      failure(verifyStandardWebhooks(body(vector.payload), headersOf('webhook', 'v2,abc='), opts(), at)),
    ).toBe('malformed_header');
  });

  it('flags secrets that are not base64 and names webhook-id / $.type as its defaults', () => {
    expect(AUTH_SCHEMES['standard-webhooks'].check(opts(['whsec_not base64!']))).toHaveLength(1);
    expect(AUTH_SCHEMES.svix).toBe(AUTH_SCHEMES['standard-webhooks']);
    expect(AUTH_SCHEMES['standard-webhooks'].defaults).toEqual({
      idempotencyKey: [{ header: 'webhook-id' }, { header: 'svix-id' }],
      eventType: { path: '$.type' },
    });
  });
});
