/**
 * Outbound interoperability: deliveries of the HTTP publisher with Standard Webhooks signing, received by a real
 * HTTP server on 127.0.0.1 in this process and verified there with the providers' own libraries: `standardwebhooks`
 * (the reference implementation) and `svix` (`Webhook.verify`), with several secrets (rotation).
 */
import { randomBytes } from 'node:crypto';
import type { OutgoingMessage } from '@queuebox/core';
import { createHttpPublisher } from '@queuebox/outbox';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type HttpReceiver, startHttpReceiver } from '../../packages/outbox/test/support/http-receiver.ts';

const whsec = () => `whsec_${randomBytes(24).toString('base64')}`;
const OLD = whsec();
const NEW = whsec();
const RETIRED = whsec();

const aMessage = (over: Partial<OutgoingMessage> = {}): OutgoingMessage => ({
  id: '4711',
  topic: 'orders.created',
  key: 'order-1',
  // Text beyond ASCII: the signature covers the UTF-8 bytes that are sent.
  payload: {
    type: 'order.created',
    orderId: 1,
    total: 9.5,
    note: 'café ✓ 𝄞',
    nested: { list: [1, null, true] },
  },
  headers: {},
  attempt: 0,
  ...over,
});

describe('outbound Standard Webhooks signatures, verified by standardwebhooks and svix', () => {
  let receiver: HttpReceiver;

  beforeEach(async () => {
    receiver = await startHttpReceiver();
  });
  afterEach(async () => {
    await receiver.close();
  });

  async function deliver(secrets: readonly string[], message = aMessage()) {
    const publisher = createHttpPublisher({
      type: 'http',
      url: receiver.url,
      signing: { scheme: 'standard-webhooks', secrets: [...secrets] },
    });
    try {
      expect(await publisher.publish(message)).toEqual({ kind: 'sent' });
    } finally {
      await publisher.close();
    }
    const request = receiver.requests.at(-1);
    if (!request) throw new Error('nothing was received');
    return request;
  }

  it('one secret: both libraries verify the delivery and return the payload; webhook-id is the outbox id', async () => {
    const { headers, body } = await deliver([NEW]);
    expect(headers['webhook-id']).toBe('4711');
    expect(new StandardWebhook(NEW).verify(body, headers)).toEqual(aMessage().payload);
    expect(() => new SvixWebhook(NEW).verify(body, headers)).not.toThrow();
  });

  it('several secrets (rotation): a receiver holding either one verifies; one holding neither refuses', async () => {
    const { headers, body } = await deliver([OLD, NEW]);
    expect(headers['webhook-signature']?.split(' ')).toHaveLength(2);
    for (const secret of [OLD, NEW]) {
      expect(new StandardWebhook(secret).verify(body, headers)).toEqual(aMessage().payload);
      expect(() => new SvixWebhook(secret).verify(body, headers)).not.toThrow();
    }
    expect(() => new StandardWebhook(RETIRED).verify(body, headers)).toThrow();
    expect(() => new SvixWebhook(RETIRED).verify(body, headers)).toThrow();
  });

  it('a body changed in transit fails verification in both libraries', async () => {
    const { headers, body } = await deliver([NEW]);
    const changed = body.replace('"orderId":1', '"orderId":2');
    expect(changed).not.toBe(body);
    expect(() => new StandardWebhook(NEW).verify(changed, headers)).toThrow();
    expect(() => new SvixWebhook(NEW).verify(changed, headers)).toThrow();
  });

  it('a row relayed from a Svix source (svix-id, svix-timestamp stored) still verifies with svix', async () => {
    // The relay copies the stored inbox headers onto the outbox row; a Svix delivery's svix-id and svix-timestamp
    // are stored (only svix-signature is not). svix's Webhook.verify reads svix-* before webhook-*, so those two
    // would pair the inbound id and time with our signature.
    const relayed = aMessage({
      headers: {
        'svix-id': 'msg_inbound_2KWPBgLlAfxdpx2AI54pPJ85f4W',
        'svix-timestamp': String(Math.floor(Date.now() / 1000) - 60),
        'x-inbox-id': '12',
        'x-source': 'svix',
      },
    });
    const { headers, body } = await deliver([NEW], relayed);
    expect(() => new SvixWebhook(NEW).verify(body, headers)).not.toThrow();
    expect(new StandardWebhook(NEW).verify(body, headers)).toEqual(aMessage().payload);
    expect(headers['x-inbox-id']).toBe('12');
  });
});
