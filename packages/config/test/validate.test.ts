import { ConfigError, type ConfigIssue } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { type ConfigOrigins, parseConfig, validateConfig } from '../src/index.ts';
import { aConfigInput, anAmqpSource, anHttpDestination, anHttpSource, aRoute } from './fixtures.ts';

function issuesOf(input: unknown, origins?: ConfigOrigins): ConfigIssue[] {
  const result = validateConfig(input, origins);
  return result.ok ? [] : result.issues;
}

function issueAt(path: string, text: string) {
  return expect.objectContaining({ path, message: expect.stringContaining(text) });
}

describe('the amqp event type refusal (specification)', () => {
  it('refuses an amqp topic with {{ eventType }} when the source sets neither way to read it', () => {
    // Act
    const issues = issuesOf({ sources: { orders: anAmqpSource({ topic: 'orders.{{ eventType }}' }) } });

    // Assess
    expect(issues).toEqual([
      issueAt('sources.orders.topic', 'neither eventTypePath nor eventTypeFromHeader'),
    ]);
  });

  it('refuses it when eventTypeFromHeader is false', () => {
    // Act
    const issues = issuesOf({
      sources: { orders: anAmqpSource({ topic: '{{eventType}}', eventTypeFromHeader: false }) },
    });

    // Assess
    expect(issues).toEqual([issueAt('sources.orders.topic', 'AMQP message carries no event type')]);
  });

  it.each([
    ['eventTypeFromHeader: true', { eventTypeFromHeader: true }],
    ['a header name', { eventTypeFromHeader: 'x-event-type' }],
    ['eventTypePath', { eventTypePath: '$.type' }],
  ])('accepts it with %s', (_label, extra) => {
    // Act
    const result = validateConfig({
      sources: { orders: anAmqpSource({ topic: 'o.{{ eventType }}', ...extra }) },
    });

    // Assess
    expect(result.ok).toBe(true);
  });

  it('also refuses an http source whose default topic could never get an event type', () => {
    // Act
    const issues = issuesOf({
      sources: {
        hook: anHttpSource({ eventTypePath: undefined, auth: { scheme: 'bearer', secrets: ['t'] } }),
      },
    });

    // Assess
    expect(issues).toEqual([issueAt('sources.hook.topic', 'uses {{ eventType }}')]);
  });

  it("accepts the default topic on a scheme whose provider names the event type (stripe's $.type, github's header)", () => {
    // Act
    const issues = issuesOf({
      sources: {
        stripe: anHttpSource({ eventTypePath: undefined, idempotencyKey: undefined }),
        gh: anHttpSource({ eventTypePath: undefined, auth: { scheme: 'github', secrets: ['k'] } }),
      },
    });

    // Assess
    expect(issues).toEqual([]);
  });

  it('refuses eventTypePath together with eventTypeFromHeader', () => {
    // Act
    const issues = issuesOf({
      sources: { orders: anAmqpSource({ eventTypePath: '$.t', eventTypeFromHeader: true }) },
    });

    // Assess
    expect(issues).toEqual([issueAt('sources.orders.eventTypeFromHeader', 'not both')]);
  });
});

describe('templates', () => {
  it('allow only {{ source }} and {{ eventType }} in source topics, with any spacing inside the braces', () => {
    // Act
    const ok = validateConfig({
      sources: { s: anHttpSource({ topic: 'x.{{source}}.{{   eventType   }}' }) },
    });
    const issues = issuesOf({ sources: { s: anHttpSource({ topic: 'x.{{ topic }}' }) } });

    // Assess
    expect(ok.ok).toBe(true);
    expect(issues).toEqual([issueAt('sources.s.topic', 'uses {{ topic }}, which is not available here')]);
  });

  it('allow only {{ topic }} and {{ key }} in destination templates', () => {
    // Act
    const ok = validateConfig({
      destinations: { k: { type: 'kafka', brokers: ['b:9092'], topic: 'out.{{ topic }}.{{key}}' } },
    });
    const issues = issuesOf({
      destinations: {
        k: { type: 'kafka', brokers: ['b:9092'], topic: '{{ source }}' },
        n: { type: 'nats', servers: ['nats://x:4222'], subject: '{{ topic ' },
      },
    });

    // Assess
    expect(ok.ok).toBe(true);
    expect(issues).toEqual([
      issueAt('destinations.k.topic', 'uses {{ source }}'),
      issueAt('destinations.n.subject', 'unmatched'),
    ]);
  });

  it('refuse an empty topic template', () => {
    // Act
    const issues = issuesOf({ sources: { s: anAmqpSource({ topic: '' }) } });

    // Assess
    expect(issues).toEqual([issueAt('sources.s.topic', 'is empty')]);
  });
});

