import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { AuthOptions, AuthResult } from '../src/index.ts';
import {
  AUTH_SCHEMES,
  safeEqual,
  verifyBasic,
  verifyBearer,
  verifyGithub,
  verifyHmac,
  verifyShopify,
  verifySlack,
  verifyStandardWebhooks,
  verifyStripe,
} from '../src/index.ts';

// Signatures here are built the way each provider documents them, with node:crypto directly, never through the
// verifier's own helpers.

const NOW = 1_750_000_000_000;
const NOW_SEC = NOW / 1000;
const body = (text = '{"id":"evt_1","type":"invoice.paid"}') => new TextEncoder().encode(text);
const hmacHex = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest('hex');
const hmacB64 = (key: string | Buffer, data: string) =>
  createHmac('sha256', key).update(data).digest('base64');
const options = (
  scheme: AuthOptions['scheme'],
  secrets: string[],
  extra: Partial<AuthOptions> = {},
): AuthOptions => ({
  scheme,
  secrets,
  ...extra,
});
const failure = (result: AuthResult) => (result.ok ? 'ok' : result.reason);

describe('safeEqual', () => {
  it('compares byte strings of any lengths', () => {
    expect(safeEqual(Buffer.from('abc'), Buffer.from('abc'))).toBe(true);
    expect(safeEqual(Buffer.from('abc'), Buffer.from('abd'))).toBe(false);
    expect(safeEqual(Buffer.from('abc'), Buffer.from('abcd'))).toBe(false);
    expect(safeEqual(Buffer.alloc(0), Buffer.from('a'))).toBe(false);
  });
});

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
    const at = (t: number, tolerance?: number) =>
      failure(
        verifyStripe(
          body(text),
          { 'stripe-signature': header(t, sign(t)) },
          options('stripe', [secret], tolerance === undefined ? {} : { toleranceSec: tolerance }),
          NOW,
        ),
      );
    expect(at(NOW_SEC - 301)).toBe('timestamp_out_of_tolerance');
    expect(at(NOW_SEC + 301)).toBe('timestamp_out_of_tolerance');
    expect(at(NOW_SEC - 300)).toBe('ok');
    expect(at(NOW_SEC - 30, 10)).toBe('timestamp_out_of_tolerance');
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

describe('shopify', () => {
  const secret = 'shpss_client_secret';
  const text = '{"id":820982911946154508,"email":"jon@example.com"}';
  // Shopify: base64 HMAC-SHA256 of the raw body with the app's client secret.
  const headers = (signature = hmacB64(secret, text)) => ({ 'x-shopify-hmac-sha256': signature });

  it('accepts the documented signature, and a rotated secret', () => {
    expect(verifyShopify(body(text), headers(), options('shopify', [secret]))).toEqual({ ok: true });
    expect(verifyShopify(body(text), headers(), options('shopify', ['old', secret]))).toEqual({ ok: true });
  });

  it('refuses a tampered body, a wrong secret, a missing header and a hex signature', () => {
    expect(failure(verifyShopify(body(`${text}\n`), headers(), options('shopify', [secret])))).toBe(
      'signature_mismatch',
    );
    expect(failure(verifyShopify(body(text), headers(), options('shopify', ['other'])))).toBe(
      'signature_mismatch',
    );
    expect(failure(verifyShopify(body(text), {}, options('shopify', [secret])))).toBe('missing_header');
    expect(
      failure(verifyShopify(body(text), headers(hmacHex(secret, text)), options('shopify', [secret]))),
    ).toBe('signature_mismatch');
  });

  it('accepts the signature in Shopify-Hmac-Sha256, the header of Events deliveries', () => {
    const events = { 'shopify-hmac-sha256': hmacB64(secret, text) };
    expect(verifyShopify(body(text), events, options('shopify', [secret]))).toEqual({ ok: true });
    expect(failure(verifyShopify(body(`${text} `), events, options('shopify', [secret])))).toBe(
      'signature_mismatch',
    );
    expect(AUTH_SCHEMES.shopify.credentialHeaders(options('shopify', [secret]))).toEqual([
      'x-shopify-hmac-sha256',
      'shopify-hmac-sha256',
    ]);
  });

  it('names X-Shopify-Webhook-Id (then Shopify-Webhook-Id) and X-Shopify-Topic (then Shopify-Topic) as its defaults', () => {
    // Not X-Shopify-Event-Id: Shopify gives it to every delivery of one merchant action, one per topic.
    expect(AUTH_SCHEMES.shopify.defaults).toEqual({
      idempotencyKey: [{ header: 'X-Shopify-Webhook-Id' }, { header: 'Shopify-Webhook-Id' }],
      eventType: [{ header: 'X-Shopify-Topic' }, { header: 'Shopify-Topic' }],
    });
  });
});

