/**
 * `startTableLoop`'s `finish`: once the loop stopped, and before `done` resolves, it runs once; a report it returns
 * is told and logged like a drain's (the outbox: the requests a drain that handed over left in flight), a failure
 * counted and logged like a failed drain.
 */
import type { LogFields, Logger } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { startTableLoop } from '../src/drain-loops.ts';

interface Report {
  readonly stoppedFor: 'time' | 'empty' | 'aborted';
  readonly sent: number;
}

function aRecordingLogger(lines: [string, LogFields | undefined][]): Logger {
  const log = (message: string, fields?: LogFields) => {
    lines.push([message, fields]);
  };
  const logger: Logger = { debug: log, info: log, warn: log, error: log, child: () => logger };
  return logger;
}

function aLoop(finish: (deadline: number) => Promise<Report | undefined>) {
  const stop = new AbortController();
  const told: Report[] = [];
  const errors: string[] = [];
  const lines: [string, LogFields | undefined][] = [];
  const loop = startTableLoop<Report>({
    name: 'outbox',
    // The first drain stops for time, and the loop is stopped while it runs: no other drain starts.
    drain: async () => {
      stop.abort();
      return { stoppedFor: 'time', sent: 0 };
    },
    isIdle: (report) => report.stoppedFor !== 'time',
    pollIntervalMs: 10,
    budgetMs: 1000,
    signal: stop.signal,
    log: aRecordingLogger(lines),
    metrics: { recordDrainError: (name) => errors.push(name) },
    onDrain: (report) => told.push(report),
    summary: (report) => (report.sent > 0 ? { sent: report.sent } : undefined),
    finish,
  });
  return { loop, told, errors, lines };
}

describe('startTableLoop with finish', () => {
  it('tells the report of finish before done resolves', async () => {
    let finishedAt: number | undefined;
    const { loop, told, lines } = aLoop(async (deadline) => {
      finishedAt = deadline;
      await new Promise((resolve) => setTimeout(resolve, 20));
      return { stoppedFor: 'aborted', sent: 1 };
    });

    await loop.done;

    expect(finishedAt).toBeGreaterThan(Date.now());
    expect(told).toEqual([
      { stoppedFor: 'time', sent: 0 },
      { stoppedFor: 'aborted', sent: 1 },
    ]);
    expect(lines).toContainEqual(['outbox drain', { sent: 1 }]);
  });

  it('tells nothing more when finish has nothing to report', async () => {
    const { loop, told } = aLoop(async () => undefined);
    await loop.done;
    expect(told).toEqual([{ stoppedFor: 'time', sent: 0 }]);
  });

  it('counts and logs a failure of finish, and still resolves done', async () => {
    const { loop, errors, lines } = aLoop(async () => {
      throw new Error('settle failed');
    });

    await loop.done;

    expect(errors).toEqual(['outbox']);
    expect(lines.map(([message]) => message)).toContain('outbox drain failed; retrying with back-off');
  });
});
