/**
 * The same interoperability through the `inbox-http` Lambda function: requests signed by `stripe` and `svix`
 * arrive as API Gateway (payload format 2.0) events, base64-encoded or not, with header names in any letter case,
 * and are verified on the bytes API Gateway hands over, on a real PostgreSQL.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import Stripe from 'stripe';
import { Webhook as SvixWebhook } from 'svix';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler as createInboxHttp } from '../../functions/inbox-http.ts';
import { createHandler as createMigrate } from '../../functions/migrate.ts';
import {
  aLambdaContext,
  anApiGatewayEvent,
  anInvokeRecorder,
  type TestShell,
  testShell,
  writeConfigFile,
} from '../functions/support.ts';
import { cleanup } from '../local/support.ts';

const needs = await requireServices('provider tests', ['postgres']);

const STRIPE_SECRET = `whsec_${randomBytes(16).toString('hex')}`;
const SVIX_SECRET = `whsec_${randomBytes(24).toString('base64')}`;

describe.skipIf(needs.skipReason)('inbox-http (Lambda) with provider-signed requests', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'providers_lambda', 1);
  const shells: TestShell[] = [];
  let inboxHttp: ReturnType<typeof createInboxHttp>;

  beforeAll(async () => {
    const configFile = await writeConfigFile(`database:
  url: ${JSON.stringify(needs.url.postgres)}
  schema: ${schema.name}
  poolSize: 2
sources:
  stripe:
    type: http
    auth: { scheme: stripe, secrets: [${JSON.stringify(STRIPE_SECRET)}] }
    topic: "stripe.{{ eventType }}"
  svix:
    type: http
    auth: { scheme: svix, secrets: [${JSON.stringify(SVIX_SECRET)}] }
    topic: "svix.{{ eventType }}"
destinations: {}
routes: []
`);
    const shell = () => {
      const options = testShell(configFile, { invoker: anInvokeRecorder() });
      shells.push(options);
      return options;
    };
    await createMigrate(shell())(undefined, aLambdaContext());
    inboxHttp = createInboxHttp(shell());
  });

  afterAll(async () => {
    for (const shell of shells) for (const cache of shell.caches) await cache.close();
    await cleanup();
  });

  const keysOf = async (source: string) =>
    (
      await pool.query<{ idempotency_key: string }>(
        `SELECT idempotency_key FROM "${schema.name}".inbox WHERE source = $1 ORDER BY id`,
        [source],
      )
    ).rows.map((r) => r.idempotency_key);

  async function send(path: string, headers: Record<string, string>, body: string, base64: boolean) {
    const answer = await inboxHttp(anApiGatewayEvent({ path, headers, body, base64 }), aLambdaContext());
    return { status: answer.statusCode, body: JSON.parse(String(answer.body)) as unknown };
  }

  it.each([true, false])(
    'stripe-node signed event (base64 body: %s): 202, duplicate, 401; key = event id',
    async (base64) => {
      const stripe = new Stripe('sk_test_interop');
      const id = `evt_${randomUUID().replaceAll('-', '')}`;
      const body = JSON.stringify({
        id,
        object: 'event',
        type: 'customer.created',
        data: { object: { id: 'cus_1', name: 'Zoë Ångström 😀' } },
      });
      const headers = {
        'Content-Type': 'application/json; charset=utf-8',
        'Stripe-Signature': stripe.webhooks.generateTestHeaderString({
          payload: body,
          secret: STRIPE_SECRET,
        }),
      };
      expect(await send('/inbox/stripe', headers, body, base64)).toEqual({
        status: 202,
        body: { status: 'accepted', id: expect.any(String) },
      });
      expect(await send('/inbox/stripe', headers, body, base64)).toEqual({
        status: 200,
        body: { status: 'duplicate' },
      });
      expect((await send('/inbox/stripe', headers, body.replace('cus_1', 'cus_2'), base64)).status).toBe(401);
      expect(await keysOf('stripe')).toContain(id);
    },
  );

  it.each([true, false])(
    'svix signed message (base64 body: %s): 202, duplicate, 401; key = svix-id',
    async (base64) => {
      const wh = new SvixWebhook(SVIX_SECRET);
      const id = `msg_${randomBytes(12).toString('hex')}`;
      const timestamp = new Date();
      const body = JSON.stringify({ type: 'email.sent', data: { to: 'zoë@example.com', n: 1 } });
      const headers = {
        'Content-Type': 'application/json',
        'Svix-Id': id,
        'SVIX-TIMESTAMP': String(Math.floor(timestamp.getTime() / 1000)),
        'svix-Signature': wh.sign(id, timestamp, body),
      };
      expect(() => wh.verify(body, headers)).not.toThrow();
      expect((await send('/inbox/svix', headers, body, base64)).status).toBe(202);
      expect(await send('/inbox/svix', headers, body, base64)).toEqual({
        status: 200,
        body: { status: 'duplicate' },
      });
      expect((await send('/inbox/svix', headers, body.replace('"n":1', '"n":2'), base64)).status).toBe(401);
      expect(await keysOf('svix')).toContain(id);
    },
  );

  it('stores a stripe-node signed event whose event carries a header no store keeps (U+0000) as base64:, not a 500', async () => {
    // Prepare: an API Gateway event hands its header text over as it is (Node's parser would refuse U+0000 at the
    // socket). Before, the insert of the headers failed: 500 on every one of Stripe's retries.
    const stripe = new Stripe('sk_test_interop');
    const id = `evt_${randomUUID().replaceAll('-', '')}`;
    const body = JSON.stringify({
      id,
      object: 'event',
      type: 'customer.updated',
      data: { object: { id: 'c' } },
    });
    const headers = {
      'Content-Type': 'application/json',
      'Stripe-Signature': stripe.webhooks.generateTestHeaderString({ payload: body, secret: STRIPE_SECRET }),
      'X-Trace': 'span\u0000id',
    };
    // Act
    const first = await send('/inbox/stripe', headers, body, false);
    const again = await send('/inbox/stripe', headers, body, false);
    // Assess
    expect(first).toEqual({ status: 202, body: { status: 'accepted', id: expect.any(String) } });
    expect(again).toEqual({ status: 200, body: { status: 'duplicate' } });
    const { rows } = await pool.query<{ trace: string }>(
      `SELECT headers->>'x-trace' AS trace FROM "${schema.name}".inbox WHERE source = 'stripe' AND idempotency_key = $1`,
      [id],
    );
    expect(rows).toEqual([{ trace: `base64:${Buffer.from('span\u0000id').toString('base64')}` }]);
  });
});
