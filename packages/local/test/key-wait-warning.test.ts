import { KEY_WAIT_WARNING } from '@queuebox/inbox';
import { describe, expect, it } from 'vitest';
import { createKeyWaitWarning } from '../src/key-wait-warning.ts';
import { createLogger } from '../src/logger.ts';

describe('createKeyWaitWarning (relay forwards held by open application transactions)', () => {
  /** The warning over a logger that keeps its lines, on a clock the test moves. */
  const setUp = () => {
    const lines: string[] = [];
    const clock = { now: 0 };
    const warn = createKeyWaitWarning({
      log: createLogger({ write: (line) => lines.push(line) }).child({ component: 'relay' }),
      now: () => clock.now,
    });
    const written = () => lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    return { warn, clock, written };
  };

  it('warns for a drain that waited a second or more, with the wait and the hint; not below, nor without', () => {
    // Prepare
    const { warn, written } = setUp();
    // Act
    warn({});
    warn({ keyWaitMs: 999 });
    warn({ keyWaitMs: 1_500 });
    // Assess
    expect(written()).toEqual([
      expect.objectContaining({
        level: 'WARN',
        message: 'relay forward waited for outbox key locks held by other transactions',
        component: 'relay',
        waitedMs: 1_500,
        hint: KEY_WAIT_WARNING.hint,
      }),
    ]);
    expect(written()[0]).not.toHaveProperty('suppressed');
    expect(KEY_WAIT_WARNING.hint).toMatch(/idle_in_transaction_session_timeout/);
    expect(KEY_WAIT_WARNING.hint).toMatch(/pg_stat_activity/);
  });

  it('warns at most once a minute, and the next warning counts the drains it kept quiet', () => {
    // Prepare
    const { warn, clock, written } = setUp();
    // Act: a key held for minutes, every drain waiting.
    warn({ keyWaitMs: 2_000 });
    for (const at of [10_000, 20_000, 59_999]) {
      clock.now = at;
      warn({ keyWaitMs: at === 20_000 ? 30_000 : 5_000 });
    }
    clock.now = 60_000;
    warn({ keyWaitMs: 1_000 });
    clock.now = 70_000;
    warn({ keyWaitMs: 4_000 });
    clock.now = 130_000;
    warn({ keyWaitMs: 1_200 });
    // Assess
    expect(
      written().map(({ waitedMs, suppressed, suppressedLongestMs }) => ({
        waitedMs,
        suppressed,
        suppressedLongestMs,
      })),
    ).toEqual([
      { waitedMs: 2_000, suppressed: undefined, suppressedLongestMs: undefined },
      { waitedMs: 1_000, suppressed: 3, suppressedLongestMs: 30_000 },
      { waitedMs: 1_200, suppressed: 1, suppressedLongestMs: 4_000 },
    ]);
  });
});
