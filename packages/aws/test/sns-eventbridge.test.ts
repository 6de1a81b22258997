/**
 * The SNS and EventBridge publishers with the real AWS SDK clients against the loopback endpoint
 * (support/aws-loopback.ts), which checks every wire request against the services' API references and answers the
 * per-entry results each test scripts. There is no local SNS or EventBridge server to test against here.
 */
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { SNSClient } from '@aws-sdk/client-sns';
import { parseConfig } from '@queuebox/config';
import { createPublishers, defaultPublisherFactories } from '@queuebox/outbox';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { awsPublisherFactories, createEventBridgePublisher, createSnsPublisher } from '../src/index.ts';
import { type AwsLoopback, startAwsLoopback } from './support/aws-loopback.ts';
import { aMessage, TEST_CREDENTIALS } from './support/sqs.ts';

let loopback: AwsLoopback;
let sns: SNSClient;
let events: EventBridgeClient;

beforeAll(async () => {
  loopback = await startAwsLoopback();
  const config = {
    region: 'eu-west-1',
    endpoint: loopback.endpoint,
    credentials: TEST_CREDENTIALS,
    maxAttempts: 1,
  };
  sns = new SNSClient(config);
  events = new EventBridgeClient(config);
});

afterEach(() => {
  loopback.requests.length = 0;
  loopback.decideEntry = () => 'ok';
  loopback.decideRequest = () => 'entries';
});

afterAll(async () => {
  sns.destroy();
  events.destroy();
  await loopback.close();
});

const TOPIC = 'arn:aws:sns:eu-west-1:123456789012:orders';
const FIFO_TOPIC = 'arn:aws:sns:eu-west-1:123456789012:orders.fifo';

