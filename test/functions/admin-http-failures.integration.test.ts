/**
 * admin-http answers its failures (503 while the database is unavailable, 500 when the configuration does not load)
 * instead of throwing, so Lambda's `Errors` never counts them: each 5xx answer counts one `AdminFailures` with
 * `{ service }` (the metric of the admin-failures alarm), and no other answer sends anything.
 */
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { createHandler as createAdminHttp } from '../../functions/admin-http.ts';
import { TEST_SECRET } from '../local/support.ts';
import {
  aLambdaContext,
  anApiGatewayEvent,
  captureEmf,
  functionConfigYaml,
  RecordingMetrics,
  type testShell,
  useMigratedFunctions,
  writeConfigFile,
} from './support.ts';

const needs = await requireServices('function tests: admin-http failures', ['postgres']);

describe.skipIf(needs.skipReason)('admin-http 5xx answers', () => {
  const { schema } = usePostgresSchema(needs.url.postgres, 'functions_admin_failures', 1);
  const functions = useMigratedFunctions({ databaseUrl: needs.url.postgres, schema });

  const observed = (file: string, extra: Parameters<typeof testShell>[1] = {}) => {
    const metrics = new RecordingMetrics();
    const options = functions.shell(file, { metrics, ...extra });
    return { options, metrics };
  };
  /** A store whose every statement fails as an unavailable database: nothing listens on port 9. */
  const downStore = async () => {
    const { openPostgresStore } = await import('@queuebox/store-postgres');
    return openPostgresStore({ url: 'postgres://nobody@127.0.0.1:9/none', schema: schema.name });
  };
  const get = (path: string) => anApiGatewayEvent({ method: 'GET', path });
  const failures = { metrics: { AdminFailures: 1 }, dimensions: { service: 'queuebox-test' } };

  it('counts AdminFailures for each 503 while the database is down: the database check and a route', async () => {
    const { options, metrics } = observed(functions.configFile(), { openStore: downStore });
    const adminHttp = createAdminHttp(options);

    const health = await adminHttp(get('/admin/health'), aLambdaContext());
    const stats = await adminHttp(get('/admin/stats'), aLambdaContext());

    expect([health.statusCode, stats.statusCode]).toEqual([503, 503]);
    expect(metrics.published).toEqual([failures, failures]);
  });

  it('counts AdminFailures for a 500 when the configuration does not load', async () => {
    const unset = await writeConfigFile(
      functionConfigYaml({
        databaseUrl: needs.url.postgres,
        schema: schema.name,
        receiverUrl: 'http://127.0.0.1:1/unused',
      }).replace(
        `secrets: [${TEST_SECRET}] }\n    eventTypePath`,
        'secrets: [env://UNSET_ADMIN_SECRET] }\n    eventTypePath',
      ),
    );
    const { options, metrics } = observed(unset);
    const adminHttp = createAdminHttp(options);

    const answer = await adminHttp(get('/admin/stats'), aLambdaContext());

    expect(answer.statusCode).toBe(500);
    expect(metrics.published).toEqual([failures]);
  });

  it('sends nothing for answers below 500 (200, 404, 405) and for the liveness check during an outage', async () => {
    const healthy = observed(functions.configFile());
    const down = observed(functions.configFile(), { openStore: downStore });
    const adminHttp = createAdminHttp(healthy.options);
    const downHttp = createAdminHttp(down.options);

    const answers = [
      await adminHttp(get('/admin/health'), aLambdaContext()),
      await adminHttp(get('/admin/stats'), aLambdaContext()),
      await adminHttp(get('/admin/nothing-here'), aLambdaContext()),
      await adminHttp(anApiGatewayEvent({ method: 'POST', path: '/health' }), aLambdaContext()),
      await downHttp(get('/health'), aLambdaContext()),
    ];

    expect(answers.map((a) => a.statusCode)).toEqual([200, 200, 404, 405, 200]);
    expect(healthy.metrics.published).toEqual([]);
    expect(down.metrics.published).toEqual([]);
  });

  it('prints the count as one EMF line with Powertools as deployed', async () => {
    // Powertools' own Metrics (not the recording one): the document CloudWatch would read.
    const options = functions.shell(functions.configFile(), { openStore: downStore });
    const adminHttp = createAdminHttp(options);

    const { result, emf } = await captureEmf(() => adminHttp(get('/admin/health'), aLambdaContext()));

    expect(result.statusCode).toBe(503);
    expect(emf).toEqual([
      expect.objectContaining({
        _aws: expect.objectContaining({
          CloudWatchMetrics: [
            {
              Namespace: 'QueueBox',
              Dimensions: [['service']],
              Metrics: [{ Name: 'AdminFailures', Unit: 'Count' }],
            },
          ],
        }),
        service: 'queuebox-test',
        AdminFailures: 1,
      }),
    ]);
  });
});
