import { describe, expect, it } from 'vitest';
import { envVarFor, overlayEnv, parseConfig } from '../src/index.ts';
import { anAmqpSource, anHttpSource } from './fixtures.ts';

function overlay(base: unknown, env: Record<string, string>) {
  const origins = new Map<string, string>();
  const result = overlayEnv(base, env, origins);
  return { ...result, origins };
}

describe('overlayEnv', () => {
  it('matches path segments to schema keys without regard to case and reads typed scalars', () => {
    // Act
    const { value, issues, origins } = overlay(
      {},
      {
        QUEUEBOX_OUTBOX__MAXATTEMPTS: '5',
        queuebox_inbox__relay__enabled: 'false',
        QUEUEBOX_DATABASE__URL: 'postgres://u:p@db:5432/app',
        QUEUEBOX_OUTBOX__BACKOFF__MAX_MS: '1000',
      },
    );

    // Assess
    expect(issues).toEqual([]);
    expect(value).toEqual({
      outbox: { maxAttempts: 5, backoff: { maxMs: 1000 } },
      inbox: { relay: { enabled: false } },
      database: { url: 'postgres://u:p@db:5432/app' },
    });
    expect(origins.get('outbox.maxAttempts')).toBe('QUEUEBOX_OUTBOX__MAXATTEMPTS');
    expect(origins.get('inbox.relay.enabled')).toBe('queuebox_inbox__relay__enabled');
  });

  it('takes a database URL as written, never as YAML (a password with " #" is not cut), and an RDS secret JSON too', () => {
    // Act
    const url = overlay({}, { QUEUEBOX_DATABASE__URL: 'postgres://app:pa #ss@db.internal:5432/q' });
    const json = '{"host":"db.internal","username":"app","password":"pa #ss","dbname":"q"}';
    const secret = overlay({}, { QUEUEBOX_DATABASE__URL: json });

    // Assess
    expect(url.value).toEqual({ database: { url: 'postgres://app:pa #ss@db.internal:5432/q' } });
    expect(parseConfig(secret.value).database.url).toBe(
      'postgres://app:pa%20%23ss@db.internal/q?sslmode=verify-full',
    );
  });

  it('wins over the file and leaves the file untouched', () => {
    // Prepare
    const base = { outbox: { maxAttempts: 3, batchSize: 50 } };
    const origins = new Map([
      ['outbox.maxAttempts', 'queuebox.yaml:2'],
      ['outbox.batchSize', 'queuebox.yaml:3'],
    ]);

    // Act
    const { value } = overlayEnv(base, { QUEUEBOX_OUTBOX__MAXATTEMPTS: '7' }, origins);

    // Assess
    expect(value).toEqual({ outbox: { maxAttempts: 7, batchSize: 50 } });
    expect(base.outbox.maxAttempts).toBe(3);
    expect(origins.get('outbox.maxAttempts')).toBe('QUEUEBOX_OUTBOX__MAXATTEMPTS');
    expect(origins.get('outbox.batchSize')).toBe('queuebox.yaml:3');
  });

  it('matches an existing source name without regard to case, with "_" for "-"', () => {
    // Prepare
    const base = { sources: { Stripe: anHttpSource(), 'orders-in': anAmqpSource() } };

    // Act
    const { value } = overlay(base, {
      QUEUEBOX_SOURCES__STRIPE__AUTH__SECRETS: '[whsec_a, whsec_b]',
      QUEUEBOX_SOURCES__ORDERS_IN__PREFETCH: '50',
      QUEUEBOX_SOURCES__ORDERS_IN__EVENTTYPEFROMHEADER: 'true',
    });

    // Assess
    const sources = (value as { sources: Record<string, Record<string, unknown>> }).sources;
    expect(sources.Stripe?.auth).toEqual({ scheme: 'stripe', secrets: ['whsec_a', 'whsec_b'] });
    expect(sources['orders-in']).toMatchObject({ prefetch: 50, eventTypeFromHeader: true });
    expect(Object.keys(sources)).toEqual(['Stripe', 'orders-in']);
  });

  it('creates a new, lower-cased entry from variables alone', () => {
    // Act
    const { value } = overlay(
      {},
      {
        QUEUEBOX_SOURCES__AUDIT__TYPE: 'nats',
        QUEUEBOX_SOURCES__AUDIT__SERVERS: 'nats://127.0.0.1:4222',
        QUEUEBOX_SOURCES__AUDIT__STREAM: 'AUDIT',
        QUEUEBOX_SOURCES__AUDIT__EVENTTYPEFROMHEADER: 'Nats-Type',
      },
    );
    const config = parseConfig(value);

    // Assess
    expect(config.sources.audit).toMatchObject({
      type: 'nats',
      servers: ['nats://127.0.0.1:4222'],
      stream: 'AUDIT',
      eventTypeFromHeader: 'Nats-Type',
      durable: 'queuebox-audit',
    });
  });

  it('keeps text keys as text, so tokens that look like numbers survive', () => {
    // Act
    const { value } = overlay({}, { QUEUEBOX_ADMIN__TOKEN: '000123', QUEUEBOX_HTTP__PORT: '9090' });

    // Assess
    expect(value).toEqual({ admin: { token: '000123' }, http: { port: 9090 } });
  });

  it('reads numeric lists and list indexes', () => {
    // Prepare
    const base = {
      destinations: { d: { type: 'http', url: 'https://x' } },
      routes: [{ match: 'a.#', destination: 'd' }],
    };

    // Act
    const { value, issues } = overlay(base, {
      QUEUEBOX_DESTINATIONS__D__RETRYABLESTATUSES: '[409, 423]',
      QUEUEBOX_ROUTES__0__MATCH: 'b.#',
      QUEUEBOX_ROUTES__1__MATCH: 'c.*',
      QUEUEBOX_ROUTES__1__DESTINATION: 'd',
    });

    // Assess
    expect(issues).toEqual([]);
    expect(value).toMatchObject({
      destinations: { d: { retryableStatuses: [409, 423] } },
      routes: [
        { match: 'b.#', destination: 'd' },
        { match: 'c.*', destination: 'd' },
      ],
    });
  });

  it('takes a flow mapping for a whole section, spells its keys as the schema does and merges it into the file', () => {
    // Act
    const { value } = overlay(
      { outbox: { batchSize: 10 } },
      { QUEUEBOX_OUTBOX: '{MAXATTEMPTS: 4, pollintervalms: 5}' },
    );

    // Assess: the file's batchSize stays (a mapping no longer replaces the section).
    expect(value).toEqual({ outbox: { batchSize: 10, maxAttempts: 4, pollIntervalMs: 5 } });
  });

  it('ignores QUEUEBOX_CONFIG and variables without the prefix', () => {
    // Act
    const { value, issues } = overlay({}, { QUEUEBOX_CONFIG: 'x.yaml', HOME: '/root', QUEUEBOXOUTBOX: '1' });

    // Assess
    expect(value).toEqual({});
    expect(issues).toEqual([]);
  });

  it('reports malformed variables with their name as origin', () => {
    // Act
    const { issues } = overlay(
      { routes: [] },
      {
        QUEUEBOX_OUTBOX____MAXATTEMPTS: '1',
        QUEUEBOX_HTTP__PORT__X: '1',
        QUEUEBOX_ROUTES__FIRST__MATCH: '#',
      },
    );

    // Assess
    expect(issues).toEqual([
      {
        path: 'http.port',
        message: expect.stringContaining('not a section'),
        origin: 'QUEUEBOX_HTTP__PORT__X',
      },
      expect.objectContaining({
        message: expect.stringContaining('empty path segment'),
        origin: 'QUEUEBOX_OUTBOX____MAXATTEMPTS',
      }),
      {
        path: 'routes',
        message: expect.stringContaining('is a list'),
        origin: 'QUEUEBOX_ROUTES__FIRST__MATCH',
      },
    ]);
  });

  it('names the variable for a path', () => {
    expect(envVarFor(['outbox', 'maxAttempts'])).toBe('QUEUEBOX_OUTBOX__MAXATTEMPTS');
    expect(envVarFor(['sources', 'orders-in', 'queue'])).toBe('QUEUEBOX_SOURCES__ORDERS_IN__QUEUE');
  });
});
