/**
 * inbox-http answers its failures (500, 503) instead of throwing, so Lambda's `Errors` never counts them: each 5xx
 * answer counts one `IngestFailures` (the metric of the ingest-failures alarm), also when the configuration does
 * not load, and the log line carries the cause's message.
 */
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import type { ServiceCacheOptions, ServicesOptions } from '@queuebox/use-cases';
import { describe, expect, it } from 'vitest';
import { createHandler as createInboxHttp } from '../../functions/inbox-http.ts';
import { signStandardWebhook, TEST_SECRET } from '../local/support.ts';
import {
  aLambdaContext,
  anApiGatewayEvent,
  functionConfigYaml,
  RecordingMetrics,
  type testShell,
  useMigratedFunctions,
  writeConfigFile,
} from './support.ts';

const needs = await requireServices('function tests: inbox-http failures', ['postgres']);

describe.skipIf(needs.skipReason)('inbox-http 5xx answers', () => {
  const { schema } = usePostgresSchema(needs.url.postgres, 'functions_inbox_failures', 1);
  const functions = useMigratedFunctions({ databaseUrl: needs.url.postgres, schema });

  /** A test shell whose metrics and error log lines the test reads. */
  const observed = (file: string, extra: Parameters<typeof testShell>[1] = {}) => {
    const metrics = new RecordingMetrics();
    const errors: [string, Record<string, unknown>][] = [];
    const options = functions.shell(file, { metrics, ...extra });
    const logger = options.logger;
    if (logger) {
      logger.error = ((message: string, fields: Record<string, unknown>) => {
        errors.push([message, fields]);
      }) as typeof logger.error;
    }
    return { options, metrics, errors };
  };

  const webhook = (id: string) => {
    const body = JSON.stringify({ type: 'order.created', data: { id } });
    return anApiGatewayEvent({ headers: signStandardWebhook(id, body, TEST_SECRET), body });
  };

  it('counts IngestFailures for a 500 when the configuration does not load (an unset env:// secret)', async () => {
    const unset = await writeConfigFile(
      functionConfigYaml({
        databaseUrl: needs.url.postgres,
        schema: schema.name,
        receiverUrl: 'http://127.0.0.1:1/unused',
      }).replace(
        `secrets: [${TEST_SECRET}] }\n    eventTypePath`,
        `secrets: [env://UNSET_WEBHOOK_SECRET] }\n    eventTypePath`,
      ),
    );
    expect(unset).not.toBe(functions.configFile());
    const { options, metrics, errors } = observed(unset);
    const inboxHttp = createInboxHttp(options);

    const first = await inboxHttp(webhook('cfg-1'), aLambdaContext());
    const second = await inboxHttp(webhook('cfg-2'), aLambdaContext());

    expect([first.statusCode, second.statusCode]).toEqual([500, 500]);
    expect(metrics.published).toEqual([
      { metrics: { IngestFailures: 1 }, dimensions: { service: 'queuebox-test' } },
      { metrics: { IngestFailures: 1 }, dimensions: { service: 'queuebox-test' } },
    ]);
    // The second is counted, not logged: one line of a kind a minute in a container (createLogThrottle).
    expect(errors).toEqual([
      [
        'QueueBox could not start',
        expect.objectContaining({
          status: 500,
          error: expect.objectContaining({ message: expect.stringContaining('UNSET_WEBHOOK_SECRET') }),
        }),
      ],
    ]);
  });

  it('counts IngestFailures for a 503 while the database is down, and logs the cause with its message', async () => {
    const { options, metrics, errors } = observed(functions.configFile(), {
      openStore: async () => {
        const { openPostgresStore } = await import('@queuebox/store-postgres');
        // Nothing listens on port 9: every statement fails as an unavailable database.
        return openPostgresStore({ url: 'postgres://nobody@127.0.0.1:9/none', schema: schema.name });
      },
    });
    const inboxHttp = createInboxHttp(options);

    const answer = await inboxHttp(webhook('down-1'), aLambdaContext());

    expect(answer.statusCode).toBe(503);
    expect(answer.headers?.['retry-after']).toBe('5');
    expect(JSON.parse(String(answer.body))).toMatchObject({ error: 'store_unavailable' });
    expect(metrics.published).toEqual([
      { metrics: { IngestFailures: 1 }, dimensions: { service: 'queuebox-test' } },
    ]);
    expect(errors).toEqual([
      [
        'inbox request failed',
        expect.objectContaining({
          status: 503,
          outcome: 'store_unavailable',
          error: expect.objectContaining({
            name: 'StoreUnavailableError',
            message: expect.stringMatching(/^The database is unavailable: .*ECONNREFUSED/),
          }),
        }),
      ],
    ]);
    // The connection string (and any password in it) is not in the line.
    expect(JSON.stringify(errors)).not.toContain('nobody@');
  });

  it('answers 503 timeout and keeps the store when the invocation runs out before any store call (a slow transform)', async () => {
    // Prepare: a source whose transform function never answers (its own limit, 1000 ms, is past the invocation's).
    const file = await writeConfigFile(
      functionConfigYaml({
        databaseUrl: needs.url.postgres,
        schema: schema.name,
        receiverUrl: 'http://127.0.0.1:1/unused',
      }).replace(
        'sources:\n',
        'sources:\n  slow:\n    type: http\n    auth: { scheme: none }\n    topic: slow\n    transform: { function: hanging }\n',
      ),
    );
    const { options, metrics, errors } = observed(file);
    const tracked = options.createCache;
    if (tracked === undefined) throw new Error('the test shell has no createCache');
    Object.assign(options, {
      createCache: (cacheOptions: ServiceCacheOptions) =>
        tracked({
          ...cacheOptions,
          services: {
            ...(cacheOptions.services as ServicesOptions),
            inboxTransforms: { hanging: () => new Promise<never>(() => {}) },
          },
        }),
    });
    const inboxHttp = createInboxHttp(options);
    const slow = anApiGatewayEvent({
      path: '/inbox/slow',
      headers: { 'content-type': 'application/json', 'idempotency-key': 'slow-1' },
      body: '{}',
    });
    expect((await inboxHttp(webhook('warm'), aLambdaContext())).statusCode).toBe(202);

    // Act: 1.5 s left, so the answer is due after 0.5 s, before the transform's limit.
    const answer = await inboxHttp(slow, aLambdaContext({ remainingMs: 1500 }));

    // Assess
    expect(answer.statusCode).toBe(503);
    expect(answer.headers?.['retry-after']).toBe('5');
    expect(JSON.parse(String(answer.body))).toEqual({
      error: 'timeout',
      message: expect.stringMatching(
        /^The request ran out of time in this invocation \(\d+ ms, 1000 ms before/,
      ),
    });
    expect(options.cache.broken).toBe(false);
    expect(metrics.published.at(-1)).toEqual({
      metrics: { IngestFailures: 1 },
      dimensions: { service: 'queuebox-test' },
    });
    expect(errors).toEqual([
      [
        'inbox request failed',
        expect.objectContaining({
          status: 503,
          error: expect.objectContaining({ name: 'InvocationTimeoutError' }),
        }),
      ],
    ]);
  });

  it('counts nothing for answers below 500: a refused signature is Rejected, not a failure', async () => {
    const { options, metrics } = observed(functions.configFile());
    const inboxHttp = createInboxHttp(options);
    const body = JSON.stringify({ type: 'order.created', data: { id: 'x' } });
    const forged = anApiGatewayEvent({
      headers: signStandardWebhook('forged', body, `whsec_${Buffer.from('another').toString('base64')}`),
      body,
    });

    const answer = await inboxHttp(forged, aLambdaContext());

    expect(answer.statusCode).toBe(401);
    expect(metrics.published).toEqual([
      { metrics: { Rejected: 1 }, dimensions: { service: 'queuebox-test' } },
    ]);
  });
});
