/** The operator commands' argument checks and formatting, without a database. */
import type { Store } from '@queuebox/core';
import { openPgliteStore } from '@queuebox/store-postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AdminArgs,
  createProgress,
  formatAge,
  parseDuration,
  planAdminCommand,
  runAdminCommand,
  stateOfWord,
} from '../src/admin-cli.ts';

function args(words: string[], options: Record<string, string> = {}, flags: string[] = []): AdminArgs {
  return { words, options, flags: new Set(flags) };
}

describe('planAdminCommand', () => {
  it('plans every command with its defaults', () => {
    expect(planAdminCommand(args(['stats']))).toEqual({ kind: 'stats' });
    expect(planAdminCommand(args(['outbox', 'list'], { state: 'DEAD', topic: 'orders.paid' }))).toEqual({
      kind: 'list',
      table: 'outbox',
      options: { limit: 50, state: 'Dead', topic: 'orders.paid' },
    });
    expect(
      planAdminCommand(args(['inbox', 'list'], { state: 'processed', cursor: '41', limit: '500' })),
    ).toEqual({
      kind: 'list',
      table: 'inbox',
      options: { limit: 500, state: 'Sent', cursor: '41' },
    });
    expect(planAdminCommand(args(['inbox', 'show', '7']))).toEqual({ kind: 'show', table: 'inbox', id: '7' });
    expect(planAdminCommand(args(['outbox', 'requeue', '4', '5', '4'], {}, ['dry-run']))).toEqual({
      kind: 'requeue',
      table: 'outbox',
      selection: { ids: ['4', '5'] },
      dryRun: true,
      batchSize: 500,
    });
    expect(planAdminCommand(args(['inbox', 'requeue'], { source: 'github', 'batch-size': '10' }))).toEqual({
      kind: 'requeue',
      table: 'inbox',
      selection: { source: 'github' },
      dryRun: false,
      batchSize: 10,
    });
    expect(planAdminCommand(args(['outbox', 'requeue'], {}, ['all']))).toMatchObject({ selection: {} });
    expect(planAdminCommand(args(['outbox', 'replay', '9']))).toEqual({ kind: 'replay', id: '9' });
    expect(planAdminCommand(args(['outbox', 'redact', '9']))).toEqual({
      kind: 'redact',
      table: 'outbox',
      id: '9',
    });
    expect(planAdminCommand(args(['inbox', 'redact', '3']))).toEqual({
      kind: 'redact',
      table: 'inbox',
      id: '3',
    });
    expect(planAdminCommand(args(['purge'], { state: 'processed', 'older-than': '7d' }))).toEqual({
      kind: 'purge',
      tables: ['outbox', 'inbox'],
      state: 'Sent',
      olderThanMs: 7 * 86_400_000,
      batchSize: 500,
      dryRun: false,
    });
    expect(
      planAdminCommand(args(['purge'], { state: 'dead', 'older-than': '1h', table: 'inbox' }, ['yes'])),
    ).toMatchObject({
      tables: ['inbox'],
      state: 'Dead',
      olderThanMs: 3_600_000,
    });
  });

  it.each([
    [args(['stats', 'now']), '"stats" takes no arguments'],
    [args(['stats'], { state: 'dead' }), '--state does not apply to "stats"'],
    [args(['outbox']), 'unknown command "outbox"'],
    [args(['outbox', 'frob']), 'unknown command "outbox frob": use outbox list|show|requeue|replay|redact'],
    [args(['inbox', 'frob']), 'unknown command "inbox frob": use inbox list|show|requeue|redact'],
    [args(['outbox', 'redact']), '"outbox redact" takes one row id'],
    [args(['inbox', 'redact', '1', '2']), '"inbox redact" takes one row id'],
    [args(['inbox', 'redact', 'x']), '"inbox redact" needs a row id (a positive whole number), not "x"'],
    [args(['outbox', 'redact', '1'], {}, ['all']), '--all does not apply to "outbox redact"'],
    [args(['inbox', 'replay', '1']), '"inbox replay" does not exist'],
    [args(['outbox', 'list'], { source: 'x' }), '--source does not apply to "outbox list"'],
    [
      args(['inbox', 'list'], { state: 'sent' }),
      '--state of inbox is one of pending, processing, processed, dead, failed',
    ],
    [args(['outbox', 'list'], { limit: '0' }), '--limit must be a whole number from 1 to 500'],
    [args(['outbox', 'list'], { cursor: 'abc' }), '--cursor needs a row id'],
    [args(['outbox', 'list'], {}, ['all']), '--all does not apply to "outbox list"'],
    [args(['outbox', 'show']), '"outbox show" takes one row id'],
    [args(['outbox', 'show', '0']), '"outbox show" needs a row id (a positive whole number), not "0"'],
    [args(['outbox', 'requeue']), '"outbox requeue" needs row ids, --topic <name>, or --all'],
    [args(['outbox', 'requeue', 'x']), 'needs a row id'],
    [
      args(['outbox', 'requeue'], { topic: 't', 'batch-size': '10001' }),
      '--batch-size must be a whole number',
    ],
    [args(['purge']), '"purge" needs --state sent|processed|dead'],
    [
      args(['purge'], { state: 'pending', 'older-than': '1d' }),
      '--state of "purge" is sent, processed or dead',
    ],
    [args(['purge'], { state: 'dead' }), '"purge" needs --older-than'],
    [args(['purge'], { state: 'dead', 'older-than': '5' }), '--older-than takes a number and a unit'],
    [args(['purge'], { state: 'dead', 'older-than': '1d', table: 'both' }), '--table is outbox or inbox'],
    [args(['purge'], { state: 'dead', 'older-than': '0ms' }), '--older-than must be at least 1h'],
    [args(['purge'], { state: 'sent', 'older-than': '59m' }), '--older-than must be at least 1h'],
    // Past 100 years: a usage error, not the database's `timestamp out of range` (exit 1) nor "at least 1h".
    [args(['purge'], { state: 'dead', 'older-than': '3000000d' }), '--older-than must be at most 36500d'],
    [args(['purge'], { state: 'dead', 'older-than': '36501d' }), '--older-than must be at most 36500d'],
    [
      args(['purge'], { state: 'dead', 'older-than': '999999999999d' }),
      '--older-than must be at most 36500d',
    ],
    [
      args(['purge'], { state: 'dead', 'older-than': '999999999999h' }),
      '--older-than must be at most 36500d',
    ],
    // One selection: given together, one narrowed the other or --all was ignored, without a word.
    [
      args(['outbox', 'requeue', '1'], {}, ['all']),
      '"outbox requeue" takes one selection: row ids, --topic <name>, or --all; not row ids and --all together',
    ],
    [
      args(['outbox', 'requeue'], { topic: 'X' }, ['all']),
      '"outbox requeue" takes one selection: row ids, --topic <name>, or --all; not --topic and --all together',
    ],
    [args(['outbox', 'requeue', '1'], { topic: 'X' }), 'not row ids and --topic together'],
    [
      args(['inbox', 'requeue', '1'], { source: 'S' }, ['all']),
      'not row ids and --source and --all together',
    ],
    // An empty name, refused as the admin API refuses it (invalid_topic), not a requeue of nothing.
    [args(['outbox', 'requeue'], { topic: '' }), '--topic must be a text of 1 to 400 characters, not empty'],
    [args(['inbox', 'requeue'], { source: '' }), '--source must be a text of 1 to 400 characters, not empty'],
    [
      args(['outbox', 'requeue'], { topic: 'x'.repeat(401) }),
      '--topic must be a text of 1 to 400 characters',
    ],
    [args(['outbox', 'list'], { topic: '' }), '--topic must be a text of 1 to 400 characters, not empty'],
    [args(['inbox', 'list'], { source: '' }), '--source must be a text of 1 to 400 characters, not empty'],
  ])('refuses %j: %s', (given, message) => {
    const planned = planAdminCommand(given);

    expect(typeof planned).toBe('string');
    expect(planned).toContain(message);
  });
});

