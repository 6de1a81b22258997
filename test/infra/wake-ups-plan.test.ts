import { FUNCTION_NAMES } from '@queuebox/deploy-contract';
import { describe, expect, it } from 'vitest';
import { planFunctions } from '../../infra/functions-plan.ts';
import { planWakeups } from '../../infra/wake-ups-plan.ts';
import { aConfig, aKafkaSource, anHttpSource } from './fixtures.ts';

describe('planWakeups', () => {
  it('lets sources wake the relay and the relay wake the outbox, targets created first', () => {
    // Prepare
    const functions = planFunctions(aConfig({ sources: { stripe: anHttpSource(), clicks: aKafkaSource() } }));

    // Act
    const wakeups = planWakeups(functions);

    // Assess
    expect(wakeups.map((w) => `${w.from}->${w.to}:${w.env}`)).toEqual([
      'inbox-http->relay-tick:RELAY_TICK_FUNCTION_NAME',
      'kafka-source->relay-tick:RELAY_TICK_FUNCTION_NAME',
      'admin-http->relay-tick:RELAY_TICK_FUNCTION_NAME',
      'relay-tick->outbox-tick:OUTBOX_TICK_FUNCTION_NAME',
      'admin-http->outbox-tick:OUTBOX_TICK_FUNCTION_NAME',
    ]);
    for (const w of wakeups)
      expect(FUNCTION_NAMES.indexOf(w.to)).toBeLessThan(FUNCTION_NAMES.indexOf(w.from));
  });

  it('wakes nothing that does not exist', () => {
    const functions = planFunctions(aConfig({ sources: { stripe: anHttpSource({ mode: 'pull' }) } }));
    expect(planWakeups(functions).map((w) => w.to)).toEqual(['outbox-tick']);
  });
});
