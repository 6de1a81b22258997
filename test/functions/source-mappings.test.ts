/**
 * source-check's classifier (functions/lambda-shell/source-mappings.ts): which event source mappings of kafka-source
 * and amqp-source cannot poll, from what ListEventSourceMappings answers of each.
 */
import { describe, expect, it } from 'vitest';
import {
  classifyMapping,
  plannedDisabledOf,
  type SourceMapping,
} from '../../functions/lambda-shell/source-mappings.ts';

const MSK = 'arn:aws:kafka:eu-west-1:123456789012:cluster/events/0f1e2d3c-aaaa-bbbb-cccc-1234567890ab-3';
const MQ = 'arn:aws:mq:eu-west-1:123456789012:broker:orders:b-1234abcd-56ef-78ab-90cd-1234567890ab';

const kafka = (fields: Partial<SourceMapping>): SourceMapping => ({
  UUID: 'a1b2c3d4-0000-0000-0000-000000000001',
  EventSourceArn: MSK,
  Topics: ['clicks'],
  State: 'Enabled',
  StateTransitionReason: 'USER_INITIATED',
  ...fields,
});
const mq = (fields: Partial<SourceMapping>): SourceMapping => ({
  UUID: 'a1b2c3d4-0000-0000-0000-000000000002',
  EventSourceArn: MQ,
  Queues: ['orders.in'],
  State: 'Enabled',
  StateTransitionReason: 'USER_INITIATED',
  ...fields,
});

describe('classifyMapping', () => {
  it.each<[string, SourceMapping, ReadonlySet<string>, boolean]>([
    [
      'healthy and idle (no records yet)',
      kafka({ LastProcessingResult: 'No records processed' }),
      new Set(),
      false,
    ],
    ['healthy after a batch', kafka({ LastProcessingResult: 'OK' }), new Set(), false],
    ['no result recorded yet', kafka({}), new Set(), false],
    [
      'Kafka SASL authentication failed',
      kafka({ LastProcessingResult: 'PROBLEM: SASL authentication failed' }),
      new Set(),
      true,
    ],
    [
      'Kafka cluster failed to authorize Lambda',
      kafka({ LastProcessingResult: 'PROBLEM: Cluster failed to authorize Lambda' }),
      new Set(),
      true,
    ],
    [
      'Amazon MQ Disabled with EVENT_SOURCE_AUTHN_ERROR',
      mq({ State: 'Disabled', StateTransitionReason: 'EVENT_SOURCE_AUTHN_ERROR' }),
      new Set(),
      true,
    ],
    [
      'Amazon MQ with EVENT_SOURCE_AUTHZ_ERROR',
      mq({ State: 'Enabled', StateTransitionReason: 'EVENT_SOURCE_AUTHZ_ERROR' }),
      new Set(),
      true,
    ],
    ['Disabled though created enabled', kafka({ State: 'Disabled' }), new Set(), true],
    ['Disabling though created enabled', mq({ State: 'Disabling' }), new Set(['other.queue']), true],
    ['created disabled and Disabled', kafka({ State: 'Disabled' }), new Set(['clicks']), false],
    [
      'created disabled, Disabled, with an old PROBLEM result',
      kafka({ State: 'Disabled', LastProcessingResult: 'PROBLEM: SASL authentication failed' }),
      new Set(['clicks']),
      false,
    ],
    [
      'Creating',
      kafka({ State: 'Creating', LastProcessingResult: 'PROBLEM: Connection error' }),
      new Set(),
      false,
    ],
    ['Updating', mq({ State: 'Updating' }), new Set(), false],
    ['Enabling', kafka({ State: 'Enabling' }), new Set(), false],
  ])('%s → problem: %s', (_, mapping, plannedDisabled, problem) => {
    // Act
    const verdict = classifyMapping(mapping, plannedDisabled);

    // Assess
    expect(verdict.problem).toBe(problem);
  });

  it('says why: the result, the reason code, or the state', () => {
    // Act
    const verdicts = [
      classifyMapping(kafka({ LastProcessingResult: 'PROBLEM: SASL authentication failed' })),
      classifyMapping(mq({ State: 'Disabled', StateTransitionReason: 'EVENT_SOURCE_AUTHN_ERROR' })),
      classifyMapping(kafka({ State: 'Disabled' })),
    ];

    // Assess
    expect(verdicts).toEqual([
      { problem: true, why: 'PROBLEM: SASL authentication failed' },
      { problem: true, why: 'EVENT_SOURCE_AUTHN_ERROR' },
      { problem: true, why: 'Disabled, though infra created it enabled' },
    ]);
  });
});

describe('plannedDisabledOf', () => {
  it('reads the names per function, and nothing from an unset or broken value', () => {
    // Act
    const read = plannedDisabledOf('{"kafka-source":["clicks"],"amqp-source":["orders.in"]}');
    const unset = plannedDisabledOf(undefined);
    const broken = plannedDisabledOf('{not json');

    // Assess
    expect([...read['kafka-source']]).toEqual(['clicks']);
    expect([...read['amqp-source']]).toEqual(['orders.in']);
    expect([...unset['kafka-source'], ...broken['amqp-source']]).toEqual([]);
  });
});
