/**
 * `inbox.transformTimeoutMs` and `sources.<name>.transformTimeoutMs`: the time one run of a source transform may take
 * before it is a rejection — default, bounds, refusals at their path and the environment overlay. That the ingestion
 * obeys it: packages/inbox/test/ingest-transforms.integration.test.ts and broker-ingest.integration.test.ts.
 */
import type { ConfigIssue } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { type HttpSourceConfig, overlayEnv, parseConfig, validateConfig } from '../src/index.ts';
import { anAmqpSource, anHttpSource } from './fixtures.ts';

function issuesOf(input: unknown): ConfigIssue[] {
  const result = validateConfig(input);
  return result.ok ? [] : result.issues;
}

describe('inbox.transformTimeoutMs', () => {
  it("defaults to 1000 ms, the outbox's transform timeout; a source may set its own", () => {
    // Act
    const config = parseConfig({
      sources: { stripe: anHttpSource(), orders: anAmqpSource({ transformTimeoutMs: 250 }) },
    });

    // Assess
    expect(config.inbox.transformTimeoutMs).toBe(1000);
    expect((config.sources.stripe as HttpSourceConfig).transformTimeoutMs).toBeUndefined();
    expect(config.sources.orders?.transformTimeoutMs).toBe(250);
  });

  it.each([
    [0, 'must be at least 1'],
    [1.5, 'must be a whole number'],
    [60_001, 'must be at most 60000'],
    ['1s', 'must be a number, not text'],
  ])('refuses %j at its path, in the inbox and in a source', (value, message) => {
    expect(issuesOf({ inbox: { transformTimeoutMs: value } })).toEqual([
      expect.objectContaining({
        path: 'inbox.transformTimeoutMs',
        message: expect.stringContaining(message),
      }),
    ]);
    expect(issuesOf({ sources: { stripe: anHttpSource({ transformTimeoutMs: value }) } })).toEqual([
      expect.objectContaining({
        path: 'sources.stripe.transformTimeoutMs',
        message: expect.stringContaining(message),
      }),
    ]);
  });

  it('is read from QUEUEBOX_INBOX__TRANSFORMTIMEOUTMS', () => {
    // Act
    const { value, issues } = overlayEnv({}, { QUEUEBOX_INBOX__TRANSFORMTIMEOUTMS: '2500' }, new Map());

    // Assess
    expect(issues).toEqual([]);
    expect(parseConfig(value).inbox.transformTimeoutMs).toBe(2500);
  });
});