describe('routes', () => {
  it('must name an existing destination, with a hint for a near miss', () => {
    // Act
    const issues = issuesOf(aConfigInput({ routes: [aRoute(), aRoute({ destination: 'biling' })] }));

    // Assess
    expect(issues).toEqual([issueAt('routes[1].destination', 'did you mean "billing"?')]);
  });

  it.each([
    ['orders.cre*', 'whole segments'],
    ['orders..created', 'empty segment'],
    ['.orders', 'empty segment'],
    ['', 'is empty'],
    ['a.#b', 'whole segments'],
  ])('refuse the pattern %j', (match, text) => {
    // Act
    const issues = issuesOf(aConfigInput({ routes: [aRoute({ match })] }));

    // Assess
    expect(issues).toEqual([issueAt('routes[0].match', text)]);
  });

  it('accept wildcards that are whole segments', () => {
    // Act
    const result = validateConfig(
      aConfigInput({ routes: [aRoute({ match: '*.orders.#' }), aRoute({ match: '#' })] }),
    );

    // Assess
    expect(result.ok).toBe(true);
  });
});

describe('http sources', () => {
  it('refuse two sources answering at the same path, explicit or by name', () => {
    // Act
    const issues = issuesOf({
      sources: {
        stripe: anHttpSource(),
        'stripe-2': anHttpSource({ path: 'stripe' }),
        github: anHttpSource({ path: 'gh' }),
        gh: anHttpSource(),
        amqp: anAmqpSource(),
      },
    });

    // Assess
    expect(issues).toEqual([
      issueAt('sources.stripe-2.path', 'answers at /inbox/stripe, which the source "stripe" already uses'),
      issueAt('sources.gh', 'answers at /inbox/gh, which the source "github" already uses'),
    ]);
  });

  it('refuse a mode other than push or pull', () => {
    // Act
    const issues = issuesOf({ sources: { s: anHttpSource({ mode: 'both' }) } });

    // Assess
    expect(issues).toEqual([issueAt('sources.s.mode', '"both" is not one of push, pull')]);
  });

  it('refuse a path with a slash, a missing auth, and keys of another scheme', () => {
    // Act
    const issues = issuesOf({
      sources: {
        a: anHttpSource({ path: 'hooks/stripe' }),
        b: anHttpSource({ auth: undefined }),
        c: anHttpSource({ auth: { scheme: 'github', secrets: ['k'], toleranceSec: 60 } }),
        d: anHttpSource({ auth: { scheme: 'hmac', secrets: ['k'] } }),
        e: anHttpSource({ auth: { scheme: 'stripe', secrets: [] } }),
      },
    });

    // Assess
    expect(issues).toEqual([
      issueAt('sources.a.path', 'one URL path segment'),
      issueAt('sources.b.auth', 'is required (a mapping)'),
      issueAt('sources.c.auth.toleranceSec', 'unknown key "toleranceSec"'),
      issueAt('sources.d.auth.header', 'is required'),
      issueAt('sources.e.auth.secrets', 'must list at least 1 item'),
    ]);
  });

  it('refuse a basic credential without user:password, without echoing it', () => {
    // Act
    const issues = issuesOf({
      sources: { s: anHttpSource({ auth: { scheme: 'basic', secrets: ['hunter2'] } }) },
    });

    // Assess
    expect(issues).toEqual([issueAt('sources.s.auth.secrets[0]', 'user:password')]);
    expect(JSON.stringify(issues)).not.toContain('hunter2');
  });
});

