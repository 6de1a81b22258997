import { parseConfig } from '@queuebox/config';
import { FUNCTION_NAMES, handlerOf } from '@queuebox/deploy-contract';
import { describe, expect, it } from 'vitest';
import { InfraPlanError } from '../../infra/errors.ts';
import { planFunctions } from '../../infra/functions-plan.ts';
import { aConfig, aKafkaSource, aNatsSource, anAmqpSource, anHttpSource, anSqsSource } from './fixtures.ts';

const names = (plans: readonly { name: string }[]) => plans.map((p) => p.name);

describe('planFunctions', () => {
  it('creates only the always-on functions when no source is configured', () => {
    // Prepare
    const config = parseConfig({});

    // Act
    const plans = planFunctions(config);

    // Assess
    expect(names(plans)).toEqual(['outbox-tick', 'maintenance-tick', 'migrate', 'admin-http']);
  });

  it('adds a function per source type and the relay for push sources', () => {
    // Prepare
    const config = aConfig({
      sources: {
        stripe: anHttpSource(),
        clicks: aKafkaSource(),
        orders: anAmqpSource(),
        audit: aNatsSource(),
        jobs: anSqsSource(),
      },
    });

    // Act
    const plans = planFunctions(config);

    // Assess
    expect(names(plans)).toEqual([...FUNCTION_NAMES]);
    expect(plans.map((p) => p.handler)).toEqual(FUNCTION_NAMES.map(handlerOf));
  });

  it('leaves the relay out when every source is pull or the relay is off', () => {
    // Prepare
    const pullOnly = aConfig({ sources: { stripe: anHttpSource({ mode: 'pull' }) } });
    const relayOff = aConfig({ inbox: { relay: { enabled: false } } });

    // Act
    const pullPlans = names(planFunctions(pullOnly));
    const offPlans = names(planFunctions(relayOff));

    // Assess
    expect(pullPlans).toContain('inbox-http');
    expect(pullPlans).not.toContain('relay-tick');
    expect(offPlans).not.toContain('relay-tick');
  });

  it('takes timeouts, memory and rates from aws.functions and keeps the leases', () => {
    // Prepare
    const config = aConfig({
      outbox: { claimTimeoutMs: 120_000 },
      aws: {
        functions: {
          outboxTick: { timeoutSeconds: 90, memoryMb: 1024, rateMinutes: 15 },
          inboxHttp: { timeoutSeconds: 10 },
        },
      },
    });

    // Act
    const plans = planFunctions(config);

    // Assess
    const outbox = plans.find((p) => p.name === 'outbox-tick');
    expect(outbox).toMatchObject({
      id: 'OutboxTick',
      timeoutSeconds: 90,
      memoryMb: 1024,
      rateMinutes: 15,
      claimLeaseMs: 120_000,
    });
    expect(plans.find((p) => p.name === 'inbox-http')).toMatchObject({ timeoutSeconds: 10, memoryMb: 512 });
    expect(plans.find((p) => p.name === 'inbox-http')).not.toHaveProperty('rateMinutes');
  });

  it('refuses a tick whose timeout reaches its claim lease, even if validation let it through', () => {
    // Prepare: validated, then broken the way a validation gap would leave it
    const config = aConfig();
    const broken = {
      ...config,
      inbox: { ...config.inbox, relay: { ...config.inbox.relay, claimTimeoutMs: 60_000 } },
    };

    // Act
    const act = () => planFunctions(broken);

    // Assess
    expect(act).toThrow(InfraPlanError);
    expect(act).toThrow(/relay-tick would run up to 60 s but its claims last 60000 ms/);
  });

  it("refuses an outbox-tick too short for a destination's longest request, and takes one that fits", () => {
    // Prepare: outbox-tick's default 60 s keeps 10 s besides its longest request: 50 s.
    const destination = (timeoutMs: number) => ({
      destinations: { billing: { type: 'http', url: 'https://billing.example/hooks', timeoutMs } },
    });

    // Act
    const act = () => planFunctions(aConfig(destination(50_001)));

    // Assess
    expect(act).toThrow(InfraPlanError);
    expect(act).toThrow(/destinations\.billing\.timeoutMs lets one request take 50001 ms.*at least 61/);
    expect(names(planFunctions(aConfig(destination(50_000))))).toContain('outbox-tick');
  });
});