describe('SNS publisher (PublishBatch, AWS query protocol)', () => {
  it('publishes the payload with the outbox id and mapped headers as String attributes', async () => {
    // Prepare
    const publisher = createSnsPublisher({ topicArn: TOPIC, client: sns });
    const message = aMessage({ headers: { 'x-trace': 't', 'amazon.sig': 'x', ünï: 'v', 'x-empty': '' } });
    try {
      // Act
      const outcome = await publisher.publish(message);
      // Assess
      expect(outcome).toEqual({ kind: 'sent' });
      expect(loopback.violations).toEqual([]);
      expect(loopback.requests).toHaveLength(1);
      const [request] = loopback.requests;
      expect(request).toMatchObject({ service: 'sns', action: 'PublishBatch', target: TOPIC });
      const [entry] = request?.entries ?? [];
      expect(JSON.parse(entry?.body ?? '')).toEqual(message.payload);
      expect(entry?.attributes).toEqual({
        'message-id': { dataType: 'String', value: message.id },
        'x-trace': { dataType: 'String', value: 't' },
        _n_: { dataType: 'String', value: 'v' },
      });
      expect(entry?.groupId).toBeUndefined();
      expect(entry?.deduplicationId).toBeUndefined();
    } finally {
      await publisher.close();
    }
  });

  it('gives a FIFO topic the key as message group and the outbox id as deduplication id', async () => {
    // Prepare
    const publisher = createSnsPublisher({ topicArn: FIFO_TOPIC, client: sns, messageGroupId: 'rest' });
    const keyed = aMessage({ key: 'k-1' });
    const unkeyed = aMessage({ key: null });
    try {
      // Act
      const outcomes = await Promise.all([publisher.publish(keyed), publisher.publish(unkeyed)]);
      // Assess
      expect(outcomes).toEqual([{ kind: 'sent' }, { kind: 'sent' }]);
      expect(loopback.violations).toEqual([]);
      expect(loopback.requests[0]?.entries.map((e) => [e.groupId, e.deduplicationId])).toEqual([
        ['k-1', keyed.id],
        ['rest', unkeyed.id],
      ]);
    } finally {
      await publisher.close();
    }
  });

  it('settles a partial batch entry by entry: sent, retry and dead in one request', async () => {
    // Prepare
    loopback.decideEntry = (entry) => {
      const { fate } = JSON.parse(entry.body) as { fate: string };
      if (fate === 'throttle') return { code: 'Throttled', message: 'slow down', senderFault: false };
      if (fate === 'invalid') return { code: 'InvalidParameter', message: 'bad message', senderFault: true };
      return 'ok';
    };
    const publisher = createSnsPublisher({ topicArn: TOPIC, client: sns, name: 'fanout' });
    try {
      // Act
      const outcomes = await Promise.all(
        ['ok', 'throttle', 'invalid', 'ok'].map((fate) => publisher.publish(aMessage({ payload: { fate } }))),
      );
      // Assess
      expect(loopback.requests.map((r) => r.entries.length)).toEqual([4]);
      expect(outcomes).toEqual([
        { kind: 'sent' },
        {
          kind: 'retry',
          error: 'SNS did not accept the message for destination "fanout": Throttled: slow down',
        },
        {
          kind: 'dead',
          error: 'SNS did not accept the message for destination "fanout": InvalidParameter: bad message',
        },
        { kind: 'sent' },
      ]);
    } finally {
      await publisher.close();
    }
  });

  it('retries every row when the whole request is throttled or the topic is missing', async () => {
    // Prepare
    const codes = [
      { status: 400, code: 'Throttling', message: 'Rate exceeded' },
      { status: 404, code: 'NotFound', message: 'Topic does not exist' },
      { status: 500, code: 'InternalError', message: 'oops' },
    ];
    const publisher = createSnsPublisher({ topicArn: TOPIC, client: sns });
    try {
      for (const failure of codes) {
        loopback.decideRequest = () => failure;
        // Act
        const outcome = await publisher.publish(aMessage());
        // Assess
        expect(outcome.kind).toBe('retry');
        expect(outcome.kind === 'retry' && outcome.error).toContain(failure.code);
      }
    } finally {
      await publisher.close();
    }
  });

  it.each(['InvalidParameter', 'ValidationException'])(
    're-sends a request the service refused for its content (%s) entry by entry, so only the culprit is answered dead',
    async (code) => {
      // Prepare: the service refuses any request holding the poisoned entry as a whole.
      loopback.decideRequest = (request) =>
        request.entries.some((e) => e.body.includes('poison'))
          ? { status: 400, code, message: 'Invalid parameter: Message' }
          : 'entries';
      const publisher = createSnsPublisher({ topicArn: TOPIC, client: sns });
      try {
        // Act
        const outcomes = await Promise.all(
          ['fine', 'poison', 'fine'].map((note) => publisher.publish(aMessage({ payload: { note } }))),
        );
        // Assess
        expect(outcomes.map((o) => o.kind)).toEqual(['sent', 'dead', 'sent']);
        expect(loopback.requests.map((r) => r.entries.length)).toEqual([3, 1, 1, 1]);
      } finally {
        await publisher.close();
      }
    },
  );

  it('answers dead for a row over 256 KiB without a request', async () => {
    // Prepare
    const publisher = createSnsPublisher({ topicArn: TOPIC, client: sns });
    try {
      // Act
      const outcome = await publisher.publish(aMessage({ payload: { blob: 'z'.repeat(262_144) } }));
      // Assess
      expect(outcome.kind).toBe('dead');
      expect(outcome.kind === 'dead' && outcome.error).toMatch(
        /^the message is \d+ bytes \(payload \d+ \+ attributes \d+\); SNS destination "sns" accepts at most 262144 bytes per message, so it can never be sent$/,
      );
      expect(loopback.requests).toHaveLength(0);
    } finally {
      await publisher.close();
    }
  });
});

