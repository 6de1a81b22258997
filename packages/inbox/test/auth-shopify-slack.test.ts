import { describe, expect, it } from 'vitest';
import { AUTH_SCHEMES, verifyShopify, verifySlack } from '../src/index.ts';

import { body, failure, hmacB64, hmacHex, options } from './auth-fixtures.ts';

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
