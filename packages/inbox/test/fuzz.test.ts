import { createHmac } from 'node:crypto';
import { JsonPathSyntaxError, parseJsonPath, readJsonPath } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { AUTH_SCHEMES } from '../src/index.ts';

// A small seeded generator, so a failure reproduces exactly.
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ALPHABET = '$.[]\'"\\0123456789abcXYZ-_ *?@()\u00e9';

function aString(next: () => number, max: number, alphabet = ALPHABET): string {
  const length = Math.floor(next() * max);
  let text = '';
  for (let i = 0; i < length; i += 1) text += alphabet[Math.floor(next() * alphabet.length)];
  return text;
}

describe('fuzz: JSON paths', () => {
  it('either parses (and reads without throwing) or throws JsonPathSyntaxError, for 5,000 random inputs', () => {
    const next = random(20261130);
    const document = JSON.parse('{"a":{"b":[1,{"c":"x"}]},"x-y":2,"__proto__":{"p":1}}');
    let parsed = 0;
    for (let i = 0; i < 5000; i += 1) {
      const text = (next() < 0.8 ? '$' : '') + aString(next, 16);
      try {
        const path = parseJsonPath(text);
        parsed += 1;
        readJsonPath(document, path);
      } catch (error) {
        expect(error, text).toBeInstanceOf(JsonPathSyntaxError);
      }
    }
    // The generator must reach both outcomes, or the test proves nothing.
    expect(parsed).toBeGreaterThan(100);
    expect(parsed).toBeLessThan(5000);
  });
});

describe('fuzz: authentication headers', () => {
  it('every scheme answers a failure (never throws, never passes) for random header values', () => {
    const next = random(7);
    const body = new TextEncoder().encode('{"id":"evt_1"}');
    const names = [
      'stripe-signature',
      'x-hub-signature-256',
      'webhook-id',
      'webhook-timestamp',
      'webhook-signature',
      'x-shopify-hmac-sha256',
      'x-slack-signature',
      'x-slack-request-timestamp',
      'authorization',
      'x-sig',
    ];
    const alphabet = 'tv01=,; abcdefABCDEF0123456789+/_-sha256whsec_Bearer Basic';
    for (let i = 0; i < 2000; i += 1) {
      const headers: Record<string, string> = {};
      for (const name of names) if (next() < 0.7) headers[name] = aString(next, 40, alphabet);
      for (const [scheme, impl] of Object.entries(AUTH_SCHEMES)) {
        const options = {
          scheme: scheme as never,
          secrets: ['whsec_c2VjcmV0', 'user:pass'],
          header: 'x-sig',
        };
        const result = impl.verify(body, headers, options, Date.now());
        expect(result.ok, `${scheme} ${JSON.stringify(headers)}`).toBe(false);
      }
    }
  });

  it('a valid signature still passes with random extra Stripe elements around it', () => {
    const next = random(11);
    const t = 1_750_000_000;
    const v1 = createHmac('sha256', 'whsec_x').update(`${t}.{}`).digest('hex');
    for (let i = 0; i < 200; i += 1) {
      const noise = aString(next, 20, 'abv0123=').replace(/,/g, '');
      const header = `${noise.startsWith('t=') ? 'x' : ''}${noise},t=${t},v1=${v1}`;
      const result = AUTH_SCHEMES.stripe.verify(
        new TextEncoder().encode('{}'),
        { 'stripe-signature': header },
        { scheme: 'stripe', secrets: ['whsec_x'] },
        t * 1000,
      );
      expect(result, header).toEqual({ ok: true });
    }
  });
});