describe('claim leases and function timeouts (budget < timeout < lease)', () => {
  it('refuse an outbox lease that does not exceed the outbox-tick timeout', () => {
    // Act
    const issues = issuesOf({ outbox: { claimTimeoutMs: 60000 } });

    // Assess
    expect(issues).toEqual([
      issueAt('outbox.claimTimeoutMs', 'must exceed aws.functions.outboxTick.timeoutSeconds'),
    ]);
  });

  it('refuse a relay lease shorter than the relay-tick timeout', () => {
    // Act
    const issues = issuesOf({ inbox: { relay: { claimTimeoutMs: 30000 } } });

    // Assess
    expect(issues).toEqual([issueAt('inbox.relay.claimTimeoutMs', 'relay-tick')]);
  });

  it('blame the timeout when only the timeout was configured', () => {
    // Prepare
    const origins = new Map([['aws.functions.outboxTick.timeoutSeconds', 'queuebox.yaml:9']]);

    // Act
    const issues = issuesOf({ aws: { functions: { outboxTick: { timeoutSeconds: 400 } } } }, origins);

    // Assess
    expect(issues).toEqual([
      {
        path: 'aws.functions.outboxTick.timeoutSeconds',
        message: expect.stringContaining('must be shorter than outbox.claimTimeoutMs (300000 ms)'),
        origin: 'queuebox.yaml:9',
      },
    ]);
  });

  it('accept a lease longer than the timeout', () => {
    // Act
    const result = validateConfig({
      outbox: { claimTimeoutMs: 120000 },
      aws: { functions: { outboxTick: { timeoutSeconds: 119 } } },
    });

    // Assess
    expect(result.ok).toBe(true);
  });
});

describe('the event type refusal and pull sources', () => {
  it('does not refuse a pull source whose default topic uses {{ eventType }} (its rows are never relayed)', () => {
    // Act
    const pull = validateConfig({
      sources: { p: anHttpSource({ mode: 'pull', auth: { scheme: 'none' }, eventTypePath: undefined }) },
    });
    const push = issuesOf({
      sources: { p: anHttpSource({ mode: 'push', auth: { scheme: 'none' }, eventTypePath: undefined }) },
    });

    // Assess
    expect(pull.ok).toBe(true);
    expect(push).toEqual([issueAt('sources.p.topic', 'uses {{ eventType }}')]);
  });

  it('refuses an AMQP template with {{ eventType }} and no event type in either mode, as the specification says', () => {
    // Act
    const issues = issuesOf({
      sources: { orders: anAmqpSource({ mode: 'pull', topic: 'orders.{{ eventType }}' }) },
    });

    // Assess
    expect(issues).toEqual([issueAt('sources.orders.topic', 'an AMQP message carries no event type')]);
  });
});