describe('the bounds of --older-than', () => {
  it('takes 1h to 36500d (100 years), the ages the admin API takes', () => {
    expect(
      planAdminCommand(args(['purge'], { state: 'dead', 'older-than': '36500d' }, ['yes'])),
    ).toMatchObject({
      olderThanMs: 36_500 * 86_400_000,
    });
    expect(
      planAdminCommand(args(['purge'], { state: 'dead', 'older-than': '876000h' }, ['yes'])),
    ).toMatchObject({
      olderThanMs: 36_500 * 86_400_000,
    });
  });
});

describe('the usage line of a purge without --older-than', () => {
  it('suggests only ages that purge accepts', () => {
    const message = planAdminCommand(args(['purge'], { state: 'dead' }));
    const examples = /e\.g\. (.*)$/.exec(String(message))?.[1]?.split(', ') ?? [];

    expect(examples.length).toBeGreaterThan(0);
    for (const age of examples) {
      expect(
        planAdminCommand(args(['purge'], { state: 'dead', 'older-than': age }, ['yes'])),
        age,
      ).toMatchObject({
        kind: 'purge',
      });
    }
  });
});

describe('durations, ages and states', () => {
  it('reads a number with a unit', () => {
    expect(['500ms', '45s', '30m', '12h', '7d'].map(parseDuration)).toEqual([
      500, 45_000, 1_800_000, 43_200_000, 604_800_000,
    ]);
    expect(['', '5', '1.5h', '-1h', '1w'].map(parseDuration)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });

  it('shows an age in days, hours, minutes and seconds', () => {
    expect(formatAge(65_000)).toBe('1m 5s');
    expect(formatAge(90_061_000)).toBe('1d 1h 1m 1s');
    expect(formatAge(250)).toBe('250ms');
  });

  it('reads state words per table', () => {
    expect(stateOfWord('inbox', 'processed')).toBe('Sent');
    expect(stateOfWord('outbox', 'processed')).toBeUndefined();
    expect(stateOfWord('outbox', 'FAILED')).toBe('Failed');
  });
});

describe('createProgress', () => {
  it('rewrites one line on a terminal and ends it once', () => {
    const written: string[] = [];
    const progress = createProgress({ err: (t) => written.push(t), isTTY: true, json: false });

    progress.update('step 1');
    progress.update('step 2');
    progress.done();
    progress.done();

    expect(written.join('')).toBe('\r\x1b[2Kstep 1\r\x1b[2Kstep 2\n');
  });

  it('writes plain lines elsewhere, and nothing when the output is JSON', () => {
    const plain: string[] = [];
    const quiet: string[] = [];
    const lines = createProgress({ err: (t) => plain.push(t), json: false });
    const json = createProgress({ err: (t) => quiet.push(t), json: true });

    for (const p of [lines, json]) {
      p.update('step 1');
      p.done();
    }

    expect(plain).toEqual(['step 1\n']);
    expect(quiet).toEqual([]);
  });
});

describe('text output of what senders chose (issue 13)', () => {
  // An event type that retitles the window (OSC), clears the screen (CSI), hides text (C1 CSI) and reverses it.
  const hostile = 'pay\u001b]0;owned\u0007\u001b[2J\u009b31m\u202etxt.exe\u2066x';
  let store: Store;
  let inboxId = '';
  let outboxId = '';
  beforeAll(async () => {
    store = await openPgliteStore();
    await store.migrate();
    const dead = await store.inbox.storeDead(
      {
        source: `src${hostile}`,
        idempotencyKey: `key${hostile}`,
        eventType: hostile,
        aggregateId: null,
        correlationId: null,
        payload: { t: hostile },
        headers: {},
        maxAttempts: 3,
      },
      `gave up: ${hostile}\nsecond line`,
    );
    inboxId = dead.id;
    [outboxId = ''] = await store.outbox.insert([
      { topic: `t.${hostile}`, key: hostile, payload: {}, headers: {}, maxAttempts: 3 },
    ]);
    // PGlite creates and migrates its data directory in 15–20 s alone on a loaded 2-core machine.
  }, 120_000);
  afterAll(async () => {
    await store?.close();
  });
  // biome-ignore lint/suspicious/noControlCharactersInRegex: looking for them is the point
  const CONTROLS = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

  it.each([
    ['inbox list', () => ({ kind: 'list', table: 'inbox', options: { limit: 50 } })],
    ['outbox list', () => ({ kind: 'list', table: 'outbox', options: { limit: 50 } })],
    ['inbox show', () => ({ kind: 'show', table: 'inbox', id: inboxId })],
    ['outbox show', () => ({ kind: 'show', table: 'outbox', id: outboxId })],
    ['stats', () => ({ kind: 'stats' })],
  ])('%s shows control and bidi characters as escapes, never raw', async (_name, plan) => {
    let written = '';
    const output = { out: (t: string) => (written += t), err: (t: string) => (written += t), json: false };
    const code = await runAdminCommand(store, plan() as never, output);
    expect(code).toBe(0);
    expect(written).not.toMatch(CONTROLS);
    expect(written).toMatch(/\\u\{1b\}|\\u001b/);
  });
});
