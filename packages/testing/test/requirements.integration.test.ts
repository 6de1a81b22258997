/**
 * requireServices answers the finders' URLs and where each came from, with no skip reason when everything is there.
 * The environment variables are trusted as given (no probe), so this file sets them and touches no service.
 */
import { describe, expect, it, vi } from 'vitest';

describe('requireServices', () => {
  it('answers each service from its QUEUEBOX_TEST_* variable, and no skip reason', async () => {
    // Prepare: the finders cache their answer per process, so the variables are set before the module loads.
    vi.stubEnv('QUEUEBOX_TEST_AMQP_URL', 'amqp://guest:guest@broker.invalid:5672');
    vi.stubEnv('QUEUEBOX_TEST_KAFKA_BROKERS', 'a.invalid:9092,b.invalid:9092');
    const { requireServices } = await import('../src/requirements.ts');
    const info = vi.spyOn(console, 'info').mockImplementation(() => undefined);

    try {
      // Act
      const needs = await requireServices('requirements test', ['rabbitmq', 'kafka']);

      // Assess
      expect(needs).toEqual({
        skipReason: undefined,
        available: true,
        url: { rabbitmq: 'amqp://guest:guest@broker.invalid:5672', kafka: 'a.invalid:9092,b.invalid:9092' },
        via: { rabbitmq: 'QUEUEBOX_TEST_AMQP_URL', kafka: 'QUEUEBOX_TEST_KAFKA_BROKERS' },
      });
      expect(info.mock.calls.flat().join('\n')).not.toContain('skipped');
    } finally {
      info.mockRestore();
      vi.unstubAllEnvs();
    }
  });

  it('takes testPostgresUrl from QUEUEBOX_TEST_POSTGRES_URL, else the local server', async () => {
    const { LOCAL_POSTGRES_URL, testPostgresUrl } = await import('../src/postgres-url.ts');

    vi.stubEnv('QUEUEBOX_TEST_POSTGRES_URL', 'postgres://app@db.invalid:5432/qb');
    expect(testPostgresUrl()).toBe('postgres://app@db.invalid:5432/qb');
    vi.stubEnv('QUEUEBOX_TEST_POSTGRES_URL', '');
    expect(testPostgresUrl()).toBe(LOCAL_POSTGRES_URL);
    expect(LOCAL_POSTGRES_URL).toBe('postgres://postgres@127.0.0.1:5432/test');
    vi.unstubAllEnvs();
  });
});
