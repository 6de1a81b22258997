/**
 * A destination outage in the log at `logLevel: info`: each retry alone is a DEBUG line, so the poller writes one
 * WARN per failing destination (at most one a minute, with the destination, its last error and the retries since
 * the last line) and an INFO once it delivers again. Against a real receiver answering 503, and a port nothing
 * listens on.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Clock, LogFields, Logger, NewOutboxMessage, RowId } from '@queuebox/core';
import { requireServices, useTestStore } from '@queuebox/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { aHooksPoller } from './support/hooks-poller.ts';
import { closedPort, type HttpReceiver, startHttpReceiver } from './support/http-receiver.ts';

const needs = await requireServices('outbox destination health log', ['postgres']);

interface LogLine {
  readonly level: 'debug' | 'info' | 'warn' | 'error';
  readonly message: string;
  readonly fields: LogFields;
}

/** A logger that keeps every line, its children's included (with their fields). */
function aRecordingLogger(lines: LogLine[] = [], bound: LogFields = {}): Logger & { lines: LogLine[] } {
  const at =
    (level: LogLine['level']) =>
    (message: string, fields: LogFields = {}) =>
      void lines.push({ level, message, fields: { ...bound, ...fields } });
  return {
    lines,
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: (fields) => aRecordingLogger(lines, { ...bound, ...fields }),
  };
}

/** The system clock, moved on by hand: a minute passes without waiting for it. */
function aSkewedClock(): Clock & { skip(ms: number): void } {
  let skew = 0;
  return {
    now: () => Date.now() + skew,
    skip(ms) {
      skew += ms;
    },
  };
}

const aMessage = (over: Partial<NewOutboxMessage> = {}): NewOutboxMessage => ({
  topic: 'orders.created',
  key: null,
  payload: { n: 1 },
  headers: {},
  maxAttempts: 10,
  ...over,
});

/** The lines about destinations (not rows), above DEBUG: what an operator at `logLevel: info` sees of them. */
const destinationLines = (lines: readonly LogLine[]) =>
  lines.filter((l) => l.message.startsWith('outbox destination') && l.level !== 'debug');

describe.skipIf(needs.skipReason)('a failing destination in the outbox log', () => {
  const db = useTestStore('outbox_destination_health', { url: needs.url.postgres, storePoolSize: 2 });
  let receiver: HttpReceiver;

  beforeAll(async () => {
    receiver = await startHttpReceiver();
  });
  afterEach(async () => {
    receiver.reset();
    await db.clear();
  });
  afterAll(async () => {
    await receiver?.close();
  });

  /** Waits until the row is due again (the hooks poller retries after exactly 1 s). */
  async function untilDue(id: RowId): Promise<void> {
    const row = await db.store.outbox.get(id);
    const wait = (row?.scheduledAt.getTime() ?? 0) - Date.now() + 20;
    if (wait > 0) await sleep(wait);
  }

  it('warns when a destination answering 503 starts failing, at most once a minute with the retries since, and says when it delivers again', async () => {
    // Prepare
    receiver.handle((_request, response) => {
      response.writeHead(503).end('busy');
    });
    const clock = aSkewedClock();
    const logger = aRecordingLogger();
    const { poller, close } = aHooksPoller(db.store.outbox, receiver.url, { logger, clock });
    const drain = () => poller.drain({ deadline: clock.now() + 10_000 });
    const [id] = (await db.store.outbox.insert([aMessage()])) as [RowId];

    // Act
    try {
      await drain(); // fails: the destination starts failing, a WARN at once
      await untilDue(id);
      await drain(); // fails again within the minute: counted, no line
      const afterTwo = destinationLines(logger.lines).length;
      clock.skip(61_000);
      await untilDue(id);
      await drain(); // fails a minute later: a second WARN, with both retries since the first
      receiver.reset(); // answers 200 again
      await untilDue(id);
      await drain(); // sent: the destination delivers again
      await drain(); // nothing to deliver: no line
      expect(afterTwo).toBe(1);
    } finally {
      await poller.close();
      await close();
    }

    // Assess
    const error = expect.stringMatching(/^HTTP 503\b[\s\S]*busy/);
    expect(destinationLines(logger.lines)).toEqual([
      {
        level: 'warn',
        message: 'outbox destination failing',
        fields: { destination: 'hooks', error, retries: 1, failingForMs: 0 },
      },
      {
        level: 'warn',
        message: 'outbox destination failing',
        fields: { destination: 'hooks', error, retries: 2, failingForMs: expect.any(Number) },
      },
      {
        level: 'info',
        message: 'outbox destination delivers again',
        fields: { destination: 'hooks', retries: 0, failedForMs: expect.any(Number) },
      },
    ]);
    const [, second, recovered] = destinationLines(logger.lines);
    expect(second?.fields.failingForMs).toBeGreaterThanOrEqual(61_000);
    expect(recovered?.fields.failedForMs).toBeGreaterThanOrEqual(61_000);
    expect((await db.store.outbox.get(id))?.state).toBe('Sent');
  });

  it('warns once for a burst of refused connections, with the error, when nothing listens at the destination', async () => {
    // Prepare
    const port = await closedPort();
    const logger = aRecordingLogger();
    const { poller, close } = aHooksPoller(db.store.outbox, `http://127.0.0.1:${port}/hooks`, { logger });
    await db.store.outbox.insert([aMessage(), aMessage(), aMessage({ key: 'k' })]);

    // Act
    try {
      await poller.drain({ deadline: Date.now() + 10_000 });
    } finally {
      await poller.close();
      await close();
    }

    // Assess
    const lines = destinationLines(logger.lines);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 'warn',
      message: 'outbox destination failing',
      fields: { destination: 'hooks', error: expect.stringMatching(/ECONNREFUSED|refused/i) },
    });
  });
});