describe('EventBridge publisher (PutEvents, AWS JSON 1.1)', () => {
  it('puts Source from config, DetailType from the template and the payload as Detail on the bus', async () => {
    // Prepare
    const publisher = createEventBridgePublisher({
      client: events,
      eventBus: 'orders-bus',
      source: 'com.example.orders',
      detailType: 'Order {{ topic }}',
    });
    const message = aMessage({ topic: 'orders.created', headers: { 'x-trace': 'dropped: no attributes' } });
    try {
      // Act
      const outcome = await publisher.publish(message);
      // Assess
      expect(outcome).toEqual({ kind: 'sent' });
      expect(loopback.violations).toEqual([]);
      const [entry] = loopback.requests[0]?.entries ?? [];
      expect(entry).toMatchObject({
        source: 'com.example.orders',
        detailType: 'Order orders.created',
        eventBus: 'orders-bus',
      });
      expect(JSON.parse(entry?.body ?? '')).toEqual(message.payload);
    } finally {
      await publisher.close();
    }
  });

  it('settles a partial batch by position: sent, retry (throttled) and dead (malformed detail)', async () => {
    // Prepare
    loopback.decideEntry = (entry) => {
      const { fate } = JSON.parse(entry.body) as { fate: string };
      if (fate === 'throttle')
        return { code: 'ThrottlingException', message: 'Rate exceeded', senderFault: false };
      if (fate === 'malformed')
        return { code: 'MalformedDetail', message: 'Detail is malformed', senderFault: true };
      return 'ok';
    };
    const publisher = createEventBridgePublisher({ client: events, source: 'com.example', name: 'bus' });
    try {
      // Act
      const outcomes = await Promise.all(
        ['malformed', 'ok', 'throttle'].map((fate) => publisher.publish(aMessage({ payload: { fate } }))),
      );
      // Assess
      expect(loopback.requests.map((r) => r.entries.length)).toEqual([3]);
      expect(outcomes).toEqual([
        {
          kind: 'dead',
          error:
            'EventBridge did not accept the message for destination "bus": MalformedDetail: Detail is malformed',
        },
        { kind: 'sent' },
        {
          kind: 'retry',
          error:
            'EventBridge did not accept the message for destination "bus": ThrottlingException: Rate exceeded',
        },
      ]);
    } finally {
      await publisher.close();
    }
  });

  it('retries every row when the whole request fails', async () => {
    // Prepare
    loopback.decideRequest = () => ({ status: 500, code: 'InternalException', message: 'try again' });
    const publisher = createEventBridgePublisher({ client: events, source: 'com.example' });
    try {
      // Act
      const outcome = await publisher.publish(aMessage());
      // Assess
      expect(outcome.kind).toBe('retry');
      expect(outcome.kind === 'retry' && outcome.error).toMatch(
        /^EventBridge refused the request for destination "eventbridge": InternalException/,
      );
    } finally {
      await publisher.close();
    }
  });

  it('answers dead without a request for rows EventBridge can never take: not an object, too large, empty or long DetailType', async () => {
    // Prepare
    const publisher = createEventBridgePublisher({
      client: events,
      source: 'com.example',
      detailType: '{{ key }}',
    });
    try {
      // Act
      const notObject = await publisher.publish(aMessage({ payload: [1, 2] }));
      const tooLarge = await publisher.publish(aMessage({ payload: { blob: 'q'.repeat(1_048_576) } }));
      const noType = await publisher.publish(aMessage({ key: null }));
      const longType = await publisher.publish(aMessage({ key: 't'.repeat(129) }));
      // Assess
      expect(notObject).toEqual({
        kind: 'dead',
        error:
          'the payload is an array; EventBridge destination "eventbridge" needs a JSON object as the event\'s Detail',
      });
      expect(tooLarge.kind === 'dead' && tooLarge.error).toMatch(
        /^the event is \d+ bytes \(Source \+ DetailType \+ Detail\); EventBridge destination "eventbridge" accepts at most 1048575 bytes per event/,
      );
      expect(noType).toEqual({
        kind: 'dead',
        error: 'the detailType template of "eventbridge" rendered an empty DetailType',
      });
      expect(longType).toEqual({
        kind: 'dead',
        error:
          'the detailType template of "eventbridge" rendered a DetailType of 129 characters; EventBridge accepts at most 128, so it can never be sent',
      });
      expect(loopback.requests).toHaveLength(0);
    } finally {
      await publisher.close();
    }
  });

  it.each(['InvalidAccountIdException', 'RedactionFailure', 'MalformedDetail', 'InvalidArgument'])(
    'sends an entry failed with %s (documented as not retryable) dead',
    async (code) => {
      // Prepare
      loopback.decideEntry = () => ({ code, message: 'no', senderFault: true });
      const publisher = createEventBridgePublisher({ client: events, source: 'com.example', name: 'bus' });
      try {
        // Act
        const outcome = await publisher.publish(aMessage());
        // Assess
        expect(outcome).toEqual({
          kind: 'dead',
          error: `EventBridge did not accept the message for destination "bus": ${code}: no`,
        });
      } finally {
        await publisher.close();
      }
    },
  );

  it.each([
    'AccessDeniedException',
    'NotAuthorizedForSourceException',
    'NotAuthorizedForDetailTypeException',
    'InternalFailure',
    'ThrottlingException',
  ])('retries an entry failed with %s (permissions can be fixed while the row waits)', async (code) => {
    // Prepare
    loopback.decideEntry = () => ({ code, message: 'no', senderFault: true });
    const publisher = createEventBridgePublisher({ client: events, source: 'com.example', name: 'bus' });
    try {
      // Act
      const outcome = await publisher.publish(aMessage());
      // Assess
      expect(outcome.kind).toBe('retry');
    } finally {
      await publisher.close();
    }
  });

  it('retries an entry whose result has neither an EventId nor an ErrorCode', async () => {
    // Prepare
    loopback.decideEntry = () => 'blank';
    const publisher = createEventBridgePublisher({ client: events, source: 'com.example', name: 'bus' });
    try {
      // Act
      const outcome = await publisher.publish(aMessage());
      // Assess
      expect(outcome).toEqual({
        kind: 'retry',
        error: 'EventBridge gave no result for the message (destination "bus")',
      });
    } finally {
      await publisher.close();
    }
  });

  it('sends events of up to 1 MB less one byte, packs requests below 1 MB, and takes a lower maxEventBytes', async () => {
    // Prepare: PutEvents wants the entries of a request "less than 1MB" (Source + DetailType + Detail).
    const source = 'com.example';
    const fixed = source.length + 'orders.created'.length + JSON.stringify({ b: '' }).length;
    const ofSize = (bytes: number) => aMessage({ payload: { b: 'y'.repeat(bytes - fixed) } });
    const publisher = createEventBridgePublisher({ client: events, source });
    const small = createEventBridgePublisher({ client: events, source, maxEventBytes: 1024 });
    try {
      // Act
      const largest = await publisher.publish(ofSize(1_048_575));
      const limit = await publisher.publish(ofSize(1_048_576));
      const halves = await Promise.all(
        [ofSize(400_000), ofSize(400_000), ofSize(400_000)].map((m) => publisher.publish(m)),
      );
      const overSmall = await small.publish(ofSize(1025));
      const underSmall = await small.publish(ofSize(1024));
      // Assess
      expect(largest).toEqual({ kind: 'sent' });
      expect(limit.kind === 'dead' && limit.error).toBe(
        'the event is 1048576 bytes (Source + DetailType + Detail); EventBridge destination "eventbridge" accepts at most 1048575 bytes per event, so it can never be sent',
      );
      expect(halves).toEqual([{ kind: 'sent' }, { kind: 'sent' }, { kind: 'sent' }]);
      expect(overSmall.kind === 'dead' && overSmall.error).toMatch(/accepts at most 1024 bytes per event/);
      expect(underSmall).toEqual({ kind: 'sent' });
      expect(loopback.requests.map((r) => r.entries.length)).toEqual([1, 2, 1, 1]);
      expect(loopback.violations).toEqual([]);
    } finally {
      await publisher.close();
      await small.close();
    }
  });

  it('refuses a maxEventBytes EventBridge cannot take', () => {
    // Act / Assess
    expect(() =>
      createEventBridgePublisher({ client: events, source: 'com.example', maxEventBytes: 1_048_576 }),
    ).toThrow(/maxEventBytes: must be an integer from 1 to 1048575/);
  });

  it('packs 25 concurrent events into requests of 10, 10 and 5', async () => {
    // Prepare
    const publisher = createEventBridgePublisher({ client: events, source: 'com.example' });
    try {
      // Act
      const outcomes = await Promise.all(Array.from({ length: 25 }, () => publisher.publish(aMessage())));
      // Assess
      expect(outcomes.every((o) => o.kind === 'sent')).toBe(true);
      expect(loopback.requests.map((r) => r.entries.length).sort((a, b) => b - a)).toEqual([10, 10, 5]);
      expect(loopback.violations).toEqual([]);
    } finally {
      await publisher.close();
    }
  });
});