describe('other refusals', () => {
  it('refuse NATS servers with credentials but no scheme (nats.js would take them for the host; never shown)', () => {
    // Act
    const ok = validateConfig({
      destinations: { n: { type: 'nats', servers: ['nats://qb:s3cret@h:4222'] } },
    });
    const issues = issuesOf({
      destinations: { n: { type: 'nats', servers: ['qb:s3cret@h:4222'] } },
    });

    // Assess
    expect(ok.ok).toBe(true);
    expect(issues).toEqual([issueAt('destinations.n.servers', 'needs its scheme')]);
    expect(JSON.stringify(issues)).not.toContain('s3cret');
  });

  it.each(['inbox', '/inbox/', '/', '/in box', '//x'])('refuse inbox.basePath %j', (basePath) => {
    // Act
    const issues = issuesOf({ inbox: { basePath } });

    // Assess
    expect(issues).toEqual([issueAt('inbox.basePath', 'must start with "/"')]);
  });

  it('accept a nested base path', () => {
    expect(validateConfig({ inbox: { basePath: '/hooks/in' } }).ok).toBe(true);
  });

  it.each([
    [{ provider: 'postgres' }, 'is required when database.provider is postgres'],
    [{ provider: 'postgres', url: 'mssql://db/x' }, 'which is for sqlserver'],
    [{ provider: 'pglite', url: 'postgres://db/x' }, 'pglite'],
    [{ url: 'mysql://db/x' }, 'cannot tell the provider'],
  ])('refuse the database %j', (database, text) => {
    // Act
    const issues = issuesOf({ database });

    // Assess
    expect(issues).toEqual([issueAt('database.url', text)]);
  });

  it('never quotes a database url in a message', () => {
    // Act
    const issues = issuesOf({ database: { provider: 'postgres', url: 'mssql://sa:S3cret@db/x' } });

    // Assess
    expect(JSON.stringify(issues)).not.toContain('S3cret');
  });

  it('refuse a schema name that is not an identifier', () => {
    expect(issuesOf({ database: { schema: 'queue-box' } })).toEqual([
      issueAt('database.schema', 'identifier'),
    ]);
  });

  it('refuse source names that are not URL-safe or that differ only in case', () => {
    // Act
    const issues = issuesOf({
      sources: { 'bad name': anAmqpSource(), orders: anAmqpSource(), Orders: anAmqpSource() },
    });

    // Assess
    expect(issues).toEqual([
      issueAt('sources.bad name', 'name "bad name" must start with a letter or digit'),
      issueAt('sources.Orders', 'differs from "orders" only in letter case'),
    ]);
  });

  it('refuse a destination backoff whose base exceeds the outbox maximum', () => {
    // Act
    const issues = issuesOf({
      outbox: { backoff: { maxMs: 5000 } },
      destinations: { d: anHttpDestination({ backoff: { baseMs: 10000 } }) },
    });

    // Assess
    expect(issues).toEqual([issueAt('destinations.d.backoff.baseMs', 'exceeds outbox.backoff.maxMs')]);
  });

  it("accept a backoff whose maxMs equals its baseMs, the outbox's and a destination's over the outbox base", () => {
    // Act
    const issues = issuesOf({
      outbox: { backoff: { baseMs: 5000, maxMs: 5000 } },
      destinations: { d: anHttpDestination({ backoff: { maxMs: 5000 } }) },
    });

    // Assess
    expect(issues).toEqual([]);
  });

  it('refuse a source that sets both aggregateIdPath and aggregateIdHeader', () => {
    // Act
    const issues = issuesOf({
      sources: { s: anHttpSource({ aggregateIdPath: '$.id', aggregateIdHeader: 'X-Aggregate-Id' }) },
    });

    // Assess
    expect(issues).toEqual([issueAt('sources.s.aggregateIdHeader', 'not both')]);
  });

  it('refuse retryable statuses outside 4xx and a wrong URL scheme', () => {
    // Act
    const issues = issuesOf({
      destinations: { d: anHttpDestination({ url: 'ftp://x', retryableStatuses: [429, 503] }) },
    });

    // Assess
    expect(issues).toEqual([
      issueAt('destinations.d.url', 'must be an HTTP URL'),
      issueAt('destinations.d.retryableStatuses[1]', 'must be at most 499'),
    ]);
  });
  it('refuse an eventTypeFromHeader that is neither a boolean nor a header name', () => {
    // Act
    const issues = issuesOf({ sources: { a: anAmqpSource({ eventTypeFromHeader: 5 }) } });

    // Assess
    expect(issues).toEqual([
      issueAt('sources.a.eventTypeFromHeader', 'must be true, false or a header name'),
    ]);
  });
});

describe('unknown keys', () => {
  it('fail anywhere, with the closest known key as a hint', () => {
    // Act
    const issues = issuesOf({
      outbox: { maxAttempt: 3 },
      inbox: { relay: { enable: false } },
      sources: { s: anHttpSource({ eventTypeHeader: 'x', auth: { scheme: 'stripe', secret: ['k'] } }) },
      destinations: { d: anHttpDestination({ timeout: 5 }) },
      databse: {},
      zzz: 1,
    });

    // Assess
    expect(issues).toEqual(
      expect.arrayContaining([
        issueAt('outbox.maxAttempt', 'did you mean "maxAttempts"?'),
        issueAt('inbox.relay.enable', 'did you mean "enabled"?'),
        issueAt('sources.s.eventTypeHeader', 'did you mean "eventTypeFromHeader"?'),
        issueAt('sources.s.auth.secret', 'did you mean "secrets"?'),
        issueAt('sources.s.auth.secrets', 'is required (a list)'),
        issueAt('destinations.d.timeout', 'did you mean "timeoutMs"?'),
        issueAt('databse', 'did you mean "database"?'),
        { path: 'zzz', message: 'unknown key "zzz"' },
      ]),
    );
    expect(issues).toHaveLength(8);
  });

  it('hint at a known type for a misspelt discriminator', () => {
    // Act
    const issues = issuesOf({ sources: { s: { type: 'kafak' } } });

    // Assess
    expect(issues).toEqual([
      issueAt('sources.s.type', '"kafak" is not one of http, amqp, kafka, nats, sqs (did you mean "kafka"?)'),
    ]);
  });
});

