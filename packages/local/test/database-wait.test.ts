/**
 * waitForDatabase: a runtime started before its database tries again while the store says the database cannot be
 * reached (StoreUnavailableError), with growing pauses and a WARN at a bounded rate, and gives up at once on any
 * other error or when the start is abandoned.
 */
import { type LogFields, type Logger, StoreError, StoreUnavailableError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { waitForDatabase } from '../src/database-wait.ts';

interface Line {
  readonly level: string;
  readonly message: string;
  readonly fields: LogFields;
}

function recordingLogger(): { log: Logger; lines: Line[] } {
  const lines: Line[] = [];
  const at =
    (level: string) =>
    (message: string, fields: LogFields = {}) =>
      lines.push({ level, message, fields });
  const log: Logger = {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: () => log,
  };
  return { log, lines };
}

const refused = () =>
  new StoreUnavailableError('The database is unavailable: connect ECONNREFUSED 127.0.0.1:5432', {
    context: {},
  });

/** An attempt that fails `failures` times with `error()` and then succeeds. */
function failingTimes(failures: number, error: () => unknown = refused) {
  let calls = 0;
  return {
    calls: () => calls,
    attempt: async () => {
      calls++;
      if (calls <= failures) throw error();
    },
  };
}

describe('waitForDatabase', () => {
  it('tries again while the database is unavailable, the pause doubling up to its cap', async () => {
    const { log, lines } = recordingLogger();
    const attempt = failingTimes(6);
    const report = await waitForDatabase({
      attempt: attempt.attempt,
      log,
      firstDelayMs: 1,
      maxDelayMs: 8,
      warnIntervalMs: 0,
      random: () => 1,
      fields: { url: 'http://127.0.0.1:1' },
    });
    expect(report.attempts).toBe(7);
    expect(attempt.calls()).toBe(7);
    const warns = lines.filter((l) => l.level === 'warn');
    expect(warns.map((l) => l.fields.retryInMs)).toEqual([1, 2, 4, 8, 8, 8]);
    expect(warns[0]).toMatchObject({
      message: 'database unavailable; waiting for it before starting',
      fields: {
        url: 'http://127.0.0.1:1',
        failures: 1,
        error: { name: 'StoreUnavailableError', message: expect.stringContaining('ECONNREFUSED') },
      },
    });
    expect(lines.at(-1)).toMatchObject({
      level: 'info',
      message: 'database answers; starting',
      fields: { attempts: 7 },
    });
  });

  it('jitters each pause between half and all of it', async () => {
    const { log, lines } = recordingLogger();
    await waitForDatabase({
      attempt: failingTimes(2).attempt,
      log,
      firstDelayMs: 10,
      warnIntervalMs: 0,
      random: () => 0,
    });
    expect(lines.filter((l) => l.level === 'warn').map((l) => l.fields.retryInMs)).toEqual([5, 10]);
  });

  it('logs the first failure, then at most one WARN per warnIntervalMs, with the latest cause', async () => {
    const { log, lines } = recordingLogger();
    let clock = 0;
    const report = await waitForDatabase({
      attempt: failingTimes(6).attempt,
      log,
      firstDelayMs: 1,
      maxDelayMs: 1,
      warnIntervalMs: 2_500,
      now: () => {
        clock += 1_000;
        return clock;
      },
    });
    // now(): start 1000, failures at 2000 … 7000, success at 8000.
    const warns = lines.filter((l) => l.level === 'warn');
    expect(warns.map((l) => l.fields.failures)).toEqual([1, 4]);
    expect(warns.map((l) => l.fields.waitedMs)).toEqual([1_000, 4_000]);
    expect(report).toEqual({ attempts: 7, waitedMs: 7_000 });
  });

  it('names the SQLSTATE of the cause when the store gave one (57P03: the server is starting up)', async () => {
    const { log, lines } = recordingLogger();
    const starting = () =>
      new StoreUnavailableError('The database is unavailable: the database system is starting up', {
        context: { sqlState: '57P03' },
      });
    await waitForDatabase({ attempt: failingTimes(1, starting).attempt, log, firstDelayMs: 1 });
    expect(lines[0]).toMatchObject({ level: 'warn', fields: { sqlState: '57P03' } });
  });

  it('says nothing when the database answers at once', async () => {
    const { log, lines } = recordingLogger();
    expect(await waitForDatabase({ attempt: async () => {}, log })).toMatchObject({ attempts: 1 });
    expect(lines).toEqual([]);
  });

  it('throws any other error at once: authentication failed, no such database, a failed migration', async () => {
    const { log, lines } = recordingLogger();
    // The PostgreSQL store calls refused credentials an outage (a Lambda function reads its secrets again); the
    // local runtime reads them once, so at start they end it.
    const denied = new StoreUnavailableError(
      'The database refused QueueBox\'s credentials (a rotated password?): password authentication failed for user "app"',
      {
        context: { sqlState: '28P01', credentialsRefused: true },
      },
    );
    const attempt = failingTimes(1, () => denied);
    await expect(waitForDatabase({ attempt: attempt.attempt, log, firstDelayMs: 1 })).rejects.toBe(denied);
    expect(attempt.calls()).toBe(1);
    expect(lines).toEqual([]);
    const missing = new StoreError('A database statement failed: database "app" does not exist', {
      context: { sqlState: '3D000' },
    });
    await expect(
      waitForDatabase({ attempt: failingTimes(1, () => missing).attempt, log, firstDelayMs: 1 }),
    ).rejects.toBe(missing);
  });

  it("throws SQL Server's failed login (18456) at once, which its store calls unavailable; waits for its 4060", async () => {
    const { log } = recordingLogger();
    const loginFailed = new StoreUnavailableError(
      "The database is unavailable: Login failed for user 'app'.",
      {
        context: { number: 18456, code: 'ELOGIN' },
      },
    );
    const login = failingTimes(1, () => loginFailed);
    await expect(waitForDatabase({ attempt: login.attempt, log, firstDelayMs: 1 })).rejects.toBe(loginFailed);
    expect(login.calls()).toBe(1);
    const cannotOpen = failingTimes(
      2,
      () =>
        new StoreUnavailableError(
          'The database is unavailable: Cannot open database "app" requested by the login.',
          {
            context: { number: 4060, code: 'ELOGIN' },
          },
        ),
    );
    await expect(
      waitForDatabase({ attempt: cannotOpen.attempt, log, firstDelayMs: 1 }),
    ).resolves.toMatchObject({
      attempts: 3,
    });
  });

  it('a permanent error after an outage still ends the wait', async () => {
    const { log } = recordingLogger();
    const missing = new StoreError('A database statement failed: database "app" does not exist');
    let calls = 0;
    const attempt = async () => {
      calls++;
      throw calls === 1 ? refused() : missing;
    };
    await expect(waitForDatabase({ attempt, log, firstDelayMs: 1 })).rejects.toBe(missing);
    expect(calls).toBe(2);
  });

  it('an abort during a pause ends the wait at once with its reason', async () => {
    const { log } = recordingLogger();
    const controller = new AbortController();
    const reason = new Error('SIGTERM');
    const started = Date.now();
    const waiting = waitForDatabase({
      attempt: failingTimes(Number.POSITIVE_INFINITY).attempt,
      log,
      firstDelayMs: 60_000,
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(reason), 20);
    await expect(waiting).rejects.toBe(reason);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('an abort during a try that hangs (a connect that is never answered) ends the wait at once', async () => {
    const { log } = recordingLogger();
    const controller = new AbortController();
    const reason = new Error('SIGTERM');
    const waiting = waitForDatabase({
      attempt: () => new Promise<void>(() => {}),
      log,
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(reason), 20);
    await expect(waiting).rejects.toBe(reason);
  });

  it('an aborted signal ends the wait before the first try', async () => {
    const { log } = recordingLogger();
    const reason = new Error('SIGINT');
    const attempt = failingTimes(0);
    await expect(
      waitForDatabase({ attempt: attempt.attempt, log, signal: AbortSignal.abort(reason) }),
    ).rejects.toBe(reason);
    expect(attempt.calls()).toBe(0);
  });
});
