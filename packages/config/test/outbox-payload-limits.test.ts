/**
 * `outbox.maxPayloadBytes` and `outbox.largePayloadBudgetBytes`: the outbox poller's limits on the payloads a
 * PostgreSQL claim leaves out (over 64 KiB) — defaults, bounds, refusals at their path, the environment overlay and
 * the descriptions editors show. That the poller built from the configuration obeys them:
 * packages/use-cases/test/outbox-payload-limits.integration.test.ts.
 */
import type { ConfigIssue } from '@queuebox/core';
import { CONFIG_DEFAULTS } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import {
  configJsonSchema,
  OUTBOX_DEFERRED_PAYLOAD_BYTES,
  OUTBOX_LARGE_PAYLOAD_BUDGET_LIMIT,
  OUTBOX_MAX_PAYLOAD_BYTES_LIMIT,
  overlayEnv,
  parseConfig,
  validateConfig,
} from '../src/index.ts';

function issuesOf(input: unknown): ConfigIssue[] {
  const result = validateConfig(input);
  return result.ok ? [] : result.issues;
}

describe('outbox.maxPayloadBytes and outbox.largePayloadBudgetBytes', () => {
  it("default to the poller's own defaults: 64 MiB and 16 MiB", () => {
    // Act
    const config = parseConfig({});

    // Assess
    expect(config.outbox.maxPayloadBytes).toBe(67_108_864);
    expect(config.outbox.largePayloadBudgetBytes).toBe(16_777_216);
    expect(config.outbox).toMatchObject(CONFIG_DEFAULTS.outbox);
  });

  it('take any whole number of bytes from the 64 KiB deferral threshold to their limits (256 MiB, 1 GiB)', () => {
    expect(OUTBOX_DEFERRED_PAYLOAD_BYTES).toBe(64 * 1024);
    expect(OUTBOX_MAX_PAYLOAD_BYTES_LIMIT).toBe(256 * 1024 * 1024);
    expect(OUTBOX_LARGE_PAYLOAD_BUDGET_LIMIT).toBe(1024 * 1024 * 1024);
    for (const [maxPayloadBytes, largePayloadBudgetBytes] of [
      [65_536, 65_536],
      [100_000, 1_048_576],
      [268_435_456, 1_073_741_824],
      // A budget below the largest payload is allowed: one large payload always goes, however large.
      [268_435_456, 65_536],
    ] as const) {
      const outbox = { maxPayloadBytes, largePayloadBudgetBytes };
      expect(issuesOf({ outbox }), JSON.stringify(outbox)).toEqual([]);
      expect(parseConfig({ outbox }).outbox).toMatchObject(outbox);
    }
  });

  it.each([
    [65_535, 'must be at least 65536'],
    [268_435_457, 'must be at most 268435456'],
    [0, 'must be at least 65536'],
    [1.5, 'must be a whole number'],
    ['64MB', 'must be a number, not text'],
  ])('refuses maxPayloadBytes %j at its path', (value, message) => {
    expect(issuesOf({ outbox: { maxPayloadBytes: value } })).toEqual([
      expect.objectContaining({ path: 'outbox.maxPayloadBytes', message: expect.stringContaining(message) }),
    ]);
  });

  it.each([
    [65_535, 'must be at least 65536'],
    [1_073_741_825, 'must be at most 1073741824'],
    [-1, 'must be at least 65536'],
  ])('refuses largePayloadBudgetBytes %j at its path', (value, message) => {
    expect(issuesOf({ outbox: { largePayloadBudgetBytes: value } })).toEqual([
      expect.objectContaining({
        path: 'outbox.largePayloadBudgetBytes',
        message: expect.stringContaining(message),
      }),
    ]);
  });

  it('are read from QUEUEBOX_OUTBOX__MAXPAYLOADBYTES and QUEUEBOX_OUTBOX__LARGEPAYLOADBUDGETBYTES', () => {
    // Act
    const { value, issues } = overlayEnv(
      {},
      { QUEUEBOX_OUTBOX__MAXPAYLOADBYTES: '1048576', QUEUEBOX_OUTBOX__LARGEPAYLOADBUDGETBYTES: '4194304' },
      new Map(),
    );

    // Assess
    expect(issues).toEqual([]);
    expect(parseConfig(value).outbox).toMatchObject({
      maxPayloadBytes: 1_048_576,
      largePayloadBudgetBytes: 4_194_304,
    });
  });

  it('say for editors what they count, where they apply and their bounds', () => {
    // Act
    const outbox = (
      configJsonSchema() as {
        properties: { outbox: { properties: Record<string, { description?: string; minimum?: number }> } };
      }
    ).properties.outbox.properties;

    // Assess
    expect(outbox.maxPayloadBytes?.minimum).toBe(65_536);
    expect(outbox.maxPayloadBytes?.description).toMatch(
      /^Largest payload delivered, in bytes of its JSON text\. PostgreSQL .* SQL Server and the RDS Data API .* Default 67108864 \(64 MiB\); at least 65536; at most 268435456 /,
    );
    expect(outbox.largePayloadBudgetBytes?.minimum).toBe(65_536);
    expect(outbox.largePayloadBudgetBytes?.description).toMatch(
      /Default 16777216 \(16 MiB\); at least 65536; at most 1073741824 \(1 GiB\)\.$/,
    );
  });
});
