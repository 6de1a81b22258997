/**
 * inbox-http logs why a source's scheme refused a request (a clock-skewed timestamp is not a wrong secret), and
 * answers the same plain 401 either way; neither the answer nor the log line holds a secret or a signature.
 */
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { createHandler as createInboxHttp } from '../../functions/inbox-http.ts';
import { signStandardWebhook, TEST_SECRET } from '../local/support.ts';
import { aLambdaContext, anApiGatewayEvent, useMigratedFunctions } from './support.ts';

const needs = await requireServices('function tests: inbox-http refusal log', ['postgres']);

describe.skipIf(needs.skipReason)('inbox-http 401 log lines', () => {
  const { schema } = usePostgresSchema(needs.url.postgres, 'functions_inbox_refusal_log', 1);
  const functions = useMigratedFunctions({ databaseUrl: needs.url.postgres, schema });

  it('names the reason in the log line, never in the answer', async () => {
    // Prepare: a shell whose info lines the test reads.
    const options = functions.shell(functions.configFile());
    const lines: [string, Record<string, unknown>][] = [];
    const logger = options.logger;
    if (!logger) throw new Error('testShell gives a logger');
    logger.info = ((message: string, fields: Record<string, unknown>) => {
      lines.push([message, fields]);
    }) as typeof logger.info;
    const inboxHttp = createInboxHttp(options);
    const body = JSON.stringify({ type: 'order.created', data: { id: 'x' } });
    const skewed = signStandardWebhook('skewed', body, TEST_SECRET, Math.floor(Date.now() / 1000) - 3600);
    const forged = signStandardWebhook('forged', body, `whsec_${Buffer.from('another').toString('base64')}`);

    // Act
    const answers = [
      await inboxHttp(anApiGatewayEvent({ headers: skewed, body }), aLambdaContext()),
      await inboxHttp(anApiGatewayEvent({ headers: forged, body }), aLambdaContext()),
    ];

    // Assess: the same answer twice, two reasons in the log.
    expect(answers.map((a) => a.statusCode)).toEqual([401, 401]);
    expect(answers[0]?.body).toBe(answers[1]?.body);
    expect(JSON.parse(String(answers[0]?.body))).toEqual({
      error: 'unauthorized',
      message: 'The request is not authenticated',
    });
    const refused = lines.filter(([, fields]) => fields.status === 401);
    expect(refused).toEqual([
      [
        'inbox request',
        expect.objectContaining({
          source: 'demo',
          outcome: 'unauthorized',
          reason: 'timestamp_out_of_tolerance',
          detail: 'The signature timestamp is more than 300 s from now',
        }),
      ],
      [
        'inbox request',
        expect.objectContaining({
          source: 'demo',
          outcome: 'unauthorized',
          reason: 'signature_mismatch',
          detail: 'No v1 signature matches the body',
        }),
      ],
    ]);
    const logged = JSON.stringify(refused);
    for (const value of [TEST_SECRET, skewed['webhook-signature'], forged['webhook-signature']]) {
      expect(logged).not.toContain(String(value).replace(/^v1,/, ''));
    }
  });
});
