/**
 * A claim lease must hold the longest destination request and its settle (operator audit, finding 1): leases are
 * never renewed, so a lease shorter than a destination's timeout expired mid-request, the row was claimed and
 * delivered again, the late 200 was stale, and the row went dead after ten successful deliveries. The outbox poller
 * ends each batch with its lease (packages/outbox poller-deadline test), so one request and its settle is the least.
 */
import type { ConfigIssue } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../src/index.ts';
import { anHttpDestination } from './fixtures.ts';

function issuesOf(input: unknown): ConfigIssue[] {
  const result = validateConfig(input);
  return result.ok ? [] : result.issues;
}

/** A configuration whose outbox-tick timeout does not get in the way (the lease only has to beat 1 s there). */
function withDestinations(destinations: Record<string, unknown>, outbox: Record<string, unknown> = {}) {
  return {
    outbox,
    destinations,
    routes: [{ match: '#', destination: Object.keys(destinations)[0] }],
    aws: { functions: { outboxTick: { timeoutSeconds: 1 } } },
  };
}

describe('outbox.claimTimeoutMs against the longest destination timeout', () => {
  it('refuses the audited lease of 61000 ms with a destination timeout of 120000 ms, naming both keys and the least lease', () => {
    // Act
    const issues = issuesOf(
      withDestinations({ slow: anHttpDestination({ timeoutMs: 120_000 }) }, { claimTimeoutMs: 61_000 }),
    );

    // Assess
    expect(issues).toHaveLength(1);
    expect(issues[0]?.path).toBe('outbox.claimTimeoutMs');
    expect(issues[0]?.message).toContain('destinations.slow.timeoutMs (120000 ms)');
    expect(issues[0]?.message).toContain('at least 122000');
  });

  it('refuses a destination timeout of 900000 ms under the default lease, at the timeout the file set', () => {
    // Act
    const issues = issuesOf({
      destinations: { slow: anHttpDestination({ timeoutMs: 900_000 }) },
      routes: [{ match: '#', destination: 'slow' }],
    });

    // Assess
    expect(issues).toEqual([
      {
        path: 'destinations.slow.timeoutMs',
        message: expect.stringContaining(
          'set outbox.claimTimeoutMs to at least 902000, or this timeout to at most 298000 ms',
        ),
      },
    ]);
  });

  it('counts the default http timeout (15000 ms) and the longest of several destinations', () => {
    // Act
    const short = issuesOf(withDestinations({ d: anHttpDestination() }, { claimTimeoutMs: 16_999 }));
    const enough = issuesOf(withDestinations({ d: anHttpDestination() }, { claimTimeoutMs: 17_000 }));
    const several = issuesOf(
      withDestinations(
        {
          fast: anHttpDestination({ timeoutMs: 1000 }),
          slow: anHttpDestination({ timeoutMs: 200_000 }),
          rabbit: { type: 'rabbitmq', url: 'amqp://127.0.0.1', exchange: '' },
        },
        { claimTimeoutMs: 201_000 },
      ),
    );

    // Assess
    expect(short).toEqual([
      expect.objectContaining({
        path: 'outbox.claimTimeoutMs',
        message: expect.stringContaining('destinations.d.timeoutMs (15000 ms, its default)'),
      }),
    ]);
    expect(enough).toEqual([]);
    expect(several).toEqual([
      expect.objectContaining({
        message: expect.stringContaining('destinations.slow.timeoutMs (200000 ms)'),
      }),
    ]);
  });

  it("counts a broker destination without timeoutMs as its publisher's 10 s wait, not as 0", () => {
    // A RabbitMQ confirm (or NATS ack, Kafka produce, AWS call) waits up to 10 s: a 3 s lease would cut it.
    const rabbit = { type: 'rabbitmq', url: 'amqp://127.0.0.1', exchange: '' };
    const short = issuesOf(withDestinations({ rabbit }, { claimTimeoutMs: 3000 }));
    const enough = issuesOf(withDestinations({ rabbit }, { claimTimeoutMs: 12_000 }));

    expect(short).toEqual([
      expect.objectContaining({
        path: 'outbox.claimTimeoutMs',
        // Named as what it is: a rabbitmq destination has no timeoutMs to set (the schema refuses one), and the
        // message used to tell an operator to set it (an outside crash soak).
        message: expect.stringContaining(
          'the publish wait of destinations.rabbit, a rabbitmq destination (10000 ms, fixed)',
        ),
      }),
    ]);
    expect(enough).toEqual([]);
  });

  it('accepts the defaults, and a destination timeout up to 298000 ms under the default lease', () => {
    expect(issuesOf({ destinations: { d: anHttpDestination() }, routes: [] })).toEqual([]);
    expect(issuesOf({ destinations: { d: anHttpDestination({ timeoutMs: 298_000 }) } })).toEqual([]);
    expect(issuesOf({ destinations: { d: anHttpDestination({ timeoutMs: 298_001 }) } })).toHaveLength(1);
  });

  it('leaves a lease that is not a number to the schema', () => {
    // Act
    const issues = issuesOf(
      withDestinations({ d: anHttpDestination({ timeoutMs: 900_000 }) }, { claimTimeoutMs: '30s' }),
    );

    // Assess
    expect(issues).toEqual([{ path: 'outbox.claimTimeoutMs', message: 'must be a number, not text' }]);
  });
});
