/**
 * `retention.keepSentHours` under 72 hours warns: retention then deletes processed inbox rows before a provider
 * stops retrying (Stripe retries for up to 3 days), and the inbox deduplicates an idempotency key only while its row
 * exists, so a retry after the purge is stored and delivered again.
 */
import { describe, expect, it } from 'vitest';
import { configWarnings, parseConfig } from '../src/index.ts';
import { PROVIDER_RETRY_HOURS } from '../src/warnings.ts';
import { aConfigInput } from './fixtures.ts';

const withRetention = (retention: Record<string, unknown>, overrides: Record<string, unknown> = {}) =>
  parseConfig(aConfigInput({ retention, ...overrides }));

describe('configWarnings: a retention that deletes processed inbox rows before providers stop retrying', () => {
  it('warns when retention.keepSentHours is under 72, saying what a later retry becomes and what to set', () => {
    // Act
    const warnings = configWarnings(withRetention({ keepSentHours: 24 }));

    // Assess
    expect(warnings).toEqual([
      {
        path: 'retention.keepSentHours',
        message:
          "is 24 hours, under 72: retention deletes a processed inbox row once 24 hours have passed since it was processed, and the inbox deduplicates an idempotency key only while its row exists, so a provider's retry of that key that comes later (Stripe retries for up to 3 days, 72 hours) is stored again as a new message and delivered again; set 72 or more, or 0 to keep processed rows",
      },
    ]);
  });

  it('words a single hour in the singular', () => {
    const [warning] = configWarnings(withRetention({ keepSentHours: 1 }));

    expect(warning?.message).toMatch(
      /^is 1 hour, under 72: .* once 1 hour has passed since it was processed,/,
    );
  });

  it.each([
    ['72 hours, the providers’ retry window', { keepSentHours: PROVIDER_RETRY_HOURS }, {}],
    ['the default, 168 hours', {}, {}],
    ['0, which keeps processed rows', { keepSentHours: 0 }, {}],
    ['a short retention without any inbox source', { keepSentHours: 24 }, { sources: {} }],
  ])('says nothing for %s', (_what, retention, overrides) => {
    const warnings = configWarnings(withRetention(retention, overrides));

    expect(warnings.filter((w) => w.path.startsWith('retention.'))).toEqual([]);
  });

  it('warns for keepDeadHours under 72 too: a dead inbox row holds its idempotency key as a processed one does', () => {
    const warnings = configWarnings(withRetention({ keepDeadHours: 48 })).filter((w) =>
      w.path.startsWith('retention.'),
    );

    expect(warnings).toEqual([
      {
        path: 'retention.keepDeadHours',
        message:
          "is 48 hours, under 72: retention deletes a dead inbox row once 48 hours have passed since it went dead, and the inbox deduplicates an idempotency key only while its row exists, so a provider's retry of that key that comes later (Stripe retries for up to 3 days, 72 hours) is stored again as a new message and delivered again; set 72 or more, or 0 to keep dead rows",
      },
    ]);
  });
});
