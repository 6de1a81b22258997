/**
 * `kafkaSecurity`: the `ssl` and `sasl` of a destination or source as kafkajs takes them. MSK IAM (`aws`) cannot be
 * reached from here, so its mapping is checked without a network: kafkajs `oauthbearer` with a token provider that
 * calls the signer with the configured region (a fake signer), and the real `aws-msk-iam-sasl-signer-js` signing a
 * token with credentials from the environment (it signs locally; nothing is sent).
 */
import { ConfigError } from '@queuebox/core';
import type { OauthbearerProviderResponse } from 'kafkajs';
import { afterEach, describe, expect, it } from 'vitest';
import { kafkaPublisherFactory, kafkaSecurity, type MskIamSigner, mskIamRegion } from '../src/index.ts';

const MSK_BROKER = 'b-1.orders.abc123.c2.kafka.eu-central-1.amazonaws.com:9098';

/** A signer that records its calls and answers numbered tokens expiring `lifetimeMs` after `now()`. */
function aFakeSigner(now: () => number, lifetimeMs = 900_000) {
  const calls: { region: string }[] = [];
  const signer: MskIamSigner = async (options) => {
    calls.push({ ...options });
    return { token: `token-${calls.length}`, expiryTime: now() + lifetimeMs };
  };
  return { signer, calls };
}

/** The token provider of kafkajs's oauthbearer options, or a failure. */
function tokenProvider(sasl: unknown): () => Promise<OauthbearerProviderResponse> {
  const s = sasl as { mechanism?: string; oauthBearerProvider?: () => Promise<OauthbearerProviderResponse> };
  expect(s.mechanism).toBe('oauthbearer');
  if (s.oauthBearerProvider === undefined) throw new Error('no oauthBearerProvider');
  return s.oauthBearerProvider;
}

