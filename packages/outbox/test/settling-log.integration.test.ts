/**
 * The log lines of settling, with a recording logger: a retry the store turns into dead (the row's last attempt)
 * is logged at WARN like every other dead row, each retry at DEBUG, with the row's id and the error, never its
 * payload or header values.
 */
import type { LogFields, Logger, NewOutboxMessage, RowId } from '@queuebox/core';
import { requireServices, useTestStore } from '@queuebox/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { aHooksPoller } from './support/hooks-poller.ts';
import { type HttpReceiver, startHttpReceiver } from './support/http-receiver.ts';

const needs = await requireServices('outbox settling log', ['postgres']);

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

const PAYLOAD_MARK = 'payload-value-7f3a';
const HEADER_MARK = 'header-value-91c2';

const aMessage = (over: Partial<NewOutboxMessage> = {}): NewOutboxMessage => ({
  topic: 'orders.created',
  key: 'order-7',
  payload: { card: PAYLOAD_MARK },
  headers: { 'x-trace': HEADER_MARK },
  maxAttempts: 3,
  ...over,
});

describe.skipIf(needs.skipReason)('outbox settling logs', () => {
  const db = useTestStore('outbox_settling_log', { url: needs.url.postgres, storePoolSize: 2 });
  let receiver: HttpReceiver;

  beforeAll(async () => {
    receiver = await startHttpReceiver();
  });
  afterEach(async () => {
    await db.clear();
  });
  afterAll(async () => {
    await receiver?.close();
  });

  async function drainOnce(logger: Logger): Promise<void> {
    const { poller, close } = aHooksPoller(db.store.outbox, receiver.url, { logger });
    try {
      await poller.drain({ deadline: Date.now() + 10_000 });
    } finally {
      await poller.close();
      await close();
    }
  }

  it('warns once per row whose last attempt failed and logs each retry at debug, with id, attempt and error', async () => {
    receiver.handle((_request, response) => {
      response.writeHead(503).end('busy');
    });
    const [last, retried] = (await db.store.outbox.insert([
      aMessage({ key: 'order-7', maxAttempts: 1 }),
      aMessage({ key: 'order-8', maxAttempts: 3 }),
    ])) as [RowId, RowId];
    const logger = aRecordingLogger();

    await drainOnce(logger);

    const dead = logger.lines.filter((l) => l.message === 'outbox row dead');
    const retries = logger.lines.filter((l) => l.message === 'outbox row retried');
    expect(dead).toEqual([
      {
        level: 'warn',
        message: 'outbox row dead',
        fields: {
          id: last,
          topic: 'orders.created',
          key: 'order-7',
          destination: 'hooks',
          attempt: 1,
          maxAttempts: 1,
          reason: 'no attempt left',
          error: expect.stringMatching(/^HTTP 503\b[\s\S]*busy/),
        },
      },
    ]);
    expect(retries).toEqual([
      {
        level: 'debug',
        message: 'outbox row retried',
        fields: {
          id: retried,
          destination: 'hooks',
          attempt: 1,
          maxAttempts: 3,
          delayMs: 1000,
          error: expect.stringMatching(/^HTTP 503\b[\s\S]*busy/),
        },
      },
    ]);
    expect((await db.store.outbox.get(last))?.state).toBe('Dead');
    const logged = JSON.stringify(logger.lines);
    expect(logged).not.toContain(PAYLOAD_MARK);
    expect(logged).not.toContain(HEADER_MARK);
  });

  it('warns of the first dead row of a destination at once, and of the others in one line with their count and first ids', async () => {
    receiver.handle((_request, response) => {
      response.writeHead(503).end('busy');
    });
    const ids = (await db.store.outbox.insert(
      Array.from({ length: 25 }, (_, i) => aMessage({ key: `order-${i}`, maxAttempts: 1 })),
    )) as RowId[];
    const logger = aRecordingLogger();

    // The poller's close writes what was counted (at the latest, the interval's end does).
    await drainOnce(logger);

    const dead = logger.lines.filter((l) => l.message === 'outbox row dead');
    expect(dead).toHaveLength(2);
    expect(dead[0]?.fields).toEqual(
      expect.objectContaining({ destination: 'hooks', reason: 'no attempt left' }),
    );
    expect(dead[0]?.fields.repeated).toBeUndefined();
    expect(dead[1]?.fields).toEqual(
      expect.objectContaining({ destination: 'hooks', repeated: 24, repeatedInMs: 60_000 }),
    );
    const listed = dead[1]?.fields.repeatedIds as RowId[];
    expect(listed).toHaveLength(20);
    expect(new Set([dead[0]?.fields.id, ...listed]).size).toBe(21);
    for (const id of listed) expect(ids).toContain(id);
  });

  it('logs a permanent answer (410) with attempts left as a retry, not as dead', async () => {
    receiver.handle((_request, response) => {
      response.writeHead(410).end('gone');
    });
    const [gone] = (await db.store.outbox.insert([aMessage({ key: 'order-9' })])) as [RowId];
    const logger = aRecordingLogger();

    await drainOnce(logger);

    expect(logger.lines.filter((l) => l.message === 'outbox row dead')).toEqual([]);
    expect(logger.lines.filter((l) => l.message === 'outbox row retried')).toEqual([
      {
        level: 'debug',
        message: 'outbox row retried',
        fields: expect.objectContaining({
          id: gone,
          destination: 'hooks',
          attempt: 1,
          maxAttempts: 3,
          error: expect.stringMatching(/^HTTP 410\b/),
        }),
      },
    ]);
    expect(JSON.stringify(logger.lines)).not.toContain(PAYLOAD_MARK);
  });
});