describe('several mistakes', () => {
  it('are all reported together, each with path, problem and origin', () => {
    // Prepare
    const input = {
      // Above the outbox drain's budget (45000 ms with the default http timeout), below the outbox-tick timeout.
      outbox: { maxAttempts: 0, claimTimeoutMs: 50000 },
      sources: { orders: anAmqpSource({ topic: '{{ eventType }}', prefetch: 'ten' }) },
      destinations: { billing: anHttpDestination({ method: 'GET' }) },
      routes: [aRoute({ destination: 'nowhere' })],
    };
    const origins = new Map([
      ['outbox', 'queuebox.yaml:1'],
      ['outbox.maxAttempts', 'QUEUEBOX_OUTBOX__MAXATTEMPTS'],
      ['outbox.claimTimeoutMs', 'queuebox.yaml:3'],
      ['sources.orders', 'queuebox.yaml:5'],
      ['sources.orders.topic', 'queuebox.yaml:9'],
      ['destinations.billing.method', 'queuebox.yaml:14'],
      ['routes[0]', 'queuebox.yaml:17'],
    ]);

    // Act
    const error = (() => {
      try {
        parseConfig(input, origins);
      } catch (e) {
        return e;
      }
      return undefined;
    })();

    // Assess
    expect(error).toBeInstanceOf(ConfigError);
    const issues = (error as ConfigError).issues;
    expect(issues).toEqual([
      { path: 'outbox.maxAttempts', message: 'must be at least 1', origin: 'QUEUEBOX_OUTBOX__MAXATTEMPTS' },
      {
        path: 'sources.orders.prefetch',
        message: 'must be a number, not text',
        origin: 'queuebox.yaml:5',
      },
      {
        path: 'destinations.billing.method',
        message: '"GET" is not one of POST, PUT, PATCH',
        origin: 'queuebox.yaml:14',
      },
      issueAt('routes[0].destination', '"nowhere", which does not exist'),
      {
        path: 'outbox.claimTimeoutMs',
        message: expect.stringContaining('must exceed aws.functions.outboxTick.timeoutSeconds'),
        origin: 'queuebox.yaml:3',
      },
    ]);
    expect(issues.find((i) => i.path === 'routes[0].destination')?.origin).toBe('queuebox.yaml:17');
    expect((error as ConfigError).message).toContain('5 problems');
  });

  it('report the amqp refusal beside a shape problem of the same source', () => {
    // Act
    const issues = issuesOf({
      sources: { orders: anAmqpSource({ topic: '{{ eventType }}', queue: '' }) },
    });

    // Assess
    expect(issues).toEqual(expect.arrayContaining([issueAt('sources.orders.queue', 'must not be empty')]));
  });
});

describe('weak secrets (issue 13)', () => {
  it('refuses Standard Webhooks secrets under 24 bytes on sources and on signing, and a short admin.token, echoing none', () => {
    // Act
    const issues = issuesOf({
      admin: { token: 'short-token' },
      sources: {
        sw: anHttpSource({ auth: { scheme: 'standard-webhooks', secrets: ['whsec_A'] } }),
        sx: anHttpSource({ auth: { scheme: 'svix', secrets: ['whsec_c2hvcnQ='] } }),
      },
      destinations: {
        d: anHttpDestination({ signing: { scheme: 'standard-webhooks', secrets: ['whsec_'] } }),
      },
    });

    // Assess
    expect(issues).toEqual([
      issueAt('admin.token', 'at least 16 characters'),
      issueAt('sources.sw.auth.secrets[0]', 'base64'),
      issueAt('sources.sx.auth.secrets[0]', 'at least 24 bytes'),
      issueAt('destinations.d.signing.secrets[0]', 'base64'),
    ]);
    expect(JSON.stringify(issues)).not.toContain('short-token');
    expect(JSON.stringify(issues)).not.toContain('c2hvcnQ');
  });
});

describe('admin.protectMetrics', () => {
  it('needs admin.token', () => {
    expect(issuesOf({ admin: { protectMetrics: true } })).toEqual([
      issueAt('admin.protectMetrics', 'needs admin.token'),
    ]);
    expect(issuesOf({ admin: { protectMetrics: true, token: 'a-token-of-16-chars' } })).toEqual([]);
  });
});
