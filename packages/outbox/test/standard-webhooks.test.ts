import { createHmac, timingSafeEqual } from 'node:crypto';
import { ConfigError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { createStandardWebhooksSigner, decodeSecret } from '../src/standard-webhooks.ts';

// The spec's example (standard-webhooks.com, "Signature scheme"): written down independently of the signer.
const SPEC_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const SPEC_ID = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
const SPEC_TIMESTAMP = 1614265330;
const SPEC_BODY = '{"test": 2432232314}';
const SPEC_SIGNATURE = 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=';

/** A receiver's check per the spec: any one of the space-separated v1 signatures must equal ours. */
function receiverAccepts(secret: string, headers: Record<string, string>, body: string): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key)
    .update(`${headers['webhook-id']}.${headers['webhook-timestamp']}.${body}`)
    .digest();
  return (headers['webhook-signature'] ?? '').split(' ').some((entry) => {
    const [version, value] = entry.split(',');
    if (version !== 'v1' || value === undefined) return false;
    const given = Buffer.from(value, 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

describe('createStandardWebhooksSigner', () => {
  it("reproduces the specification's example signature", () => {
    // Prepare
    const signer = createStandardWebhooksSigner([SPEC_SECRET]);
    // Act
    const headers = signer.sign(SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY);
    // Assess
    expect(headers).toEqual({
      'webhook-id': SPEC_ID,
      'webhook-timestamp': String(SPEC_TIMESTAMP),
      'webhook-signature': SPEC_SIGNATURE,
    });
  });

  it('signs with every secret, space-separated, so either key verifies during rotation', () => {
    // Prepare
    const oldSecret = `whsec_${Buffer.from('old key bytes, 24 or more').toString('base64')}`;
    const newSecret = `whsec_${Buffer.from('new key bytes, 24 or more').toString('base64')}`;
    const signer = createStandardWebhooksSigner([newSecret, oldSecret]);
    // Act
    const headers = signer.sign('42', 1_700_000_000.9, '{"a":1}');
    // Assess
    expect(headers['webhook-timestamp']).toBe('1700000000');
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(receiverAccepts(oldSecret, { ...headers }, '{"a":1}')).toBe(true);
    expect(receiverAccepts(newSecret, { ...headers }, '{"a":1}')).toBe(true);
    expect(receiverAccepts(newSecret, { ...headers }, '{"a":2}')).toBe(false);
  });

  it('accepts a secret without the whsec_ prefix', () => {
    const bare = SPEC_SECRET.slice('whsec_'.length);
    expect(
      createStandardWebhooksSigner([bare]).sign(SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY)['webhook-signature'],
    ).toBe(SPEC_SIGNATURE);
  });

  it('refuses no secrets, an empty or short secret and one that is not base64, naming the path', () => {
    expect(() => createStandardWebhooksSigner([])).toThrow(ConfigError);
    expect(() => decodeSecret('whsec_')).toThrow(ConfigError);
    // whsec_A decodes to no key at all; anything under the specification's 24 bytes is refused.
    for (const weak of [
      'whsec_A',
      `whsec_${Buffer.from('23 bytes of key material').subarray(0, 23).toString('base64')}`,
    ]) {
      expect(() => createStandardWebhooksSigner([weak]), weak).toThrow(/at least 24 bytes|base64/);
    }
    let error: unknown;
    try {
      createStandardWebhooksSigner(
        ['whsec_b2xkIGtleSBieXRlcywgMjQgb3IgbW9yZQ==', 'not base64!'],
        'destinations.billing.signing.secrets',
      );
    } catch (e) {
      error = e;
    }
    expect((error as ConfigError).issues[0]?.path).toBe('destinations.billing.signing.secrets[1]');
  });
});
