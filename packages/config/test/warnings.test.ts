import { describe, expect, it } from 'vitest';
import { configWarnings, parseConfig, patternsOverlap } from '../src/index.ts';
import { anHttpDestination, anHttpSource } from './fixtures.ts';

const WHSEC = `whsec_${Buffer.from('a signing key of 24 bytes').toString('base64')}`;
/** A bearer token long enough to draw no warning of its own. */
const TOKEN = 'a-partner-token-of-32-characters';

describe('patternsOverlap', () => {
  it.each([
    ['#', 'stripe.#', true],
    ['stripe.#', '#', true],
    ['stripe.*', 'partner.#', false],
    ['*.refunded', 'stripe.#', true],
    ['charge.refunded', '#', true],
    ['stripe.charge.*', 'stripe.#', true],
    ['a.*.c', 'a.b', false],
    ['a.#.c', 'a.#', true],
  ])('%s and %s: %s', (a, b, expected) => {
    expect(patternsOverlap(a.split('.'), b.split('.'))).toBe(expected);
  });
});

describe('configWarnings (issue 13)', () => {
  it('warns when a route can match topics of several push sources: a bearer partner reaching the payments destination', () => {
    // Prepare: the seed's default HTTP topic {{ eventType }} on both sources.
    const config = parseConfig({
      sources: {
        stripe: anHttpSource({ eventTypePath: undefined }),
        partner: anHttpSource({ auth: { scheme: 'bearer', secrets: [TOKEN] } }),
        audit: anHttpSource({ mode: 'pull', auth: { scheme: 'standard-webhooks', secrets: [WHSEC] } }),
      },
      destinations: { payments: anHttpDestination() },
      routes: [{ match: 'charge.*', destination: 'payments' }],
    });

    // Act
    const warnings = configWarnings(config);

    // Assess
    expect(warnings).toEqual([
      {
        path: 'routes[0].match',
        message: expect.stringContaining('sources stripe, partner'),
      },
    ]);
    expect(warnings[0]?.message).toContain('{{ source }}.{{ eventType }}');
  });

  it('says nothing when each source has its own prefix, or when only one source can reach a route', () => {
    const config = parseConfig({
      sources: {
        stripe: anHttpSource({ topic: '{{ source }}.{{ eventType }}' }),
        partner: anHttpSource({
          auth: { scheme: 'bearer', secrets: [TOKEN] },
          topic: '{{ source }}.{{ eventType }}',
        }),
      },
      destinations: { payments: anHttpDestination(), partners: anHttpDestination() },
      routes: [
        { match: 'stripe.#', destination: 'payments' },
        { match: 'partner.*', destination: 'partners' },
      ],
    });

    expect(configWarnings(config)).toEqual([]);
  });
});

describe('configWarnings: keys a replay can change', () => {
  it.each(['github', 'shopify', 'hmac', 'bearer', 'basic', 'none'])(
    'warns when a %s source leaves its key to the scheme default, an unsigned header',
    (scheme) => {
      // Prepare
      const auth =
        scheme === 'hmac'
          ? { scheme, header: 'X-Sig', secrets: ['s'] }
          : scheme === 'basic'
            ? { scheme, secrets: [`user:${TOKEN}`] }
            : scheme === 'none'
              ? { scheme }
              : { scheme, secrets: [TOKEN] };
      const config = parseConfig({
        sources: { partner: anHttpSource({ auth, idempotencyKey: undefined, eventTypePath: '$.type' }) },
      });

      // Act
      const warnings = configWarnings(config);

      // Assess
      expect(warnings).toEqual([
        { path: 'sources.partner.idempotencyKey', message: expect.stringContaining('bodyHash: true') },
      ]);
    },
  );

  it('says nothing once the key is chosen, or when the scheme signs the key (stripe, slack, standard-webhooks)', () => {
    const config = parseConfig({
      sources: {
        gh: anHttpSource({ auth: { scheme: 'github', secrets: ['s'] }, idempotencyKey: { bodyHash: true } }),
        shop: anHttpSource({
          auth: { scheme: 'shopify', secrets: ['s'] },
          idempotencyKey: { header: 'X-Shopify-Webhook-Id' },
        }),
        stripe: anHttpSource({ idempotencyKey: undefined }),
        hooks: anHttpSource({
          auth: { scheme: 'standard-webhooks', secrets: [WHSEC] },
          idempotencyKey: undefined,
        }),
      },
    });

    expect(configWarnings(config)).toEqual([]);
  });
});

describe('configWarnings: a destination maxAttempts a row never reaches', () => {
  it('warns when destinations.X.maxAttempts is above outbox.maxAttempts, the max_attempts of the rows the relay writes', () => {
    // Prepare
    const config = parseConfig({
      outbox: { maxAttempts: 10 },
      destinations: {
        billing: anHttpDestination({ maxAttempts: 40 }),
        crm: anHttpDestination({ maxAttempts: 10 }),
        audit: anHttpDestination({ maxAttempts: 3 }),
        plain: anHttpDestination(),
      },
    });

    // Act
    const warnings = configWarnings(config);

    // Assess
    expect(warnings).toEqual([
      {
        path: 'destinations.billing.maxAttempts',
        message: expect.stringMatching(
          /^40 is above outbox\.maxAttempts 10: a destination can only lower a row's max_attempts, never raise it.*raise outbox\.maxAttempts \(or set inbox\.relay\.maxAttempts\) instead/,
        ),
      },
    ]);
  });

  it('compares with inbox.relay.maxAttempts when it is set: that is what the relay gives its rows', () => {
    // Prepare: the relay's rows get 50, so 40 lowers them; 60 is above them, whatever outbox.maxAttempts says.
    const config = parseConfig({
      outbox: { maxAttempts: 100 },
      inbox: { relay: { maxAttempts: 50 } },
      destinations: {
        billing: anHttpDestination({ maxAttempts: 40 }),
        crm: anHttpDestination({ maxAttempts: 60 }),
      },
    });

    // Act
    const warnings = configWarnings(config);

    // Assess
    expect(warnings).toEqual([
      {
        path: 'destinations.crm.maxAttempts',
        message: expect.stringMatching(
          /^60 is above inbox\.relay\.maxAttempts 50: .*raise inbox\.relay\.maxAttempts instead/,
        ),
      },
    ]);
    expect(
      configWarnings(
        parseConfig({
          inbox: { relay: { maxAttempts: 50 } },
          destinations: { billing: anHttpDestination({ maxAttempts: 40 }) },
        }),
      ),
    ).toEqual([]);
  });
});

describe('configWarnings: retryableStatuses, which no longer changes anything', () => {
  it('warns for an HTTP destination that lists statuses, and not for one that does not', () => {
    // Prepare
    const config = parseConfig({
      destinations: {
        legacy: anHttpDestination({ retryableStatuses: [409] }),
        plain: anHttpDestination(),
      },
    });

    // Act
    const warnings = configWarnings(config);

    // Assess
    expect(warnings).toEqual([
      {
        path: 'destinations.legacy.retryableStatuses',
        message: expect.stringMatching(/^has no effect any more: every answer but a 2xx is retried/),
      },
    ]);
  });
});