describe('slack', () => {
  // Slack's documented example ("Verifying requests from Slack").
  const secret = '8f742231b10e8888abcd99yyyzzz85a5';
  const timestamp = 1531420618;
  const text =
    'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c';
  const documented = 'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503';
  const headers = (signature = documented, t = timestamp) => ({
    'x-slack-signature': signature,
    'x-slack-request-timestamp': String(t),
  });
  const at = timestamp * 1000;

  it("accepts Slack's documented example, and a rotated secret", () => {
    expect(verifySlack(body(text), headers(), options('slack', [secret]), at)).toEqual({ ok: true });
    expect(verifySlack(body(text), headers(), options('slack', ['old', secret]), at)).toEqual({ ok: true });
  });

  it('refuses a tampered body, a wrong secret and a changed timestamp', () => {
    expect(failure(verifySlack(body(`${text}&x=1`), headers(), options('slack', [secret]), at))).toBe(
      'signature_mismatch',
    );
    expect(failure(verifySlack(body(text), headers(), options('slack', ['other']), at))).toBe(
      'signature_mismatch',
    );
    expect(
      failure(verifySlack(body(text), headers(documented, timestamp + 1), options('slack', [secret]), at)),
    ).toBe('signature_mismatch');
  });

  it('refuses old and future timestamps and missing headers', () => {
    const signed = (t: number) => `v0=${hmacHex(secret, `v0:${t}:${text}`)}`;
    const old = timestamp - 600;
    const future = timestamp + 600;
    expect(failure(verifySlack(body(text), headers(signed(old), old), options('slack', [secret]), at))).toBe(
      'timestamp_out_of_tolerance',
    );
    expect(
      failure(verifySlack(body(text), headers(signed(future), future), options('slack', [secret]), at)),
    ).toBe('timestamp_out_of_tolerance');
    expect(
      failure(verifySlack(body(text), { 'x-slack-signature': documented }, options('slack', [secret]), at)),
    ).toBe('missing_header');
    expect(
      failure(
        verifySlack(
          body(text),
          { 'x-slack-request-timestamp': String(timestamp) },
          options('slack', [secret]),
          at,
        ),
      ),
    ).toBe('missing_header');
  });

  it("answers Slack's url_verification handshake with its challenge, and nothing else", () => {
    const handshake = AUTH_SCHEMES.slack.handshake;
    expect(handshake?.({ token: 't', challenge: 'c-123', type: 'url_verification' })).toEqual({
      challenge: 'c-123',
    });
    expect(handshake?.({ type: 'event_callback', event_id: 'Ev1', challenge: 'c' })).toBeUndefined();
    expect(handshake?.({ type: 'url_verification', challenge: 42 })).toBeUndefined();
    expect(handshake?.(['url_verification'])).toBeUndefined();
    expect(AUTH_SCHEMES.github.handshake).toBeUndefined();
  });

  it('names $.event_id and $.event.type as its defaults', () => {
    expect(AUTH_SCHEMES.slack.defaults).toEqual({
      idempotencyKey: [{ path: '$.event_id' }],
      eventType: { path: '$.event.type' },
    });
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