describe('SNS and EventBridge destinations from the validated configuration', () => {
  it('publish with credentials from the default AWS chain to the configured endpoint', async () => {
    // Prepare: the environment is the chain's first link; nothing is injected into the publishers.
    vi.stubEnv('AWS_ACCESS_KEY_ID', TEST_CREDENTIALS.accessKeyId);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', TEST_CREDENTIALS.secretAccessKey);
    vi.stubEnv('AWS_SESSION_TOKEN', '');
    vi.stubEnv('AWS_PROFILE', '');
    const config = parseConfig({
      destinations: {
        fanout: { type: 'sns', topicArn: TOPIC, endpoint: loopback.endpoint },
        bus: { type: 'eventbridge', source: 'com.example', eventBus: 'orders', endpoint: loopback.endpoint },
      },
    });
    const publishers = createPublishers(config.destinations, {
      ...defaultPublisherFactories,
      ...awsPublisherFactories,
    });
    try {
      // Act
      const outcomes = await Promise.all([
        publishers.get('fanout')?.publish(aMessage()),
        publishers.get('bus')?.publish(aMessage()),
      ]);
      // Assess
      expect(outcomes).toEqual([{ kind: 'sent' }, { kind: 'sent' }]);
      expect(loopback.violations).toEqual([]);
      expect(loopback.requests.map((r) => [r.service, r.target ?? r.entries[0]?.eventBus])).toEqual(
        expect.arrayContaining([
          ['sns', TOPIC],
          ['eventbridge', 'orders'],
        ]),
      );
    } finally {
      await publishers.close();
      vi.unstubAllEnvs();
    }
  });
});
