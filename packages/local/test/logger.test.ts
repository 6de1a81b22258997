import { describe, expect, it } from 'vitest';
import { createLogger } from '../src/logger.ts';

describe('createLogger (issue 13)', () => {
  it('writes C1, DEL and bidi controls a sender chose as \\u escapes: the line parses to the same text', () => {
    // Prepare: an event type with a C1 CSI (clears the screen on terminals that take 8-bit controls) and an RLO.
    const lines: string[] = [];
    const logger = createLogger({ level: 'info', write: (line) => lines.push(line) });
    const eventType = 'pay\u009b2J\u202etxt.exe\u2066\u007f\u001b]0;x\u0007';
    // Act
    logger.info('stored', { eventType });
    // Assess
    const [line = ''] = lines;
    // biome-ignore lint/suspicious/noControlCharactersInRegex: looking for them is the point
    expect(line).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/);
    expect((JSON.parse(line) as { eventType: string }).eventType).toBe(eventType);
  });
});

describe('createLogger levels', () => {
  it('drops the lines below its level, in children too, and writes the others', () => {
    // Prepare
    const lines: string[] = [];
    const logger = createLogger({ level: 'warn', write: (line) => lines.push(line) });
    const child = logger.child({ component: 'http' });
    // Act
    logger.debug('d');
    logger.info('i');
    child.info('ci');
    logger.warn('w');
    child.error('ce', { n: 1 });
    // Assess
    const written = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(written.map((l) => [l.level, l.message])).toEqual([
      ['WARN', 'w'],
      ['ERROR', 'ce'],
    ]);
    expect(written[1]).toMatchObject({ component: 'http', n: 1 });
  });
});

describe('createLogger fields named as the keys Powertools writes itself', () => {
  it('writes them as field_<name> instead of dropping them with a warning of their own', () => {
    // Prepare
    const lines: string[] = [];
    const logger = createLogger({ level: 'info', write: (line) => lines.push(line) });
    // Act
    logger.warn('configuration warning', { path: 'sources.a', message: 'the text', level: 3 });
    logger.child({ timestamp: 'child' }).info('line', { service: 'x', sampling_rate: 1 });
    // Assess
    const written = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(written).toHaveLength(2);
    expect(written[0]).toMatchObject({
      level: 'WARN',
      message: 'configuration warning',
      path: 'sources.a',
      field_message: 'the text',
      field_level: 3,
    });
    expect(written[1]).toMatchObject({
      level: 'INFO',
      message: 'line',
      field_timestamp: 'child',
      field_service: 'x',
      field_sampling_rate: 1,
    });
  });
});

describe('createLogger error fields', () => {
  it('writes error as one object on every line: text as { message }, an Error as { name, message, code }', () => {
    // Prepare
    const lines: string[] = [];
    const logger = createLogger({ level: 'info', write: (line) => lines.push(line) });
    const failure = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    // Act
    logger.warn('outbox row dead', { id: '1', error: 'network error: connect ECONNREFUSED 127.0.0.1:1' });
    logger.child({ error: 'from the child' }).warn('inherited');
    logger.error('store failed', { error: failure });
    logger.warn('already an object', { error: { code: 'unauthorized', message: 'no' } });
    logger.info('none', { id: '2' });
    // Assess: a log store that maps `error` as an object accepts every line.
    const errors = lines.map((line) => (JSON.parse(line) as { error?: unknown }).error);
    expect(errors).toEqual([
      { message: 'network error: connect ECONNREFUSED 127.0.0.1:1' },
      { message: 'from the child' },
      { name: 'Error', message: 'connect ECONNREFUSED', code: 'ECONNREFUSED' },
      { code: 'unauthorized', message: 'no' },
      undefined,
    ]);
  });
});
