/**
 * The AWS SDK clients of the functions have connection and request timeouts (AWS_CLIENT_DEFAULTS): a Lambda API
 * that accepts the connection and never answers costs inbox-http a logged wake-up, not its webhook answer. The real
 * `@aws-sdk/client-lambda` is pointed at a local server that reads requests and never responds.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  AWS_CLIENT_DEFAULTS,
  AWS_CLIENT_WORST_CASE_MS,
  createSecretsManagerResolver,
} from '@queuebox/config';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { createLambdaInvoker, createSchedulerClient } from '@queuebox/wake-ups';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler as createInboxHttp } from '../../functions/inbox-http.ts';
import { Logger } from '../../functions/lambda-shell/lambda.ts';
import { createHandler as createMigrate } from '../../functions/migrate.ts';
import { cleanup, signStandardWebhook, TEST_SECRET } from '../local/support.ts';
import {
  aLambdaContext,
  anApiGatewayEvent,
  functionConfigYaml,
  type TestShell,
  testShell,
  writeConfigFile,
} from './support.ts';

const needs = await requireServices('function tests: aws-timeouts', ['postgres']);

/** An HTTP server that takes requests and never answers them. */
async function aHungServer(): Promise<{ url: string; requests: () => number; close: () => Promise<void> }> {
  let requests = 0;
  const server: Server = createServer(() => {
    requests += 1;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests: () => requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const AWS = { region: 'eu-west-1', credentials: { accessKeyId: 'AKIDTEST', secretAccessKey: 'secret' } };

describe('AWS SDK clients with timeouts', () => {
  const shells: TestShell[] = [];
  let hung: Awaited<ReturnType<typeof aHungServer>>;

  beforeAll(async () => {
    hung = await aHungServer();
  });

  afterAll(async () => {
    for (const shell of shells) for (const cache of shell.caches) await cache.close();
    await hung.close();
    await cleanup();
  });

  it('gives up on a Lambda API that never answers after two attempts of at most 1 s + 3 s', async () => {
    // Prepare
    const invoker = createLambdaInvoker({ ...AWS, endpoint: hung.url });
    const before = hung.requests();
    const started = Date.now();

    // Act
    const outcome = await invoker.invokeAsync('queuebox-test-RelayTick', { trigger: 'wakeup' }).then(
      () => 'answered',
      (error: Error) => error.name,
    );

    // Assess
    const elapsed = Date.now() - started;
    expect(outcome).not.toBe('answered');
    expect(hung.requests() - before).toBe(AWS_CLIENT_DEFAULTS.maxAttempts);
    expect(elapsed).toBeGreaterThanOrEqual(AWS_CLIENT_DEFAULTS.requestHandler.requestTimeout);
    expect(elapsed).toBeLessThan(AWS_CLIENT_WORST_CASE_MS + 2000);
  }, 30_000);

  it('gives up on a Secrets Manager that never answers within the same bound (configuration loading)', async () => {
    // Prepare
    const resolver = createSecretsManagerResolver({ clientConfig: { ...AWS, endpoint: hung.url } });
    const before = hung.requests();
    const started = Date.now();

    // Act
    const outcome = await resolver.getSecret('queuebox/prod/database').then(
      () => 'answered',
      (error: Error) => error.name,
    );

    // Assess
    expect(outcome).not.toBe('answered');
    expect(hung.requests() - before).toBe(AWS_CLIENT_DEFAULTS.maxAttempts);
    expect(Date.now() - started).toBeLessThan(AWS_CLIENT_WORST_CASE_MS + 2000);
  }, 30_000);

  it('gives up on an EventBridge Scheduler that never answers within the same bound (deferred ticks)', async () => {
    // Prepare
    const scheduler = createSchedulerClient({ ...AWS, endpoint: hung.url });
    const started = Date.now();

    // Act
    const outcome = await scheduler
      .createSchedule({
        Name: 'queuebox-test-outbox-tick-1',
        GroupName: 'queuebox-test-ticks',
        ScheduleExpression: 'at(2026-12-01T17:00:00)',
        ScheduleExpressionTimezone: 'UTC',
        FlexibleTimeWindow: { Mode: 'OFF' },
        ActionAfterCompletion: 'DELETE',
        Target: {
          Arn: 'arn:aws:lambda:eu-west-1:123456789012:function:t',
          RoleArn: 'arn:aws:iam::1:role/r',
          Input: '{}',
        },
      })
      .then(
        () => 'answered',
        (error: Error) => error.name,
      );

    // Assess
    expect(outcome).not.toBe('answered');
    expect(Date.now() - started).toBeLessThan(AWS_CLIENT_WORST_CASE_MS + 2000);
  }, 30_000);

  describe.skipIf(needs.skipReason)('inbox-http', () => {
    const { schema } = usePostgresSchema(needs.url.postgres, 'functions_timeouts', 1);
    const warnings: string[] = [];

    it('answers 202 and logs the wake-up that timed out', async () => {
      // Prepare
      const configFile = await writeConfigFile(
        functionConfigYaml({
          databaseUrl: needs.url.postgres,
          schema: schema.name,
          receiverUrl: 'http://127.0.0.1:9/',
        }),
      );
      const logger = new Logger({ serviceName: 'queuebox-test', logLevel: 'WARN' });
      logger.warn = ((message: string) => {
        warnings.push(message);
      }) as typeof logger.warn;
      const shell = testShell(configFile, {
        logger,
        invoker: createLambdaInvoker({ ...AWS, endpoint: hung.url }),
        env: { RELAY_TICK_FUNCTION_NAME: 'queuebox-test-RelayTick' },
      });
      shells.push(shell);
      const migrateShell = testShell(configFile);
      shells.push(migrateShell);
      await createMigrate(migrateShell)(undefined, aLambdaContext());
      const inboxHttp = createInboxHttp(shell);
      const body = JSON.stringify({ type: 'order.created', data: { id: 'o-1' } });
      const signed = signStandardWebhook('msg-timeout', body, TEST_SECRET);
      const started = Date.now();

      // Act
      const answer = await inboxHttp(anApiGatewayEvent({ headers: signed, body }), aLambdaContext());

      // Assess
      expect(answer.statusCode).toBe(202);
      expect(Date.now() - started).toBeLessThan(AWS_CLIENT_WORST_CASE_MS + 2000);
      expect(warnings).toContain('wake-up failed');
    }, 30_000);
  });
});