describe('kafkaSecurity', () => {
  it('passes TLS settings and a user and password as kafkajs takes them', () => {
    // Act
    const none = kafkaSecurity({ brokers: ['k:9092'] });
    const system = kafkaSecurity({ brokers: ['k:9092'], ssl: true });
    const off = kafkaSecurity({ brokers: ['k:9092'], ssl: false });
    const scram = kafkaSecurity({
      brokers: ['k:9096'],
      ssl: { ca: 'CA-PEM', cert: 'CERT-PEM', key: 'KEY-PEM', rejectUnauthorized: false },
      sasl: { mechanism: 'scram-sha-512', username: 'u', password: 'p' },
    });

    // Assess
    expect(none).toEqual({});
    expect(system).toEqual({ ssl: true });
    expect(off).toEqual({});
    expect(scram).toEqual({
      ssl: { ca: 'CA-PEM', cert: 'CERT-PEM', key: 'KEY-PEM', rejectUnauthorized: false },
      sasl: { mechanism: 'scram-sha-512', username: 'u', password: 'p' },
    });
  });

  it('makes aws kafkajs oauthbearer, whose token provider calls the signer with the configured region', async () => {
    // Prepare
    const fake = aFakeSigner(Date.now);
    const security = kafkaSecurity(
      { brokers: [MSK_BROKER], ssl: true, sasl: { mechanism: 'aws', region: 'eu-west-1' } },
      { signer: fake.signer },
    );

    // Act
    const token = await tokenProvider(security.sasl)();

    // Assess
    expect(security.ssl).toBe(true);
    expect(token).toEqual({ value: 'token-1' });
    expect(fake.calls).toEqual([{ region: 'eu-west-1' }]);
  });

  it('signs for the region of the MSK broker names, else AWS_REGION, and refuses to guess', async () => {
    // Prepare
    const fake = aFakeSigner(Date.now);
    const fromBrokers = kafkaSecurity(
      { brokers: [MSK_BROKER], ssl: true, sasl: { mechanism: 'aws' } },
      { signer: fake.signer, env: { AWS_REGION: 'us-east-1' } },
    );
    const fromEnv = kafkaSecurity(
      { brokers: ['kafka.internal:9098'], ssl: true, sasl: { mechanism: 'aws' } },
      { signer: fake.signer, env: { AWS_REGION: 'ap-south-1' } },
    );

    // Act
    await tokenProvider(fromBrokers.sasl)();
    await tokenProvider(fromEnv.sasl)();
    const missing = () =>
      kafkaSecurity({ brokers: ['kafka.internal:9098'], ssl: true, sasl: { mechanism: 'aws' } }, { env: {} });

    // Assess
    expect(fake.calls).toEqual([{ region: 'eu-central-1' }, { region: 'ap-south-1' }]);
    expect(missing).toThrow(ConfigError);
    expect(missing).toThrow(/sasl\.region/);
    expect(
      mskIamRegion(['boot-abc.c1.kafka-serverless.us-west-2.amazonaws.com:9098'], {}, { AWS_REGION: 'x' }),
    ).toBe('us-west-2');
  });

  it('reuses a token until a minute before it expires, and signs anew after a failure', async () => {
    // Prepare
    let now = 1_000_000;
    const fake = aFakeSigner(() => now);
    let fail = false;
    const signer: MskIamSigner = async (options) => {
      if (fail) throw new Error('no credentials');
      return fake.signer(options);
    };
    const provide = tokenProvider(
      kafkaSecurity(
        { brokers: [MSK_BROKER], ssl: true, sasl: { mechanism: 'aws' } },
        { signer, now: () => now },
      ).sasl,
    );

    // Act
    const first = await provide();
    now += 800_000;
    const reused = await provide();
    now += 50_000;
    const renewed = await provide();
    now += 900_000;
    fail = true;
    const failed = await provide().catch((error: Error) => error.message);
    fail = false;
    const afterFailure = await provide();

    // Assess
    expect([first, reused, renewed, afterFailure]).toEqual([
      { value: 'token-1' },
      { value: 'token-1' },
      { value: 'token-2' },
      { value: 'token-3' },
    ]);
    expect(failed).toBe('no credentials');
  });

  it('signs once for a burst of callers, and once again when a burst finds the token about to expire', async () => {
    // Prepare: one connection per broker asks at once (an outside security review: each signed its own token)
    let now = 1_000_000;
    const fake = aFakeSigner(() => now);
    let signings = 0;
    const signer: MskIamSigner = async (options) => {
      signings++;
      await new Promise((resolve) => setTimeout(resolve, 5));
      return fake.signer(options);
    };
    const provide = tokenProvider(
      kafkaSecurity(
        { brokers: [MSK_BROKER], ssl: true, sasl: { mechanism: 'aws' } },
        { signer, now: () => now },
      ).sasl,
    );
    // Act
    const first = await Promise.all(Array.from({ length: 5 }, () => provide()));
    const signedFirst = signings;
    now += 850_000;
    const renewed = await Promise.all(Array.from({ length: 5 }, () => provide()));
    // Assess
    expect([signedFirst, signings]).toEqual([1, 2]);
    expect(new Set(first.map((t) => t.value))).toEqual(new Set(['token-1']));
    expect(new Set(renewed.map((t) => t.value))).toEqual(new Set(['token-2']));
  });

  describe('with the real aws-msk-iam-sasl-signer-js', () => {
    const saved = { ...process.env };
    afterEach(() => {
      for (const key of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_PROFILE']) {
        if (saved[key] === undefined) delete process.env[key];
        else process.env[key] = saved[key];
      }
    });

    it('signs a kafka-cluster:Connect URL for the region with the credentials of the environment', async () => {
      // Prepare: credentials from the environment, the first of the default chain (no network is asked)
      process.env.AWS_ACCESS_KEY_ID = 'AKIAQUEUEBOXTEST0001';
      process.env.AWS_SECRET_ACCESS_KEY = 'queuebox-test-secret-access-key';
      delete process.env.AWS_SESSION_TOKEN;
      delete process.env.AWS_PROFILE;
      const security = kafkaSecurity({
        brokers: [MSK_BROKER],
        ssl: true,
        sasl: { mechanism: 'aws', region: 'eu-west-1' },
      });

      // Act
      const { value } = await tokenProvider(security.sasl)();
      const signed = new URL(Buffer.from(value, 'base64url').toString('utf8'));

      // Assess
      expect(signed.host).toBe('kafka.eu-west-1.amazonaws.com');
      expect(signed.searchParams.get('Action')).toBe('kafka-cluster:Connect');
      expect(signed.searchParams.get('X-Amz-Credential')).toMatch(
        /^AKIAQUEUEBOXTEST0001\/\d{8}\/eu-west-1\/kafka-cluster\/aws4_request$/,
      );
      expect(value).not.toContain('queuebox-test-secret-access-key');
    });
  });
});

describe('kafkaPublisherFactory with ssl and sasl', () => {
  it('refuses a malformed sasl, and aws without a region to sign for, at the destination path', () => {
    // Act
    const malformed = () =>
      kafkaPublisherFactory('orders', {
        type: 'kafka',
        brokers: ['k:9096'],
        sasl: { mechanism: 'gssapi' },
      } as { type: string });
    const noRegion = () => {
      const saved = process.env.AWS_REGION;
      const savedDefault = process.env.AWS_DEFAULT_REGION;
      delete process.env.AWS_REGION;
      delete process.env.AWS_DEFAULT_REGION;
      try {
        return kafkaPublisherFactory('orders', {
          type: 'kafka',
          brokers: ['kafka.internal:9098'],
          ssl: true,
          sasl: { mechanism: 'aws' },
        } as { type: string });
      } finally {
        if (saved !== undefined) process.env.AWS_REGION = saved;
        if (savedDefault !== undefined) process.env.AWS_DEFAULT_REGION = savedDefault;
      }
    };

    // Assess
    expect(malformed).toThrow(ConfigError);
    expect(malformed).toThrow(/destinations\.orders\.sasl/);
    expect(noRegion).toThrow(/destinations\.orders\.sasl\.region/);
  });
});
